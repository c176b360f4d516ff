"""`file:` donors: a user's checkpoint mapped onto a registered architecture."""

import copy
import dataclasses
from pathlib import Path

import pyautoattack
import pytest
import torch

from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.kinds.donor.run import run_donor
from sweep.kinds.trial.run import run_trial
from sweep.models.base import build, split
from sweep.models.external import load_checkpoint, read_state_dict
from sweep.stitching.objectives import OBJECTIVES, FitContext
from sweep.stitching.stitcher import Stitcher
from sweep.store.results import SweepDir
from tests.conftest import TINY_SPACE
from tests.ties import TIE_MARGIN, assert_reproduces, end_logits, margins

AUTOATTACK_RESNET18 = Path(pyautoattack.__file__).parent / "examples" / "model_test.pt"


@pytest.fixture(scope="module")
def autoattack_resnet18():
    """The CIFAR-10 ResNet-18 that the pyautoattack wheel ships (kuangliu layout, no normalisation)."""
    return load_checkpoint(
        AUTOATTACK_RESNET18, "resnet18", in_channels=3, num_classes=10, mean=(0.0,), std=(1.0,), image_size=32
    )


@pytest.mark.slow  # DM at every point of a real ResNet-18: about 70 s of CPU on a 2-core x86-64 CPU
def test_autoattack_resnet18_loads_and_dm_self_stitches_exactly(autoattack_resnet18):
    model = autoattack_resnet18
    torch.manual_seed(0)
    # K = 64 images: at layer4 (512 channels, 4x4) that is 1,024 equations for 513 unknowns per channel
    fit_x, eval_x = torch.rand(64, 3, 32, 32), torch.rand(64, 3, 32, 32)
    with torch.no_grad():
        logits = model(eval_x)
        labels = logits.argmax(1)
    assert len(labels.unique()) > 1, "real weights: not a constant classifier"

    class Splits:  # direct matching reads only the first K training images
        train_x = fit_x

    for point in model.stitch_points:
        front, end = split(model, point)
        with torch.no_grad():
            shape = front(fit_x[:1]).shape
        stitcher = Stitcher.for_shapes(shape, shape)
        ctx = FitContext(
            front=front,
            end=end,
            stitcher=stitcher,
            splits=Splits,
            device=torch.device("cpu"),
            spec=type("Spec", (), {"dm_samples": 64})(),
            end_front=front,
        )
        OBJECTIVES["dm"].fit(ctx)
        with torch.no_grad():
            stitched = end(stitcher(front(eval_x)))
        # the identity up to rounding: the logits move by rounding only, and a prediction can change only where the
        # two top logits are closer than twice that move (on any CPU; none do on the machines measured)
        moved = float((stitched - logits).abs().max())
        assert moved < 1e-3 * float(logits.abs().max()), (point, moved)
        flipped = stitched.argmax(1) != labels
        assert (margins(logits)[flipped] <= 2 * moved).all(), point


def test_wrapped_and_data_parallel_checkpoints_load(tmp_path, autoattack_resnet18):
    sd = torch.load(AUTOATTACK_RESNET18, map_location="cpu", weights_only=True)
    path = tmp_path / "wrapped.pt"
    torch.save({"state_dict": {f"module.{k}": v for k, v in sd.items()}, "epoch": 3}, path)
    assert set(read_state_dict(path)) == set(sd)
    model = load_checkpoint(path, "resnet18", in_channels=3, num_classes=10, mean=(0.0,), std=(1.0,), image_size=32)
    x = torch.rand(2, 3, 32, 32)
    # the same weights in the same architecture, the same batch: the same kernels in the same order (exact)
    assert torch.equal(model(x), autoattack_resnet18(x))


def test_a_checkpoint_that_does_not_fit_names_the_keys():
    with pytest.raises(ValueError) as err:
        load_checkpoint(
            AUTOATTACK_RESNET18, "resnet50", in_channels=3, num_classes=10, mean=(0.0,), std=(1.0,), image_size=32
        )
    assert "missing keys" in str(err.value) and "resnet50" in str(err.value)


def _file_space(path: Path) -> dict:
    space = copy.deepcopy(TINY_SPACE)
    space["donors"] = {"mine": {"file": str(path), "arch": "resnet_tiny", "mean": [0.1], "std": [0.25]}}
    space["stitching"]["pairs"] = [{"front": "file:mine", "end": "file:mine"}]
    space["stitching"]["objectives"] = ["dm"]
    return space


@pytest.mark.slow
def test_file_donor_runs_through_the_zoo_stage_and_a_trial(tmp_path):
    torch.manual_seed(0)
    trained_elsewhere = build("resnet_tiny", 1, 10, (0.1,), (0.25,), image_size=28)
    ckpt = tmp_path / "mine.pt"
    torch.save(trained_elsewhere.state_dict(), ckpt)
    sweep = parse_space(_file_space(ckpt))
    donor = sweep.donors["mine"]
    assert donor.ref == "file:mine" and donor.source == "file"
    sweep_dir = SweepDir(tmp_path / "results", sweep.name)
    sweep_dir.create()
    row = run_donor(donor, sweep.donor_evals[donor.name], sweep_dir, torch.device("cpu"))
    assert row["status"] == "done", row.get("error")
    assert row["training"] == "file" and row["trained_now"] is False
    for spec in sweep.trials:
        out = run_trial(dataclasses.replace(spec, n_eval_robust=0), sweep_dir)
        assert out["status"] == "done", out.get("error")
        assert_reproduces(out, *end_logits(sweep_dir, spec))  # DM self-stitching, up to near ties


def test_file_donor_identity_is_its_content_not_its_path(tmp_path):
    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    torch.save(build("resnet_tiny", 1, 10, (0.5,), (0.5,)).state_dict(), a)
    b.write_bytes(a.read_bytes())
    assert parse_space(_file_space(a)).donors["mine"].donor_key == parse_space(_file_space(b)).donors["mine"].donor_key


def test_file_donor_errors(tmp_path):
    with pytest.raises(SpecError, match=r"^donors.mine.file: expected a checkpoint file"):
        parse_space(_file_space(tmp_path / "absent.pt"))
    ckpt = tmp_path / "m.pt"
    ckpt.write_bytes(b"not a checkpoint")  # unreadable: refused by `plan`, naming the file
    with pytest.raises(SpecError, match=r"^donors.mine.file: expected a PyTorch state dict .*UnpicklingError"):
        parse_space(_file_space(ckpt))
    torch.save({}, ckpt)  # no weights: refused by `plan`, naming the donor's arch and the missing keys
    with pytest.raises(SpecError, match=r"^donors.mine.arch: expected an architecture the checkpoint .* fits, found"):
        parse_space(_file_space(ckpt))
    torch.save(build("vit_tiny_cpu", 1, 10, (0.5,), (0.5,)).state_dict(), ckpt)  # a ViT, declared a ResNet
    with pytest.raises(SpecError, match=r"^donors.mine.arch: .*found 'resnet_tiny' \(the checkpoint does not fit"):
        parse_space(_file_space(ckpt))
    torch.save(build("resnet_tiny", 1, 10, (0.5,), (0.5,)).state_dict(), ckpt)
    space = _file_space(ckpt)
    space["stitching"]["pairs"] = [{"front": "zoo:mine", "end": "file:mine"}]
    with pytest.raises(SpecError, match=r"^stitching.pairs\[0\].front: expected 'file:mine'"):
        parse_space(space)


def _robustbench_space(model_dir: Path, name: str = "Sehwag2021Proxy_R18") -> dict:
    space = copy.deepcopy(TINY_SPACE)
    space["donors"] = {"f_r1": {"robustbench": f"cifar10/Linf/{name}", "arch": "resnet18", "model_dir": str(model_dir)}}
    space["stitching"]["pairs"] = [{"front": "robustbench:f_r1", "end": "robustbench:f_r1"}]
    return space


def test_robustbench_donor_loads_by_name_from_a_local_model_dir(tmp_path, autoattack_resnet18):
    from sweep.models.external import load_robustbench

    # RobustBench keeps checkpoints at MODEL_DIR/<dataset>/<threat>/<name>.pt and downloads only if absent:
    # stand in the AutoAttack ResNet-18 weights (the same architecture) for the real Sehwag2021Proxy_R18.
    folder = tmp_path / "cifar10" / "Linf"
    folder.mkdir(parents=True)
    (folder / "Sehwag2021Proxy_R18.pt").write_bytes(AUTOATTACK_RESNET18.read_bytes())
    donor = parse_space(_robustbench_space(tmp_path)).donors["f_r1"]
    assert donor.ref == "robustbench:f_r1" and donor.robustbench_id == "cifar10/Linf/Sehwag2021Proxy_R18"
    model = load_robustbench(donor.robustbench_id, donor.arch, donor.path, in_channels=3, num_classes=10, image_size=32)
    x = torch.rand(2, 3, 32, 32)
    assert torch.allclose(model(x), autoattack_resnet18(x), atol=1e-5)
    assert model.stitch_points[0] == "layer1.0"


def test_unknown_robustbench_name_says_how_to_list_them(tmp_path):
    with pytest.raises(SpecError) as err:
        parse_space(_robustbench_space(tmp_path, name="Sewhag2021Proxy_R18"))  # a typo
    msg = str(err.value)
    assert msg.startswith("donors.f_r1.robustbench: expected a model RobustBench lists for cifar10/Linf")
    assert "robustbench_models('cifar10', 'Linf')" in msg and "Sehwag2021Proxy_R18" in msg


def test_robustbench_resnet50_with_its_own_normalisation_buffers_maps_exactly(tmp_path):
    """Engstrom2019Robustness (Balogh & Jelasity 2023's f_R5) keeps its input normalisation as `mu`/`sigma` buffers."""
    from sweep.models.external import _import_robustbench, load_robustbench

    _import_robustbench()
    from robustbench.model_zoo import model_dicts
    from robustbench.model_zoo.enums import BenchmarkDataset, ThreatModel

    torch.manual_seed(0)
    reference = model_dicts[BenchmarkDataset.cifar_10][ThreatModel.Linf]["Engstrom2019Robustness"]["model"]()
    folder = tmp_path / "cifar10" / "Linf"
    folder.mkdir(parents=True)
    torch.save(reference.state_dict(), folder / "Engstrom2019Robustness.pt")
    model = load_robustbench(
        "cifar10/Linf/Engstrom2019Robustness", "resnet50", tmp_path, in_channels=3, num_classes=10, image_size=32
    )  # raises unless it computes what RobustBench's does
    assert torch.allclose(model.stages["stem"][0].mean.flatten(), reference.mu.flatten())


@pytest.mark.parametrize(
    "name,arch",
    [("Rade2021Helper_R18_extra", "dm_preact_resnet18"), ("Gowal2021Improving_28_10_ddpm_100m", "dm_wrn28_10")],
)
def test_robustbench_deepmind_layouts_map_exactly(tmp_path, name, arch):
    """Balogh & Jelasity 2023's f_R4 and f_R6: DeepMind's PreActResNet / WideResNet layouts, Swish, normalisation
    constants
    outside the state dict. `load_robustbench` raises unless the mapped net computes what RobustBench's does."""
    from sweep.models.external import _import_robustbench, load_robustbench

    _import_robustbench()
    from robustbench.model_zoo import model_dicts
    from robustbench.model_zoo.enums import BenchmarkDataset, ThreatModel

    torch.manual_seed(0)
    reference = model_dicts[BenchmarkDataset.cifar_10][ThreatModel.Linf][name]["model"]()
    folder = tmp_path / "cifar10" / "Linf"
    folder.mkdir(parents=True)
    torch.save(reference.state_dict(), folder / f"{name}.pt")
    model = load_robustbench(f"cifar10/Linf/{name}", arch, tmp_path, in_channels=3, num_classes=10, image_size=32)
    assert model.stitch_points == build(arch, 3, 10, (0.0,), (1.0,)).stitch_points


def test_two_layouts_of_one_architecture_can_be_stitched(tmp_path):
    space = _robustbench_space(tmp_path, name="Rade2021Helper_R18_extra")
    space["donors"]["f_r1"]["arch"] = "dm_preact_resnet18"
    space["donors"]["plain"] = {"arch": "preact_resnet18", "epochs": 1}
    space["stitching"].update(pairs=[{"front": "robustbench:f_r1", "end": "zoo:plain"}], stitch_points="all")
    assert len(parse_space(space).trials) == 8 * 2
    space["donors"]["plain"]["arch"] = "resnet50"
    with pytest.raises(SpecError, match=r"^stitching.pairs\[0\]: expected front and end with the same stitch"):
        parse_space(space)


@pytest.mark.slow
def test_autoattack_resnet18_as_a_file_donor_on_cifar10_files(tmp_path, autoattack_resnet18, monkeypatch):
    """The whole `file:` path on CIFAR-10 in its own format: spec -> zoo stage -> DM self-stitching trials."""
    import pickle

    import numpy as np
    import torchvision.datasets
    import torchvision.datasets.cifar

    # tiny CIFAR-10 files; md5 checks are for the real files (see tests/sweep/data/test_torchvision_sets.py)
    monkeypatch.setattr(torchvision.datasets.CIFAR10, "_check_integrity", lambda self: True)
    monkeypatch.setattr(torchvision.datasets.cifar, "check_integrity", lambda path, md5=None: True)
    rng = np.random.default_rng(0)
    folder = tmp_path / "data" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        # label the images as the network does, so that the end model's accuracy is 1 and relative accuracy
        # measures agreement with it; of 100 random images keep the 20 farthest from a tie (top-two logit margin),
        # so that no kernel's rounding can flip a label on any CPU: the exact claims below hold by construction
        images = rng.integers(0, 256, (100, 3072), dtype=np.uint8)
        x = torch.from_numpy(images).view(-1, 3, 32, 32).float() / 255
        with torch.no_grad():
            logits = autoattack_resnet18(x)
        keep = margins(logits).argsort(descending=True)[:20]
        assert margins(logits)[keep].min() > 100 * TIE_MARGIN
        images, labels = images[keep.numpy()], logits[keep].argmax(1).tolist()
        (folder / name).write_bytes(pickle.dumps({"data": images, "labels": labels}))
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": [str(i) for i in range(10)]}))

    space = copy.deepcopy(TINY_SPACE)
    space["data"] = {"dataset": "cifar10", "root": str(tmp_path / "data"), "download": False, "val_size": 10}
    space["donors"] = {"aa": {"file": str(AUTOATTACK_RESNET18), "arch": "resnet18"}}
    space["stitching"].update(
        pairs=[{"front": "file:aa", "end": "file:aa"}], objectives=["dm"], stitch_points="all", dm_samples=90
    )
    space["evaluation"] = {"eps": 0.03137254901960784, "iterations": 2, "n_eval_robust": 0}
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path / "results", sweep.name)
    sweep_dir.create()
    row = run_donor(
        sweep.donors["aa"],
        sweep.donor_evals["aa"],
        sweep_dir,
        torch.device("cpu"),
        data_root=sweep.data_root,
        download=False,
    )
    assert row["status"] == "done" and row["clean_acc"] == 1.0, row.get("error")
    for spec in sweep.trials:
        out = run_trial(spec, sweep_dir, data_root=sweep.data_root, download=False)
        assert out["status"] == "done", out.get("error")
        assert out["relative_acc"] == 1.0, spec.front_point  # exact: no test image is within 0.1 of a tie


def test_timm_vit_checkpoints_map_onto_vit_ti_16_and_compute_what_timm_computes(tmp_path, monkeypatch):
    """Balogh & Jelasity 2025's ImageNet ViT-Ti: a checkpoint of timm's `vit_tiny_patch16_224` (DeiT-Ti's keys,
    here wrapped as DeiT's releases are) loads onto `vit_ti_16`; its logits and its tokens after a block are
    timm's own; a mapping that computes something else is refused."""
    from timm.models.vision_transformer import VisionTransformer

    from sweep.models.external import _check_timm

    torch.manual_seed(0)
    reference = VisionTransformer(img_size=32, patch_size=16, num_classes=5, embed_dim=192, depth=12, num_heads=3)
    with torch.no_grad():  # every weight away from its initialisation, so a mis-mapped one shows
        for p in reference.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    reference.eval()
    torch.save({"model": reference.state_dict(), "epoch": 300}, tmp_path / "deit.pth")
    mean, std = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])
    kw = dict(in_channels=3, num_classes=5, mean=tuple(mean.tolist()), std=tuple(std.tolist()), image_size=32)
    from sweep.models import external

    checked = []
    monkeypatch.setattr(external, "_check_timm", lambda *args: checked.append(args) or _check_timm(*args))
    model = load_checkpoint(tmp_path / "deit.pth", "vit_ti_16", **kw)
    assert len(checked) == 1  # loading runs the check against timm's network
    x = torch.rand(3, 3, 32, 32)
    normalised = (x - mean.view(1, 3, 1, 1)) / std.view(1, 3, 1, 1)
    with torch.no_grad():
        torch.testing.assert_close(model(x), reference(normalised), atol=1e-5, rtol=1e-4)
        front, _ = split(model, "blocks.3")
        tokens = reference.blocks[:4](reference._pos_embed(reference.patch_embed(normalised)))
        torch.testing.assert_close(front(x), tokens, atol=1e-5, rtol=1e-4)
        model.stage("blocks.5").mlp[0].weight.mul_(1.1)
    with pytest.raises(ValueError, match="differs from timm's network"):
        _check_timm(model, reference.state_dict(), 5, 3, 32, "deit.pth")
    with pytest.raises(ValueError, match="does not fit architecture 'vit_ti'"):
        load_checkpoint(tmp_path / "deit.pth", "vit_ti", **kw)  # patch 4: the position embeddings differ


def test_checkpoints_saved_as_the_robustness_library_saves_them_load_and_other_objects_need_the_opt_in(tmp_path):
    """Salman et al.'s checkpoints come from the robustness library's training loop, which saves {'model': the
    DataParallel model's state dict, 'optimizer', 'schedule', 'epoch', 'amp': 'N/A'} with `pickle_module=dill`:
    tensors, containers and plain values, which weights_only loading reads (here written with pickle; written
    with dill 0.4.1, a StepLR and a LambdaLR schedule's files loaded the same way, checked once by hand). A file
    that holds any other pickled object is refused, at `plan`, naming the opt-in; `trust_pickle: true` reads it."""
    import argparse

    model = build("resnet_tiny", 1, 10, (0.1,), (0.25,), image_size=28)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.rand(2, 1, 28, 28)).sum().backward()
    opt.step()  # the optimiser now holds momentum tensors
    schedule = torch.optim.lr_scheduler.StepLR(opt, step_size=30)
    wrapped = {f"module.{k}": v for k, v in model.state_dict().items()}
    saved = {"model": wrapped, "optimizer": opt.state_dict(), "schedule": schedule.state_dict(), "epoch": 90}
    torch.save(dict(saved, amp="N/A"), tmp_path / "robustness.ckpt")
    assert set(read_state_dict(tmp_path / "robustness.ckpt")) == set(model.state_dict())
    torch.save(dict(saved, args=argparse.Namespace(arch="resnet_tiny")), tmp_path / "pickled.ckpt")
    with pytest.raises(ValueError, match=r"holds pickled objects besides tensors.*trust_pickle: true"):
        read_state_dict(tmp_path / "pickled.ckpt")
    assert set(read_state_dict(tmp_path / "pickled.ckpt", trust_pickle=True)) == set(model.state_dict())
    space = _file_space(tmp_path / "pickled.ckpt")
    with pytest.raises(SpecError, match=r"^donors\.mine\.file: .*trust_pickle: true"):
        parse_space(space)
    space["donors"]["mine"]["trust_pickle"] = True
    donor = parse_space(space).donors["mine"]
    assert donor.trust_pickle
    assert dataclasses.replace(donor, trust_pickle=False).donor_key == donor.donor_key  # not part of the identity
