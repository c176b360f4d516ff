"""Every registered architecture honours the stitch-point contract."""

import pytest
import torch

from sweep.models.base import ARCHITECTURES, build, register_architecture, split, stitch_points
from sweep.stitching.stitcher import StitchedNet, Stitcher, positions

# The networks whose check takes longest here (8-45 s of CPU each on a 2-core x86-64 CPU: built, then split at every
# point); smaller networks of their families (resnet18, wrn28_1, tv_resnet18, vgg19_tv, vit_ti_16, vit_tiny_cpu)
# keep the contract in make test-fast, and make test runs them all.
HEAVY = {"resnet50", "wrn28_5", "wrn28_10", "dm_wrn28_10", "tv_resnet50", "tv_resnext50_32x4d", "tv_wide_resnet50_2"}
HEAVY |= {"tv_wide_resnet50_4", "tv_densenet161", "tv_mobilenet_v2", "tv_vgg16_bn", "vgg19_tv_code", "vit_ti"}


def _heavy_ones_slow(names):
    return [pytest.param(a, marks=pytest.mark.slow) if a in HEAVY else a for a in sorted(names)]


@pytest.mark.parametrize("arch", _heavy_ones_slow(ARCHITECTURES))
def test_identity_stitch_reproduces_the_model_at_every_point(arch):
    torch.manual_seed(0)
    # 16x16 inputs keep the paper-sized networks (WRN-28-10, ResNet-50) quick on a CPU; torchvision's ImageNet
    # networks downsample 32-fold
    size = 32 if arch.startswith("tv_") else 16
    model = build(arch, 3, 10, (0.4, 0.5, 0.6), (0.2, 0.25, 0.3), image_size=size).eval()
    x = torch.rand(2, 3, size, size)
    with torch.no_grad():
        expected = model(x)
        assert model.stitch_points, "an architecture must offer stitch points"
        for point in model.stitch_points:
            front, end = split(model, point)
            a = front(x)
            assert torch.allclose(end(a), expected, atol=1e-5), point
            identity = Stitcher.for_shapes(a.shape, a.shape, init="identity")
            assert torch.allclose(StitchedNet(front, identity, end)(x), expected, atol=1e-5), point


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_end_half_starts_at_the_point(arch):
    """The end half takes the representation, not the image: it never recomputes the prefix."""
    model = build(arch, 1, 10, (0.5,), (0.5,)).eval()
    point = model.stitch_points[len(model.stitch_points) // 2]
    front, end = split(model, point)
    front_modules = {id(m) for m in front.modules()}
    assert not any(id(m) in front_modules for m in end.modules())


def test_a_half_restoring_its_own_mode_leaves_the_donor_s_stages_as_they_were():
    """A half is in its model's mode: a unit that saves a half's mode, evaluates it and restores it (`half.train(
    was)`) must not leave a shared donor's stages in training mode (a later pass would move their statistics)."""
    model = build("resnet_tiny", 1, 10, (0.5,), (0.5,)).eval()
    front, end = split(model, model.stitch_points[1])
    for half in (front, end):
        was = half.training
        half.eval()
        half.train(was)
    assert not any(m.training for m in model.modules())
    model.train()
    assert all(half.training for half in split(model, model.stitch_points[1]))


@pytest.mark.parametrize("arch", ["resnet_tiny", "vit_tiny_cpu"])
def test_direct_matching_self_stitch_reproduces_the_model(arch):
    """Least squares from a representation onto itself is exact, for conv maps and per-token maps alike."""
    torch.manual_seed(0)
    model = build(arch, 1, 10, (0.5,), (0.5,), image_size=28).eval()
    x = torch.rand(8, 1, 28, 28)
    with torch.no_grad():
        expected = model(x)
        for point in model.stitch_points:
            front, end = split(model, point)
            a = front(x)
            stitcher = Stitcher.for_shapes(a.shape, a.shape)
            rows = torch.cat([positions(a).double(), torch.ones(len(positions(a)), 1, dtype=torch.double)], 1)
            theta = torch.linalg.pinv(rows) @ positions(a).double()
            stitcher.set_affine(theta[:-1].T.float(), theta[-1].float())
            assert torch.allclose(end(stitcher(a)), expected, atol=1e-3), point


def test_token_stitcher_is_a_per_token_linear_map():
    s = Stitcher.for_shapes(torch.Size([2, 5, 8]), torch.Size([2, 5, 6]))
    a = torch.rand(2, 5, 8)
    out = s(a)
    assert out.shape == (2, 5, 6)
    assert torch.allclose(out[:, 3], s.map(a[:, 3]))
    with pytest.raises(ValueError, match="cannot stitch"):
        Stitcher.for_shapes(torch.Size([2, 5, 8]), torch.Size([2, 8, 4, 4]))


def test_wrong_point_lists_the_valid_ones():
    model = build("resnet_tiny", 1, 10, (0.5,), (0.5,))
    with pytest.raises(ValueError) as err:
        split(model, "layer9.9")
    assert "layer9.9" in str(err.value) and "layer1.0" in str(err.value)


def test_stitch_points_are_residual_blocks_in_order():
    assert stitch_points("resnet_tiny") == ["layer1.0", "layer1.1", "layer2.0", "layer2.1", "layer3.0", "layer3.1"]
    assert len(stitch_points("resnet18")) == 8
    assert len(stitch_points("resnet50")) == 16 and len(stitch_points("wrn28_10")) == 12
    assert stitch_points("vgg11") == [f"conv{k}" for k in range(1, 9)]
    assert stitch_points("vit_ti") == [f"blocks.{b}" for b in range(12)]


def test_registry_refuses_duplicates_and_unknown_names():
    with pytest.raises(ValueError, match="registered twice"):
        register_architecture("resnet_tiny", "again")(lambda *a: None)
    with pytest.raises(ValueError, match="resnet_tiny"):
        build("resnet_huge", 1, 10, (0.5,), (0.5,))
