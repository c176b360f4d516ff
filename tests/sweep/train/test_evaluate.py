"""Inference batching: on the CPU, passes of `CPU_BATCH` images from the caller's first image."""

import torch
from torch import nn

from sweep.data.core import Splits
from sweep.train.evaluate import CPU_BATCH, activations, inference_batch, predict
from sweep.worker.activations import CHUNK, Frozen


class Recorder(nn.Module):
    """A linear classifier that records the batch sizes it is called with."""

    def __init__(self, d: int):
        super().__init__()
        self.fc, self.sizes = nn.Linear(d, 3), []

    def forward(self, x):
        self.sizes.append(len(x))
        return self.fc(x.flatten(1))


def test_the_cpu_infers_in_passes_of_cpu_batch_and_other_devices_keep_the_callers_batch():
    assert inference_batch(500, torch.device("cpu")) == CPU_BATCH < 500
    assert inference_batch(20, "cpu") == 20
    assert inference_batch(500, torch.device("cuda")) == 500  # no GPU needed: only the device's kind is read
    torch.manual_seed(0)
    net, x = Recorder(4), torch.randn(2 * CPU_BATCH + 7, 4)
    out = activations(net, x, torch.device("cpu"), batch_size=250)
    assert net.sizes == [CPU_BATCH, CPU_BATCH, 7]
    with torch.no_grad():  # the same values as one pass (a linear layer: agreement to float rounding)
        torch.testing.assert_close(out, net.fc(x), rtol=1e-5, atol=1e-6)
    net.sizes.clear()
    pred = predict(net.eval(), x, torch.device("cpu"), batch_size=500)
    assert net.sizes == [CPU_BATCH, CPU_BATCH, 7] and pred.shape == (len(x),)


def test_a_frozen_part_goes_in_passes_that_start_at_each_chunk():
    n, none = CHUNK + 30, torch.zeros(0, 4)
    splits = Splits(torch.rand(n, 4), torch.zeros(n), none, none[:, 0], none, none[:, 0], 3, (0.0,), (1.0,), "s")
    net = Recorder(4)
    acts = Frozen(net, None, splits, torch.device("cpu")).on("train")
    full, rest = divmod(CHUNK, CPU_BATCH)
    assert net.sizes == [CPU_BATCH] * full + ([rest] if rest else []) + [30]
    assert acts.shape == (CHUNK + 30, 3)
