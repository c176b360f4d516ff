"""A traced graph's cut points (one tensor crosses) and the pieces between them."""

from __future__ import annotations

import torch
from torch import nn

from sweep.models import graph_cut


class Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.inner, self.head = nn.Conv2d(2, 2, 1), nn.Conv2d(2, 2, 1), nn.Linear(2, 3)
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        x = self.conv(x)
        y = self.inner(x).relu()  # inside the block: x and y both cross a cut here
        x = (x + y) * self.scale  # a parameter read in the graph (get_attr): copied into its piece
        return self.head(x.mean((2, 3)))


def test_cut_points_are_where_one_tensor_crosses_and_the_pieces_compute_the_network():
    model = Residual().eval()
    traced = graph_cut.trace(model)
    cuts = graph_cut.cut_points(traced, torch.zeros(2, 2, 4, 4))
    assert cuts == ["conv", "add", "mul", "mean", "head"]
    assert graph_cut.module_output(traced, "inner") == "inner"
    x = torch.rand(3, 2, 4, 4)
    y = x
    for _, piece in graph_cut.pieces(traced, cuts[:3]):
        y = piece(y)
    # the same float32 ops in the same order; a BLAS kernel may still round by its buffers' alignment
    torch.testing.assert_close(y, model(x), rtol=1e-5, atol=1e-6)
