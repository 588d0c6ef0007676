"""Pre-packed float32 weights, so that a CPU decodes a batch of 8 rows for little more than 1.

`F.linear(x, W)` with a few rows in `x` makes MKL repack the whole transposed weight for every
call; for a batch of 8 decoding rows that repacking, repeated for every matrix of every layer,
cost more than the multiplication itself (SmolLM2-135M here: a batch-8 step took 2.4x a batch-1
step, where the weights, read once per step either way, should make them nearly equal). MKL can
pack a weight once for a given row count; the packed GEMM is only used for that exact count, so
a batch with at least half that many rows is padded up to it (padding rows cost less than the
unpacked path) and any other shape goes through the ordinary kernel, unchanged.

The MKL ops are torch internals (the ones torch.compile's CPU backend packs weights with), so
packing checks itself on the first layer and leaves the model alone whenever they are missing
(a torch without MKL, an ARM CPU) or disagree with `F.linear`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from reinagent.llm.batching import pad_from


class PackedLinear(nn.Module):
    def __init__(self, linear: nn.Linear, rows: int):
        super().__init__()
        self.weight = linear.weight  # for every other row count, through F.linear; shared, not copied
        self.bias = linear.bias
        self.rows = rows
        self.pad_from = pad_from(rows)
        self.packed = torch.ops.mkl._mkl_reorder_linear_weight(linear.weight.detach(), rows)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        m = flat.shape[0]
        if not self.pad_from <= m <= self.rows:
            # Fewer rows are about as fast unpacked (nearly a matrix-vector product), and a
            # prompt's many rows spread the repacking thin.
            return F.linear(x, self.weight, self.bias)
        padded = F.pad(flat, (0, 0, 0, self.rows - m)) if m < self.rows else flat
        out = torch.ops.mkl._mkl_linear(padded, self.packed, self.weight, self.bias, self.rows)[:m]
        return out.reshape(*x.shape[:-1], out.shape[-1])


def pack_linears(model: nn.Module, rows: int) -> int:
    """Replace every nn.Linear of a float32 CPU model by a PackedLinear for `rows`-row batches.

    Returns how many were replaced: 0 when packing is unavailable, disagrees with F.linear, or
    `rows` is 1 (nothing to batch)."""
    targets = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children() if type(child) is nn.Linear]
    if rows < 2 or not targets or not _works(targets[0][2], rows):
        return 0
    for parent, name, child in targets:
        setattr(parent, name, PackedLinear(child, rows))
    return len(targets)


def _works(linear: nn.Linear, rows: int) -> bool:
    if linear.weight.device.type != "cpu" or linear.weight.dtype != torch.float32:
        return False
    try:
        packed = PackedLinear(linear, rows)
        x = torch.randn(3 * rows, linear.in_features, generator=torch.Generator().manual_seed(0))
        with torch.inference_mode():
            ok = all(torch.allclose(packed(x[:m]), F.linear(x[:m], linear.weight, linear.bias), rtol=1e-4, atol=1e-4) for m in (1, rows - 1, rows, 3 * rows))
    except (AttributeError, RuntimeError, NotImplementedError):  # no MKL in this torch build
        return False
    return ok
