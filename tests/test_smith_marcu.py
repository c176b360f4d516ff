"""Smith & Marcu 2024's networks and stitch points: torchvision's ResNet-18 and VGG-19 cut *before* named
modules, with the shapes the paper states, and the linear stitcher that vector points (the pooled features
before a classifier) need."""

import numpy as np
import pytest
import torch

from sweep.models.base import ARCHITECTURES, build, split
from sweep.stitching.stitcher import StitchedNet, Stitcher


def test_resnet18_tv_points_are_before_its_stages_and_classifier_with_the_papers_shapes():
    arch = ARCHITECTURES["resnet18_tv"]
    assert arch.stitch_points() == ["before_layer1", "before_layer2", "before_layer3", "before_layer4", "before_fc"]
    shapes = arch.activation_shapes(3, 28)
    assert shapes["before_layer2"] == (64, 7, 7)  # Section 2: 64 x 7 x 7 before layer 2 on 28 x 28 input
    assert shapes["before_fc"] == (512,)  # a vector: the linear stitcher's point
    torch.manual_seed(0)
    model = build("resnet18_tv", 3, 10, (0.5,), (0.5,), 28).eval()
    x = torch.rand(3, 3, 28, 28)
    for point in arch.stitch_points():
        front, end = split(model, point)
        torch.testing.assert_close(end(front(x)), model(x))
    # the cut before the classifier is the input of its linear layer: post-ReLU, pooled
    front, _ = split(model, "before_fc")
    assert (front(x) >= 0).all() and torch.allclose(model.stage("fc")(front(x)), model(x))


def test_vgg19_tv_has_torchvisions_indices_and_pads_28_pixels_to_32():
    arch = ARCHITECTURES["vgg19_tv"]
    shapes = arch.activation_shapes(3, 28)
    assert shapes["before_features.2"] == (64, 32, 32)  # C.2: 64 maps of 32 x 32 at features.2
    assert shapes["before_features.10"] == (128, 8, 8) and shapes["before_features.30"] == (512, 2, 2)
    assert shapes == arch.activation_shapes(3, 32)  # 28 x 28 input is padded, not resized
    model = build("vgg19_tv", 3, 10, (0.5,), (0.5,), 28)
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 16 and not any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())


def test_vector_stitcher_is_linear_and_identity_init_reproduces_the_network():
    torch.manual_seed(0)
    model = build("resnet18_tv", 3, 10, (0.5,), (0.5,), 28).eval()
    front, end = split(model, "before_fc")
    x = torch.rand(5, 3, 28, 28)
    with torch.no_grad():
        a = front(x)
    stitcher = Stitcher.for_shapes(a.shape, a.shape, init="identity")
    assert isinstance(stitcher.map, torch.nn.Linear) and stitcher.channels == (512, 512)
    torch.testing.assert_close(StitchedNet(front, stitcher, end)(x), model(x))
    bn = Stitcher.for_shapes(a.shape, torch.Size([5, 256]), kind="bn_affine_bn").eval()
    assert isinstance(bn.bn_in, torch.nn.BatchNorm1d) and bn(a).shape == (5, 256)


def test_direct_matching_on_vectors_recovers_an_exact_affine_map():
    """Targets that are an affine map of the sources: the least-squares stitcher finds that map (checked
    against numpy's lstsq, a second formulation)."""
    from types import SimpleNamespace

    from sweep.stitching.objectives import FitContext, direct_match

    rng = np.random.default_rng(0)
    w, b = rng.normal(size=(6, 4)), rng.normal(size=4)
    src = torch.tensor(rng.normal(size=(40, 6)), dtype=torch.float32)
    front = torch.nn.Identity()
    end_front = torch.nn.Linear(6, 4).double()
    with torch.no_grad():
        end_front.weight.copy_(torch.tensor(w.T))
        end_front.bias.copy_(torch.tensor(b))
    end_front = end_front.float()
    stitcher = Stitcher.for_shapes(torch.Size([1, 6]), torch.Size([1, 4]))
    splits = SimpleNamespace(train_x=src)
    spec = SimpleNamespace(dm_samples=40)
    ctx = FitContext(front=front, end=torch.nn.Identity(), stitcher=stitcher, splits=splits, spec=spec,
                     device=torch.device("cpu"), end_front=end_front)  # fmt: skip
    residual = direct_match(ctx)
    assert residual["dm_residual"] < 1e-5
    solved, *_ = np.linalg.lstsq(np.c_[src.numpy(), np.ones(40)], src.numpy() @ w + b, rcond=None)
    np.testing.assert_allclose(stitcher.map.weight.detach().numpy().T, solved[:6], atol=1e-4)
    np.testing.assert_allclose(stitcher.map.bias.detach().numpy(), solved[6], atol=1e-4)


@pytest.mark.parametrize("shape", [(4, 512), (4, 64, 7, 7)])
def test_positions_of_vectors_are_the_vectors(shape):
    from sweep.config.shapes import positions as rows_per_image
    from sweep.stitching.stitcher import positions

    a = torch.rand(shape)
    assert positions(a).shape == ((4, 512) if len(shape) == 2 else (4 * 49, 64))
    assert rows_per_image(shape[1:]) == (1 if len(shape) == 2 else 49)
