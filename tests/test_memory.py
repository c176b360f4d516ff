"""The memory model of the indices (`sweep.memory`): its shapes against the layouts the engine computes, the
refusal of a space that a trial's memory cannot hold, and `plan`'s line."""

import pytest
import torch

from sweep import memory
from sweep.cli import main
from sweep.config.errors import SpecError
from sweep.config.space import load_space
from sweep.measures.similarity import to_2d

SPACE = "search_spaces/tlm_vs_dm_fmnist.yaml"


@pytest.mark.parametrize("layout", ["flatten", "positions", "pooled"])
@pytest.mark.parametrize("shape", [(8, 5, 3), (7, 6), (11,)])
def test_matrix_shapes_are_those_the_indices_see(layout, shape):
    """The model's (rows, columns) of n images against `to_2d` on a real tensor."""
    acts = torch.zeros(4, *shape)
    want = to_2d(acts, layout).shape if len(shape) > 1 else (4, shape[0])
    assert memory.matrix(shape, layout, 4) == tuple(want)


def test_the_streamed_forms_do_not_grow_with_the_rows():
    """Per-position rows: the covariance forms' workspace is the same for 1,000 and 10,000 images."""
    for name in ("cka", "opd", "pwcca", "rank"):
        assert memory.index_numbers(name, 1_024_000, 64, 64) == memory.index_numbers(name, 10_240_000, 64, 64)


def test_a_space_whose_indices_do_not_fit_memory_per_trial_is_refused_with_what_fits(tmp_path):
    text = open(SPACE).read() + "  memory_per_trial: 0.05\n"
    path = tmp_path / "space.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        load_space(path)
    assert err.value.field == "resources.memory_per_trial"
    assert "similarity_samples" in err.value.hint or "samples" in err.value.hint
    need = max(memory.needs(load_space(SPACE)), key=lambda x: x.bytes)
    fits = need.most_images(int(0.05 * memory.GiB))
    assert need.bytes_at(fits) <= 0.05 * memory.GiB < need.bytes_at(fits + 1)
    assert f"{fits:,}" in str(err.value)
    path.write_text(open(SPACE).read() + "  memory_per_trial: 4\n")
    assert load_space(path).memory_per_trial == 4


def test_plan_says_what_the_largest_unit_of_each_kind_needs(capsys):
    assert main(["plan", SPACE]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "memory:" in line]
    assert len(lines) == 2 and "trial unit" in lines[0] and "reptest unit" in lines[1]
    assert "similarity_samples = 500" in lines[0] and "samples = 1,000" in lines[1]
