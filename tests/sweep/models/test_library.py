"""Library networks by name: `torchvision:<name>` and `timm:<name>` built by the library's own
constructor with random weights (nothing is downloaded), cut at traced-graph nodes.

Tolerance of the identity checks: the staged network runs the library network's own traced ops, in the same
order, in float32 on the same inputs, so it reproduces the logits bit for bit in practice; 1e-5 (absolute and
relative) only leaves room for a kernel that picks another code path for another tensor layout."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from sweep.config.errors import SpecError
from sweep.config.shapes import check_library_arch
from sweep.models import library
from sweep.models.base import Normalize, build, split
from sweep.models.external import load_checkpoint
from sweep.registry import ARCHITECTURES, library_version
from sweep.stitching.objectives import OBJECTIVES, FitContext
from sweep.stitching.stitcher import Stitcher
from tests.ties import near_ties

TOL = dict(rtol=1e-5, atol=1e-5)
FAST = ["torchvision:resnet18", "timm:resnet18"]
SLOW = [
    "torchvision:resnet50",
    "torchvision:vit_b_16",
    "torchvision:convnext_tiny",
    "torchvision:mobilenet_v3_small",
    "timm:resnet50",
    "timm:convnext_tiny",
    "timm:deit_tiny_patch16_224",
    "timm:efficientnet_b0",
]


def _library_and_staged(arch: str, size: int = 32):
    """The library's own network and the staged one, from the same seed (3 channels: the same weights)."""
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    torch.manual_seed(0)
    own = library.construct(arch, 10, library.input_size(arch, size)).eval()
    torch.manual_seed(0)
    net = build(arch, 3, 10, mean, std, image_size=size).eval()
    return own, net, Normalize(mean, std)


def _check_identity(arch: str) -> None:
    own, net, normalize = _library_and_staged(arch)
    x = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = own(normalize(x))
        torch.testing.assert_close(net(x), logits, **TOL)
        assert net.stitch_points, arch
        for point in net.stitch_points:
            front, end = split(net, point)
            torch.testing.assert_close(end(front(x)), logits, **TOL)


EVERY = [*FAST, *(pytest.param(arch, marks=pytest.mark.slow) for arch in SLOW)]  # the slow set: CI, not test-fast


@pytest.mark.parametrize("arch", EVERY)
def test_identity_split_reproduces_the_library_network_at_every_default_point(arch):
    _check_identity(arch)


def _check_dm_self_stitch(arch: str, every_point: bool = True) -> None:
    """DM from a default point onto itself, random weights, eval mode, fitted on more rows than the point has
    unknowns per output channel (N*H*W or N*T >= 1.25(C + 1): `N` grows with the point's width), is the identity
    up to rounding: the logits on other images within 5% (relative, in norm: 0 at most points; up to ~2% where a
    random network's activations on noise images span fewer directions than the point has channels and the fit
    keeps only the directions it saw) and the predictions the network's except on images whose top-two margin is
    within twice the largest logit change (the suite's tie helper: random networks' logits are of any scale, so
    the margin is the measured change, not a fixed 1e-3). The classifier gets random weights of unit scale
    first: the libraries start some heads at zero (torchvision's ViT) or near it (MobileNetV3). The slow set
    checks its first, middle and last default points."""
    _, net, _ = _library_and_staged(arch)
    gen = torch.Generator().manual_seed(2)
    head = [m for m in net.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():  # torchvision's ViT starts from a zero head: its logits would all be 0
        head.weight.copy_(torch.randn(head.weight.shape, generator=gen) / head.in_features**0.5)
    eval_x = torch.rand(32, 3, 32, 32, generator=gen)
    with torch.no_grad():
        logits = net(eval_x)
    assert float(logits.std()) > 0, arch
    pts = net.stitch_points
    for point in pts if every_point else sorted({pts[0], pts[len(pts) // 2], pts[-1]}, key=pts.index):
        front, end = split(net, point)
        with torch.no_grad():
            shape = front(eval_x[:1]).shape
        rows = shape[2] * shape[3] if len(shape) == 4 else shape[1]  # maps: H*W positions; tokens: T
        width = shape[1] if len(shape) == 4 else shape[2]
        n = max(32, -(-5 * (width + 1) // (4 * rows)))
        fit_x = torch.rand(n, 3, 32, 32, generator=gen)
        stitcher = Stitcher.for_shapes(shape, shape)
        splits = type("Splits", (), {"train_x": fit_x})  # direct matching reads only the first K training images
        spec = type("Spec", (), {"dm_samples": n})()
        ctx = FitContext(front=front, end=end, stitcher=stitcher, splits=splits, spec=spec, device=torch.device("cpu"))
        ctx.end_front = front
        OBJECTIVES["dm"].fit(ctx)
        with torch.no_grad():
            stitched = end(stitcher(front(eval_x)))
        change = float((stitched - logits).abs().max())
        rel = float((stitched - logits).norm() / logits.norm())
        assert rel < 5e-2, (arch, point, rel)
        flips = int((stitched.argmax(1) != logits.argmax(1)).sum())
        assert flips <= near_ties(logits, margin=2 * change), (arch, point, flips)


@pytest.mark.parametrize("arch", EVERY)
def test_a_dm_self_stitch_reproduces_the_predictions_up_to_near_ties(arch):
    _check_dm_self_stitch(arch, every_point=arch in FAST)


def test_default_points_and_cut_points_of_resnets():
    tv, tm = ARCHITECTURES["torchvision:resnet18"], ARCHITECTURES["timm:resnet18"]
    assert tv.stitch_points() == [f"layer{k}" for k in range(1, 5)]  # the residual stages, by their module
    assert tm.stitch_points() == ["act1"] + [f"layer{k}" for k in range(1, 5)]  # timm's feature_info
    assert "layer1.0.add" in tv.points() and "layer1.0.conv1" not in tv.points()
    assert tv.activation_shapes(1, 28)["layer1"] == (64, 8, 8)  # 28 px resized to 32


def test_a_node_inside_a_block_is_refused_with_the_nearest_valid_points():
    entry = ARCHITECTURES["torchvision:resnet18"]
    hint = entry.point_hint("layer1.0.conv1", entry.points())
    assert hint == "more than one tensor crosses after layer1.0.conv1; the nearest valid points: maxpool, layer1.0.add"
    assert entry.point_hint("layer1.0.ad", entry.points()) == "did you mean 'layer1.0.add'?"


def test_a_misspelt_model_name_is_refused_in_one_line_with_the_library_names():
    with pytest.raises(SpecError) as err:
        check_library_arch({"arch": "timm:convnext_tinyy"}, "donors.a")
    assert "did you mean 'convnext_tiny'?" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(KeyError, match="did you mean 'resnet50'"):
        ARCHITECTURES.get_entry("torchvision:resnet5")


def test_the_library_version_is_in_the_donor_key(monkeypatch):
    import sweep.config.donors as donors
    from sweep.config.data import DataSpec

    donor = donors.DonorSpec(
        name="a", arch="torchvision:resnet18", data=DataSpec(dataset="mnist", train_size=100, val_size=10, test_size=10)
    )
    assert library_version("torchvision:resnet18").startswith("torchvision ")
    key = donor.donor_key
    monkeypatch.setattr(donors, "library_version", lambda arch: "torchvision 99.0")
    assert donor.donor_key != key
    assert build("timm:resnet18", 1, 10, (0.5,), (0.5,)).library.startswith("timm ")  # its activations' key


@pytest.mark.parametrize("arch, suffix", [(a, ".pt") for a in FAST] + [("timm:resnet18", ".safetensors")])
def test_a_checkpoint_saved_by_the_library_loads_as_a_file_donor(arch, suffix, tmp_path):
    from safetensors.torch import save_file

    torch.manual_seed(0)
    own = library.construct(arch, 1000, None).eval()
    path = tmp_path / f"weights{suffix}"
    if suffix == ".safetensors":  # timm's and Hugging Face's format: tensors only
        save_file({k: v.contiguous() for k, v in own.state_dict().items()}, path)
    else:
        torch.save(own.state_dict(), path)
    net = load_checkpoint(path, arch, in_channels=1, num_classes=1000, mean=(0.0,), std=(1.0,), image_size=28)
    x = torch.rand(2, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    mean, std = library.normalisation(arch)
    pixels = F.interpolate(x.expand(-1, 3, -1, -1), size=(32, 32), mode="bilinear", align_corners=False)
    with torch.no_grad():
        torch.testing.assert_close(net(x), own(Normalize(mean, std)(pixels)), **TOL)
    with pytest.raises(ValueError, match="the checkpoint has 1000 classes, the data 10$"):
        load_checkpoint(path, arch, in_channels=1, num_classes=10, mean=(0.0,), std=(1.0,), image_size=28)
    with pytest.raises(ValueError, match="the checkpoint reads 3 channels, the data has 2$"):
        load_checkpoint(path, arch, in_channels=2, num_classes=1000, mean=(0.0,), std=(1.0,), image_size=28)


def test_the_similarity_kind_names_and_reads_the_library_s_traced_nodes():
    """`points: modules` of a library network lists the library tracer's node names (`graph_nodes_of`), and a
    unit's features are read at them: the values the library's own network computes at those nodes."""
    from torchvision.models.feature_extraction import create_feature_extractor

    from sweep.config.points import points
    from sweep.models.features import features

    arch = "torchvision:resnet18"
    nodes = points("modules", arch, "similarity[0].points")
    assert nodes == library.graph_nodes_of(arch) and "layer1.0.conv1" in nodes and "layer2" not in nodes
    assert points(["layer1.0.conv1", "fc"], arch, "similarity[0].points") == ("layer1.0.conv1", "fc")
    own, net, normalize = _library_and_staged(arch)
    asked = ("layer1.0.conv1", "layer2.0.add", "layer3.1.relu_1", "fc")
    x = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = create_feature_extractor(own, return_nodes=list(asked))(normalize(x))
        for name, value in zip(asked, features(net, asked)(x)):
            torch.testing.assert_close(value, expected[name], **TOL)


def test_a_channels_last_stage_and_an_untraceable_model_are_refused_in_one_line(monkeypatch):
    import timm

    def small_swin(arch, num_classes, size):  # timm's Swin at its smallest: its stages' outputs are NHWC
        kw = dict(embed_dim=16, depths=(1, 1, 1, 1), num_heads=(1, 1, 1, 1), window_size=2)
        return timm.create_model("swin_tiny_patch4_window7_224", num_classes=num_classes, img_size=size, **kw)

    monkeypatch.setattr(library, "construct", small_swin)
    with pytest.raises(ValueError) as err:
        library.build(
            "timm:swin_tiny_patch4_window7_224", in_channels=1, num_classes=10, mean=(0.5,), std=(0.5,), image_size=28
        )
    assert str(err.value) == (
        "timm:swin_tiny_patch4_window7_224: its point 'layers.0' is channels-last (NHWC), neither NCHW maps nor tokens"
    )

    class DataDependent(torch.nn.Module):  # control flow on a value: torch.fx cannot trace it
        def __init__(self, num_classes: int) -> None:
            super().__init__()
            self.conv, self.fc = torch.nn.Conv2d(3, 4, 3), torch.nn.Linear(4, num_classes)

        def forward(self, x):
            x = self.conv(x)
            return self.fc((x if x.sum() > 0 else -x).mean((2, 3)))

    monkeypatch.setattr(library, "construct", lambda arch, num_classes, size: DataDependent(num_classes))
    with pytest.raises(ValueError, match=r"^torchvision:resnet18: torch.fx cannot trace it \(TraceError: ") as err:
        library.build("torchvision:resnet18", in_channels=1, num_classes=10, mean=(0.5,), std=(0.5,), image_size=28)
    assert "\n" not in str(err.value)
