"""Prefill tensors: random generation from a ProblemSpec and validation of user-given ones."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import UserError
from .prefill import ProblemSpec, windows

FP8_DTYPES = {"e4m3fn": torch.float8_e4m3fn, "e4m3fnuz": torch.float8_e4m3fnuz}
FP8_NAMES = {v: k for k, v in FP8_DTYPES.items()}
KEYS = ("q", "kv", "kv_scales", "weights", "ks", "ke")


@dataclass
class Prefill:
    q: torch.Tensor  # fp8 [S, H, D]
    kv: torch.Tensor  # fp8 [N, D]
    kv_scales: torch.Tensor  # fp32 [N]
    weights: torch.Tensor  # fp32 [S, H]
    ks: torch.Tensor  # int32 [S]
    ke: torch.Tensor  # int32 [S]

    @property
    def S(self):
        return self.q.shape[0]

    @property
    def N(self):
        return self.kv.shape[0]

    @property
    def heads(self):
        return self.q.shape[1]

    @property
    def dim(self):
        return self.q.shape[2]

    @property
    def fp8(self) -> str:
        return FP8_NAMES[self.q.dtype]

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in KEYS}

    def to(self, device) -> "Prefill":
        return Prefill(*(getattr(self, k).to(device) for k in KEYS))


def quantize_per_token(x: torch.Tensor, fp8: str = "e4m3fn") -> tuple[torch.Tensor, torch.Tensor]:
    """fp8 rows with one fp32 scale each: scale = amax / fp8 max."""
    dtype = FP8_DTYPES[fp8]
    scale = x.abs().amax(dim=-1).clamp_min(1e-4) / torch.finfo(dtype).max
    return (x / scale.unsqueeze(-1)).to(dtype), scale.float()


def random_prefill(spec: ProblemSpec, device="cpu", fp8: str = "e4m3fn") -> Prefill:
    """Random, never-zero inputs from the spec's seed (q randn -> fp8, kv quantised per token, weights randn)."""
    gen = torch.Generator(device=device).manual_seed(spec.seed)
    S, N, H, D = spec.S, spec.N, spec.heads, spec.dim
    q = torch.randn(S, H, D, generator=gen, device=device).to(FP8_DTYPES[fp8])
    kv, kv_scales = quantize_per_token(torch.randn(N, D, generator=gen, device=device), fp8)
    weights = torch.randn(S, H, generator=gen, device=device)
    ks, ke = windows(spec)
    return Prefill(q, kv, kv_scales, weights, torch.from_numpy(ks).to(device), torch.from_numpy(ke).to(device))


def scales_1d(kv_scales: torch.Tensor) -> torch.Tensor:
    """kv scales as the engines hold them, [N] or [N, 1], as a 1-D view (no copy; maybe strided)."""
    if kv_scales.dim() == 2 and kv_scales.shape[1] == 1:
        return kv_scales[:, 0]
    return kv_scales


_MEMORY: dict = {}  # device -> bytes (a property of the device: looked up once)


def memory_of(device) -> int | None:
    """Bytes of memory a tensor on `device` can use at most: the GPU's, or the host's physical memory for the CPU;
    None where unknown (the meta device). A host-side fact (no sync), cached per device."""
    device = torch.device(device)
    if device in _MEMORY:
        return _MEMORY[device]
    have = None
    if device.type == "cuda":
        have = torch.cuda.get_device_properties(device.index if device.index is not None else
                                                torch.cuda.current_device()).total_memory
    elif device.type == "cpu":
        import os

        try:
            have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            have = None
    _MEMORY[device] = have
    return have


def check_one_device(t, keys) -> None:
    """The tensors `keys` of bundle `t` on q's device, and that device not meta (tensors on it have shapes but no
    data: no kernel can run on them)."""
    dev = t.q.device
    for k in keys:
        if getattr(t, k).device != dev:
            raise UserError(f"all tensors must be on one device: q is on {dev}, {k} on {getattr(t, k).device}")
    if dev.type == "meta":
        raise UserError("the tensors are on the meta device, which holds no data: pass them on a GPU or the CPU")


def check_prefill(t: Prefill) -> None:
    """Dtypes, shapes, devices and strides; reads no tensor data (the library's hot path, capturable)."""
    if t.q.dtype not in FP8_NAMES:
        raise UserError(f"q must be fp8 e4m3 (float8_e4m3fn or float8_e4m3fnuz), got {t.q.dtype}")
    if t.q.dim() != 3:
        raise UserError(f"q must be [S, H, D], got shape {list(t.q.shape)}")
    S, H, D = t.q.shape
    if t.kv.dtype != t.q.dtype:
        raise UserError(f"kv must have q's dtype {t.q.dtype}, got {t.kv.dtype}")
    if t.kv.dim() != 2 or t.kv.shape[1] != D:
        raise UserError(f"kv must be [N, {D}], got shape {list(t.kv.shape)}")
    N = t.kv.shape[0]
    expect = {"kv_scales": ((N,), torch.float32), "weights": ((S, H), torch.float32),
              "ks": ((S,), torch.int32), "ke": ((S,), torch.int32)}
    for key, (shape, dtype) in expect.items():
        x = getattr(t, key)
        if x.dtype != dtype:
            raise UserError(f"{key} must be {dtype}, got {x.dtype}")
        if tuple(x.shape) != shape:
            raise UserError(f"{key} must have shape {list(shape)}, got {list(x.shape)}")
    check_one_device(t, KEYS[1:])
    if S == 0 or N == 0:
        raise UserError(f"empty problem: S = {S}, N = {N}")
    if t.q.stride(2) != 1:
        raise UserError(f"q must be contiguous along D (stride(2) == 1), got strides {list(t.q.stride())}")
    if t.kv.stride(1) != 1:
        raise UserError(f"kv must be contiguous along D (stride(1) == 1), got strides {list(t.kv.stride())}")


def validate_values(t: Prefill, max_seqlen_k: int = 0) -> None:
    """The checks that read data (they sync with the device): no NaN or inf in q, kv, kv_scales or weights,
    0 <= ks <= ke <= N, and with max_seqlen_k > 0 (compressed rows of that many columns) every window at most that
    long."""
    from .finite import refuse_nonfinite

    N = t.N
    for name in ("q", "kv", "kv_scales", "weights"):
        refuse_nonfinite(name, getattr(t, name))
    if (t.ks < 0).any():
        raise UserError(f"ks must be >= 0, found {int(t.ks.min())}")
    if (t.ke < 0).any():
        raise UserError(f"ke must be >= 0, found {int(t.ke.min())}")
    bad = (t.ks > t.ke).nonzero()
    if bad.numel():
        i = int(bad[0, 0])
        raise UserError(f"ks > ke at row {i}: ks = {int(t.ks[i])}, ke = {int(t.ke[i])}")
    if (t.ke > N).any():
        i = int((t.ke > N).nonzero()[0, 0])
        raise UserError(f"ke > N = {N} at row {i}: ke = {int(t.ke[i])}")
    if max_seqlen_k > 0 and t.S:
        width = t.ke.long() - t.ks.long()
        i = int(width.argmax())
        if int(width[i]) > max_seqlen_k:
            raise UserError(f"max_seqlen_k {max_seqlen_k} is below row {i}'s window of {int(width[i])} positions "
                            f"(ks {int(t.ks[i])}, ke {int(t.ke[i])}): a compressed row holds max_seqlen_k of them")


def live_mask(ks: torch.Tensor, ke: torch.Tensor, N: int, cols: slice | None = None) -> torch.Tensor:
    j = torch.arange(N, device=ks.device)
    if cols is not None:
        j = j[cols]
    return (j[None, :] >= ks[:, None].long()) & (j[None, :] < ke[:, None].long())


def chunk_rows(S: int, N: int, H: int, budget_bytes: int = 512 << 20) -> int:
    """Rows per reference chunk so the [rows, H, N] score block stays within the budget."""
    return max(1, min(S, budget_bytes // max(1, H * N * 4)))

