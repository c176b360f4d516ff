"""Image folders stream (`sweep.data.stream`): a split is a list of files decoded in batches by loader
workers, and every consumer of images (donor training and validation, evaluation and AutoAttack, stitcher
fits, probes, indices, CKA, saliency, inversion, t-SNE, pictures) reads it in batches. The proof: every kind
of work runs on a generated image folder while no more than 64 images may be decoded into one tensor, fewer
than any split holds, so a consumer that took a whole split at once would fail."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from PIL import Image

import analysis
from sweep.config.space import parse_space
from sweep.data import stream
from sweep.data.core import make_splits
from sweep.data.declared import register_image_folder
from sweep.kinds.base import RunContext, resolve
from sweep.registry import DATASETS, KINDS
from sweep.store.results import SweepDir

CPU = torch.device("cpu")
SIZE, CLASSES, TRAIN, VAL = 16, 10, 20, 10  # per class: 200 training images, 100 validation images
MOST = 64  # images a stream may decode at once in these tests


def write_folder(root, classes=CLASSES, train=TRAIN, val=VAL, shape=(20, 24), seed=0):
    """`root/{train,val}/<class>/*`: each class a colour (a learnable task), with noise; JPEGs and PNGs,
    wider than tall, so that the resize and the centre crop both act."""
    gen = np.random.default_rng(seed)
    for split, n in (("train", train), ("val", val)):
        for c in range(classes):
            d = root / split / f"n{c:08d}"
            d.mkdir(parents=True)
            colour = np.array([25 * c, 255 - 25 * c, 120 + 13 * c])
            for k in range(n):
                img = np.clip(colour + gen.normal(0, 30, (*shape, 3)), 0, 255).astype(np.uint8)
                Image.fromarray(img).save(d / (f"{k:03d}.png" if k % 3 else f"{k:03d}.JPEG"))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A registered streamed dataset `streamed` under a generated root (removed afterwards)."""
    root = tmp_path_factory.mktemp("data")
    write_folder(root / "streamed")
    register_image_folder("streamed", "streamed", CLASSES * TRAIN, CLASSES * VAL, SIZE)
    yield root
    DATASETS.remove("streamed")


@pytest.fixture
def bounded(monkeypatch):
    monkeypatch.setattr(stream, "LIMIT_BYTES", MOST * 3 * SIZE * SIZE * 4)


def test_a_view_decodes_nothing_until_read_and_its_batches_match_image_by_image(folder, monkeypatch):
    splits = make_splits("streamed", None, 40, None, root=str(folder), download=False)
    assert (len(splits.train_x), len(splits.val_x), len(splits.test_x)) == (160, 40, 100)
    assert splits.train_x.shape == (160, 3, SIZE, SIZE) and splits.image_size == SIZE
    decoded = []
    real = stream.Folder.__getitem__
    monkeypatch.setattr(stream.Folder, "__getitem__", lambda self, i: decoded.append(i) or real(self, i))
    view = splits.test_x[10:30][torch.tensor([3, 0, 7])]
    assert len(view) == 3 and decoded == []  # slicing and indexing choose files, they decode none
    one_by_one = torch.stack([splits.test_x[i] for i in (13, 10, 17)])
    torch.testing.assert_close(view.materialise(), one_by_one, rtol=0, atol=0)  # same file, same decoder
    # the loader's worker processes give the in-process decoder's pixels, in the order asked for
    order = torch.randperm(100, generator=torch.Generator().manual_seed(0))
    with stream.decoding_with(2):
        streamed = torch.cat(list(stream.chunks(splits.test_x, 32, order)))
    with stream.decoding_with(0):
        direct = torch.cat(list(stream.chunks(splits.test_x, 32, order)))
    torch.testing.assert_close(streamed, direct, rtol=0, atol=0)
    assert streamed.dtype == torch.float32 and 0 <= float(streamed.min()) and float(streamed.max()) <= 1


def test_pixels_are_the_resized_and_centre_cropped_file(tmp_path):
    """Against an independent formulation with PIL alone: shorter side to 16 (20 x 24 -> 16 x 19, bilinear with
    antialiasing), then the centre 16 columns (from column 2 by torchvision's rounding), over a PNG (lossless)."""
    write_folder(tmp_path, classes=1, train=2, val=1)
    x, y, classes = stream_folder(tmp_path / "train")
    path = tmp_path / "train" / "n00000000" / "001.png"
    with Image.open(path) as img:
        small = np.asarray(img.convert("RGB").resize((19, 16), Image.BILINEAR))[:, 2:18]
    want = torch.from_numpy(small.copy()).permute(2, 0, 1).float() / 255
    assert classes == ["n00000000"] and y.tolist() == [0, 0]
    torch.testing.assert_close(x[1], want, rtol=0, atol=1 / 255)  # PIL's resampling, up to a rounding


def stream_folder(split_dir):
    from sweep.data.image_folders import read_image_folder

    return read_image_folder(split_dir, SIZE)


def test_a_whole_split_asked_for_as_one_tensor_is_refused_naming_the_way_out(folder, bounded):
    splits = make_splits("streamed", None, 40, None, root=str(folder), download=False)
    assert splits.test_x[:MOST].to(CPU).shape == (MOST, 3, SIZE, SIZE)
    with pytest.raises(MemoryError, match=r"100 streamed images .* read them in batches \(sweep.data.stream.chunks\)"):
        splits.test_x.to(CPU)
    with pytest.raises(MemoryError):
        torch.cat([splits.train_x])  # torch functions decode their streamed arguments: within the bound only


def test_splits_on_a_device_keep_streamed_images_as_files(folder):
    splits = make_splits("streamed", None, 40, None, root=str(folder), download=False)
    moved = splits.to(torch.device("meta"))
    assert moved.train_x is splits.train_x and moved.train_y.device.type == "meta"


SPACE = {
    "name": "streamed",
    "data": {"dataset": "streamed", "download": False, "train_size": None, "val_size": 40, "test_size": None},
    "donors": {
        "a": {"arch": "resnet_tiny", "training": "plain", "epochs": 2, "lr": 0.05, "seed": 0, "checkpoint_every": 1},
        "b": {"arch": "resnet_tiny", "training": "pgd", "epochs": 1, "lr": 0.05, "seed": 1, "eps": 0.03, "steps": 2},
    },
    "stitching": {
        "pairs": [{"front": "zoo:a", "end": "zoo:b"}],
        "stitch_points": ["layer2.0"],
        "objectives": ["tlm", "dm"],
        "epochs": 1,
        "dm_samples": 100,
    },
    "representation_tests": [
        {
            "name": "sens",
            "test": "sensitivity",
            "donors": ["zoo:a", "zoo:b"],
            "layers": ["layer2.0"],
            "ranks": [4, 1],
            "samples": 100,
            "probe": {"train_size": 160, "epochs": 1},
        },
    ],  # fmt: skip
    "inversions": [{"name": "inv", "donors": ["zoo:a"], "images": 70, "steps": 3, "batch_size": 32}],
    "similarity": [
        {"name": "full", "pairs": [{"a": "zoo:a", "b": "zoo:b"}], "points": "stitch", "estimator": "full"},
        {"name": "minibatch", "pairs": [{"a": "zoo:a", "b": "zoo:b"}], "points": "stitch", "batch_size": 25},
        {
            "name": "adversarial",
            "pairs": [{"a": "zoo:a", "b": "zoo:a", "b_inputs": "adversarial"}],
            "points": "stitch",
            "attack": {"source": "a", "threat": "linf", "eps": 0.03, "steps": 2},
        },
        {
            "name": "inverted",
            "inverted": "inv",
            "points": ["penultimate"],
            "estimator": "full",
            "pairs": [{"a": "zoo:a", "b": "zoo:b", "a_inputs": "inverted", "b_inputs": "inverted"}],
        },
        {"name": "saliency", "measure": "saliency", "pairs": [{"a": "zoo:a", "b": "zoo:b"}]},
    ],  # fmt: skip
    "training_similarity": [{"name": "epochs", "donors": ["zoo:a"], "points": "stitch", "batch_size": 25}],
    "tsne": [{"name": "map", "donors": ["zoo:a"], "points": "stitch", "images": 100}],
    "examples": [{"show": "images", "datasets": ["streamed"], "classes": [1, 2], "per_class": 2}],
    "evaluation": {"eps": 0.03, "iterations": 2, "n_eval_robust": 100},
}


@pytest.mark.slow  # every kind of work on a streamed folder: about 70 s of CPU on a 2-core x86-64 CPU
def test_every_kind_of_work_reads_a_streamed_folder_in_batches(folder, bounded, tmp_path):
    """Every unit of every kind runs to `done` on the streamed folder with the loader's worker processes, though
    no tensor of more than 64 images may be decoded: the splits hold 160, 40 and 100."""
    space = copy.deepcopy(SPACE)
    space["data"]["root"] = str(folder)
    sweep = parse_space(space)
    sweep_dir = SweepDir(tmp_path, sweep.name)
    sweep_dir.create()
    ctx = RunContext(sweep_dir, CPU, str(folder), False)
    ran = {}
    with stream.decoding_with(1):
        for name in KINDS.names():
            kind = KINDS.get_entry(name)
            for unit in kind.units(sweep).values():
                out = resolve(kind.run)(unit, ctx)
                assert out["status"] == "done", (name, out.get("error"))
                ran[name] = ran.get(name, 0) + 1
    # every shipped kind (a kind another test registered in this process is not the space's business); a kind
    # added later must be added to the space above
    shipped = {n for n in KINDS.names() if str(KINDS.get_entry(n).run).startswith("sweep.")}
    assert set(ran) == shipped, ran
    tables = analysis.load(sweep_dir.path)
    assert len(tables["inversions"]) == 70 and tables["donors"]["clean_acc"].notna().all()


@pytest.mark.ray
@pytest.mark.slow
def test_a_sweep_on_a_streamed_folder_runs_on_ray_with_loader_workers(tmp_path, write_space):
    """`stitchsweep run` on ImageNette's folder layout (generated): each unit has two CPUs, so one loader
    worker process decodes beside it inside a Ray worker; every unit finishes."""
    import subprocess
    import sys

    write_folder(tmp_path / "data" / "imagenette2-160", train=12, val=6, shape=(40, 48))
    space = {
        "name": "streamed_ray",
        "data": {"dataset": "imagenette", "root": str(tmp_path / "data"), "download": False, "val_size": 20},
        "donors": {"a": {"arch": "resnet_tiny", "training": "plain", "epochs": 1, "lr": 0.05, "batch_size": 32}},
        "stitching": {"pairs": [{"front": "zoo:a", "end": "zoo:a"}], "stitch_points": ["layer2.0"],
                      "objectives": ["dm"], "dm_samples": 40},
        "evaluation": {"n_eval_robust": 0},
        "resources": {"cpus_per_trial": 2},
    }  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-m", "sweep", "run", str(write_space(space)), "--storage", str(tmp_path / "runs"),
         "--num-cpus", "2"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    tables = analysis.load(tmp_path / "runs" / "streamed_ray")
    assert tables["donors"]["status"].eq("done").all() and tables["trials"]["status"].eq("done").all()
    assert len(tables["trials"]) == 1 and 0.0 <= float(tables["trials"]["clean_acc"].iloc[0]) <= 1.0
