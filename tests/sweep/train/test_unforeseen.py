"""The threat models of Cianfarani et al. 2022 Section 6: the JPEG codec and the JPEG, Gabor and Snow attacks of
Kang et al. 2019, checked against independent formulations (scipy's DCT, an FFT) and the properties a bug would
break (block-local quantisation steps, budgets, the attacks raising the loss)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.fft
import torch
from torch import nn

from sweep.config.errors import SpecError
from sweep.registry import THREATS, TRAINING_METHODS
from sweep.train import jpeg, unforeseen
from sweep.train.threats import craft

CPU = torch.device("cpu")


def _model(channels: int) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(channels, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(128, 10)
    ).eval()


def test_dct_is_scipys_orthonormal_dct():
    block = np.random.default_rng(0).random((8, 8))
    c = jpeg.dct_matrix(dtype=torch.float64).numpy()
    np.testing.assert_allclose(c @ block @ c.T, scipy.fft.dctn(block, norm="ortho"), atol=1e-12)
    np.testing.assert_allclose(c @ c.T, np.eye(8), atol=1e-12)


@pytest.mark.parametrize("shape", [(2, 1, 28, 28), (2, 1, 30, 21), (2, 3, 32, 32), (2, 3, 28, 30)])
def test_codec_round_trip_is_exact_without_chroma(shape):
    """Nothing is rounded: grey and single-channel images come back exactly, padded sizes included."""
    x = torch.rand(shape, dtype=torch.float64)
    if shape[1] == 3:
        x = x.mean(1, keepdim=True).expand(shape).contiguous()  # R = G = B: Cb = Cr = 128, nothing subsampled
    torch.testing.assert_close(jpeg.decode(jpeg.encode(x)), x, atol=1e-10, rtol=0)


def test_codec_colour_round_trip_is_the_chroma_average():
    """A colour image whose chroma is constant over each 2 x 2 block survives 4:2:0 subsampling exactly."""
    grey = torch.rand(1, 1, 16, 16, dtype=torch.float64) * 0.5 + 0.25
    tint = torch.rand(1, 3, 8, 8, dtype=torch.float64) * 0.2 - 0.1
    tint = tint - tint.mean(1, keepdim=True)  # zero-mean offsets: a chroma change only to first order
    x = (grey + tint.repeat_interleave(2, 2).repeat_interleave(2, 3)).clamp(0, 1)
    y = jpeg.decode(jpeg.encode(x))
    # the luma varies within blocks, so the chroma is not exactly blockwise constant: a small bound
    assert (y - x).abs().max() < 0.02


def test_one_quantised_step_of_the_dc_coefficient_moves_one_block_by_its_table_entry():
    """+1 on the Y DC coefficient of block (0, 1) raises exactly that block by 16 / 8 / 255 (the luma table's
    DC entry times the DC basis value 1/8), and nothing else."""
    x = torch.full((1, 1, 16, 24), 0.5, dtype=torch.float64)
    c = jpeg.encode(x)
    delta = torch.zeros_like(c.components[0])
    delta[0, 0, 1, 0, 0] = 1.0
    diff = jpeg.decode(c.plus([delta])) - x
    expected = torch.zeros_like(x)
    expected[..., 0:8, 8:16] = 16 / 8 / 255
    torch.testing.assert_close(diff, expected, atol=1e-12, rtol=0)


def test_jpeg_attack_stays_within_its_coefficient_budget_and_raises_the_loss():
    model = _model(1)
    x = torch.rand(8, 1, 24, 24) * 0.2 + 0.4  # mid-grey: no pixel reaches the clamp at this budget
    y = torch.randint(0, 10, (8,))
    eps = 0.05  # at most about 0.2 on a pixel, whatever the signs: nothing clamped
    x_adv = craft("jpeg", model, x, y, eps, THREATS["jpeg"].default_step(eps, 10), 10, seed=0, device=CPU)
    moved = torch.cat([(a - b).flatten() for a, b in zip(jpeg.encode(x_adv).components, jpeg.encode(x).components)])
    assert moved.abs().max() <= eps + 1e-3 and moved.abs().max() > eps * 0.9
    _assert_raises_loss(model, "jpeg", x, y, eps)


def test_variance_normalisation_agrees_with_the_fft_formulation():
    """The authors compute |z - m| as sqrt(|irfft2(rfft2((z - m)^2))|): the direct form must agree with it."""
    z = torch.randn(3, 1, 16, 16, dtype=torch.float64)
    m = z.mean(dim=(1, 2, 3), keepdim=True)
    mag = torch.fft.irfft2(torch.fft.rfft2((z - m) ** 2), s=z.shape[-2:]).abs().sqrt()
    mag = mag / mag.amax(dim=(1, 2, 3), keepdim=True)
    img = m + (z - m) * (1.001 / (0.001 + mag))
    lo, hi = img.amin(dim=(1, 2, 3), keepdim=True), img.amax(dim=(1, 2, 3), keepdim=True)
    torch.testing.assert_close(unforeseen.variance_normalise(z), (img - lo) / (hi - lo), atol=1e-10, rtol=0)


def test_gabor_kernel_is_an_even_function_along_its_axis():
    k = unforeseen.gabor_kernel(23, 0.2, 4.0, 0.0, sides=1)
    torch.testing.assert_close(k, k.flip(1))  # cos(2 pi f u) exp(-...) with u = x at theta 0
    assert float(k[11, 11]) == pytest.approx(1.0)  # the centre: exp(0) cos(0)


def test_gabor_noise_is_within_its_amplitude_and_raises_the_loss():
    model = _model(3)
    x = torch.rand(8, 3, 32, 32) * 0.5
    y = torch.randint(0, 10, (8,))
    eps = 0.1
    x_adv = craft("gabor", model, x, y, eps, THREATS["gabor"].default_step(eps, 10), 10, seed=0, device=CPU)
    d = x_adv - x
    assert d.min() >= -1e-6 and d.max() <= eps + 1e-6 and d.max() > 0.9 * eps  # noise in [0, 1], times eps
    _assert_raises_loss(model, "gabor", x, y, eps)


def test_flake_budget_caps_each_block_mean_and_leaves_quiet_blocks_alone():
    g = torch.Generator().manual_seed(0)
    intensities = torch.rand(2, 7, 12, 12, generator=g) * 0.1  # quiet everywhere: under the budget
    intensities[:, :, :8, :8] = 0.9  # one loud block
    out = unforeseen.flake_budget(intensities.clone())
    assert out[:, :, :8, :8].mean(dim=(2, 3)).max() <= unforeseen.SNOW_FLAKE_BUDGET + 1e-6
    torch.testing.assert_close(out[:, :, 8:, :], intensities[:, :, 8:, :])
    torch.testing.assert_close(out[:, :, :8, 8:], intensities[:, :, :8, 8:])


def test_flake_kernels_are_point_symmetric_and_nonnegative():
    g = torch.Generator().manual_seed(1)
    for flip in (False, True):
        k = unforeseen.flake_kernel(g, flip)
        assert k.min() >= 0 and k.max() > 0.3
        torch.testing.assert_close(k, k.flip(0, 1))  # a line through the centre, mirrored through it


def test_snow_adds_only_flakes_to_the_discoloured_image_and_raises_the_loss():
    model = _model(1)
    x = torch.rand(8, 1, 28, 28) * 0.3
    y = torch.randint(0, 10, (8,))
    step = THREATS["snow"].default_step(0.25, 10)
    none = craft("snow", model, x, y, 0.0, step, 10, seed=0, device=CPU)
    torch.testing.assert_close(none, unforeseen.discolour(x).clamp(0, 1))  # eps 0: the sky, no flakes
    x_adv = craft("snow", model, x, y, 0.25, step, 10, seed=0, device=CPU)
    assert (x_adv - none).min() >= -1e-6 and (x_adv - none).max() > 0.05
    _assert_raises_loss(model, "snow", x, y, 0.25)
    with pytest.raises(ValueError, match="multiples of 4"):
        craft("snow", model, torch.rand(2, 1, 30, 30), y[:2], 0.25, step, 1, seed=0, device=CPU)


def _assert_raises_loss(model, threat: str, x, y, eps: float) -> None:
    """The attack's steps raise the loss over its random start (steps = 0), and a seed reproduces it."""
    step = THREATS[threat].default_step(eps, 10)
    start = craft(threat, model, x, y, eps, step, 0, seed=3, device=CPU)
    attacked = craft(threat, model, x, y, eps, step, 10, seed=3, device=CPU)
    assert torch.equal(attacked, craft(threat, model, x, y, eps, step, 10, seed=3, device=CPU))
    ce = nn.functional.cross_entropy
    with torch.no_grad():
        assert ce(model(attacked), y) > ce(model(start), y)


def test_training_methods_name_their_threat_model_and_need_its_budget(tmp_path):
    from sweep.config.space import parse_space

    assert {TRAINING_METHODS[f"adv_{t}"].threat for t in ("jpeg", "gabor", "snow")} == {"jpeg", "gabor", "snow"}
    space = {
        "name": "t",
        "data": {"dataset": "digits"},
        "donors": {"d": {"arch": "resnet_tiny", "epochs": 1, "training": "adv_snow"}},
        "similarity": {"pairs": [{"a": "zoo:d", "b": "zoo:d"}]},
    }
    with pytest.raises(SpecError) as err:
        parse_space(space)
    assert err.value.field == "donors.d.eps" and "snow" in str(err.value)
    space["donors"]["d"]["eps"] = 0.25
    donor = next(iter(parse_space(space).donors.values()))
    assert donor.step_size == pytest.approx(unforeseen_step := THREATS["snow"].default_step(0.25, 10))
    assert unforeseen_step > 0
