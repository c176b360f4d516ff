"""Stitched networks as artefacts: a trial's stitcher, as `save_stitcher` kept it, put back between its donors'
halves, for units that use the stitched network (inversion). A trial recorded before stitchers were kept, or not
run yet, is fitted again from its spec (`sweep.kinds.trial.run.refit`) and kept, and the caller is told."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from sweep.config.trial import TrialSpec
from sweep.kinds.base import RunContext
from sweep.kinds.trial.run import assemble, refit
from sweep.store.results import load_torch
from sweep.worker.splits import worker_splits


@dataclass
class Stitched:
    """f<=i, the fitted stitcher and the whole end network (its stages after j follow the stitch); `refitted`:
    the stitcher was fitted here, the trial had kept none."""

    front: nn.Module
    stitcher: nn.Module
    end_model: nn.Module
    refitted: bool

    def upto(self, end_point: str, point: str | None = None) -> nn.Sequential:
        """The stitched network up to `point` of the end network (at or after the trial's `end_point`; None:
        the whole network, to its logits)."""
        names = self.end_model.stage_names
        stop = names.index(point) + 1 if point else len(names)
        stages = [self.end_model.stage(n) for n in names[names.index(end_point) + 1 : stop]]
        return nn.Sequential(self.front, self.stitcher, *stages)


def stitched_network(spec: TrialSpec, ctx: RunContext) -> Stitched:
    """The trial's stitched network in eval mode, from its kept stitcher (or fitted again and kept), on
    `ctx.device`, from `ctx.sweep_dir`'s zoo (and its data, for a refit)."""
    sweep, device = ctx.sweep_dir, ctx.device
    loc = sweep.stitcher(spec.trial_id)
    if not loc.exists():
        p = refit(spec, ctx)
        return Stitched(p.front.eval(), p.stitcher.eval(), p.end_model.eval(), refitted=True)
    splits = worker_splits(  # on the host: `assemble` moves only its two-image shape probe
        spec.dataset,
        spec.train_size,
        spec.val_size,
        spec.test_size,
        torch.device("cpu"),
        root=ctx.data_root,
        download=ctx.download,
    )
    p = assemble(spec, splits, sweep, device)
    state = load_torch(loc, map_location=device)
    p.stitcher.load_state_dict(state["stitcher"])
    for half, moved in ((p.front, state["front"]), (p.end, state["end"])):
        if moved:  # `donor_bn: update`: the BatchNorm statistics the fit left
            own = dict(half.named_buffers())
            with torch.no_grad():
                for name, value in moved.items():
                    own[name].copy_(value)
    return Stitched(p.front.eval(), p.stitcher.eval(), p.end_model.eval(), refitted=False)
