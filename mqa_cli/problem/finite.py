"""The value checks' refusal of a NaN or inf in a tensor the kernels read, naming the tensor and its first bad
position.

Why: unchecked, a non-finite input gives plausible wrong logits far from its cause (README, "Non-finite inputs").
fp8 e4m3fn has no inf and encodes NaN as the bytes 0x7F and 0xFF (e4m3fnuz: 0x80 alone), so fp8 tensors are read as
bytes, never upcast. These checks read data and sync: they run only when values are checked (check_values=True,
MQA_LOGITS_CHECK=1, the CLI, file loading), over bounded slices so a large input costs no large temporary.
"""
from __future__ import annotations

import torch

from ..errors import UserError

SLICE_ELEMS = 1 << 26  # elements looked at per step (a few hundred MB of temporaries at most)


def bad_mask(x: torch.Tensor, fp8: torch.dtype | None = None) -> torch.Tensor:
    """True where x holds NaN, inf or -inf. fp8 tensors, and uint8 bytes holding fp8 values of dtype `fp8`, are
    tested by their NaN encodings."""
    kind = fp8 if x.dtype == torch.uint8 else x.dtype
    if kind == torch.float8_e4m3fn:
        return (x.view(torch.uint8) & 0x7F) == 0x7F
    if kind == torch.float8_e4m3fnuz:
        return x.view(torch.uint8) == 0x80
    return ~torch.isfinite(x)


def first_true(mask: torch.Tensor) -> tuple | None:
    """The index of mask's first True in row-major order, or None (argmax: first of the maxima, no index list)."""
    if not bool(mask.any()):
        return None
    flat = int(mask.reshape(-1).to(torch.uint8).argmax())
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), mask.shape))


def what(x: torch.Tensor, at: tuple, fp8: torch.dtype | None = None) -> str:
    """The bad value at x[at] in words: NaN, inf, -inf, or an fp8 NaN with its byte."""
    if x.dtype == torch.uint8 or x.dtype in (torch.float8_e4m3fn, torch.float8_e4m3fnuz):
        return f"NaN (fp8 byte {int(x[at].view(torch.uint8)):#04x})"
    v = float(x[at])
    return "NaN" if v != v else ("inf" if v > 0 else "-inf")


def refuse_nonfinite(name: str, x: torch.Tensor) -> None:
    """One-line UserError at x's first NaN or inf: `{name} holds NaN at {name}[i, j]`."""
    rows = max(1, SLICE_ELEMS // max(1, x[0].numel())) if x.dim() and x.shape[0] else 1
    for r0 in range(0, x.shape[0] if x.dim() else 1, rows):
        part = x[r0:r0 + rows] if x.dim() else x
        at = first_true(bad_mask(part))
        if at is not None:
            at = (at[0] + r0, *at[1:]) if x.dim() else at
            raise UserError(f"{name} holds {what(x, at)} at {name}[{', '.join(map(str, at))}]")
