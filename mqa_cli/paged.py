"""The paged decode form: spec, counts, random generation, validation, float32 reference, Problem.

Layout (DeepGEMM's fp8_paged_mqa_logits):
- q [B, next_n, H, D] fp8; weights [B*next_n, H] fp32;
- kv_cache [num_blocks, block_size, 1, D + 4] uint8: block i holds block_size*D fp8 bytes
  (token-major) followed by block_size fp32 scales;
- context_lens [B] int32 (row (b, t) sees k < context_lens[b] - next_n + t + 1, causal inside the
  draft tokens) or [B, next_n] int32 (row (b, t) sees k < context_lens[b, t]);
- block_table [B, max_blocks] int32: token k of sequence b lives in block block_table[b, k // block_size],
  slot k % block_size;
- output [B*next_n, max_context_len] fp32 (a view of a row-padded buffer).

Counts: live = sum over rows of their ends; FLOP = 2*H*D*live; bytes = sum_b ctx_b*(D + 4) (the
cache bytes read, ctx_b = the most tokens any row of b sees) + B*next_n*max_context_len*4 (the
logits rows written). That is the formula of anchors-h200.md, kept for clean on and off so the
achieved fractions compare with the reference figures; q, weights and the block table (under 0.5 %
at the decode sizes) are left out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .errors import UserError
from .problem import Counts

BLOCK_SIZES = (16, 32, 64)
KEYS = ("q", "kv_cache", "weights", "context_lens", "block_table", "max_context_len")


# ----------------------------------------------------------------------------------------------- spec

@dataclass(frozen=True)
class PagedSpec:
    batch: int = 4
    next_n: int = 2
    context_len: int = 512
    context_jitter: float = 0.3
    block_size: int = 64
    heads: int = 64
    dim: int = 128
    seed: int = 0
    clean_logits: bool = True
    context_lens_from: str | None = None  # a text file of context lengths (one per sequence)
    contexts: tuple | None = None  # explicit context lengths (overrides context_len / jitter)

    def __post_init__(self):
        for name in ("batch", "next_n", "context_len", "block_size", "heads", "dim"):
            if getattr(self, name) < 1:
                raise UserError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.context_jitter < 1.0:
            raise UserError(f"--context-jitter must be in [0, 1), got {self.context_jitter}")
        if self.block_size not in BLOCK_SIZES:
            raise UserError(f"--block-size must be one of {', '.join(map(str, BLOCK_SIZES))}, got {self.block_size}")
        if self.contexts is not None:
            if len(self.contexts) != self.batch:
                raise UserError(f"{len(self.contexts)} context lengths for --batch {self.batch}")
            short = [c for c in self.contexts if c < self.next_n]
            if short:
                raise UserError(f"--next-n {self.next_n} is larger than a context of {short[0]} tokens")

    def with_(self, **changes) -> "PagedSpec":
        return replace(self, **changes)

    def context_lengths(self) -> list[int]:
        """Per-sequence context lengths: explicit, from the file, or drawn from the seed in [(1-j)C, (1+j)C)."""
        if self.contexts is not None:
            return [int(c) for c in self.contexts]
        if self.context_lens_from is not None:
            return read_context_lens(self.context_lens_from, self.next_n)
        import numpy as np

        C, j = self.context_len, self.context_jitter
        lo = max(self.next_n, int(math.floor((1 - j) * C)))
        hi = max(lo + 1, int(math.ceil((1 + j) * C)))
        rng = np.random.default_rng(self.seed)
        return [int(x) for x in rng.integers(lo, hi, size=self.batch)]

    def label(self) -> str:
        """paged-b4-t2-c512-j0.3-bs64-h64-d128-clean1."""
        if self.contexts is not None:
            ctx = "c" + "_".join(map(str, self.contexts)) if len(self.contexts) <= 4 else \
                f"c{min(self.contexts)}to{max(self.contexts)}"
        elif self.context_lens_from is not None:
            ctx = "cfile"
        else:
            ctx = f"c{self.context_len}-j{self.context_jitter:g}"
        return (f"paged-b{self.batch}-t{self.next_n}-{ctx}-bs{self.block_size}-h{self.heads}-d{self.dim}"
                f"-clean{int(self.clean_logits)}")

    def materialise(self, device, fp8: str = "e4m3fn") -> "Paged":
        return random_paged(self, device=device, fp8=fp8)


def read_context_lens(path: str, next_n: int = 1) -> list[int]:
    """Context lengths from a text file: integers separated by whitespace or commas."""
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise UserError(f"{p}: no such file (--context-lens-from)")
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{p}: cannot read context lengths: {e}") from None
    out = []
    for word in text.replace(",", " ").split():
        try:
            out.append(int(word))
        except ValueError:
            raise UserError(f"{p}: {word!r} is not an integer context length") from None
    if not out:
        raise UserError(f"{p}: no context lengths found")
    for c in out:
        if c < next_n:
            raise UserError(f"{p}: --next-n {next_n} is larger than a context of {c} tokens")
    return out


# --------------------------------------------------------------------------------------------- counts

@dataclass(frozen=True)
class PagedCounts(Counts):
    """Counts of a paged problem: S = B*next_n rows, N = max_context_len; bytes as in the module docstring."""

    kv_tokens: int = 0  # sum over sequences of the tokens read from the cache

    def __post_init__(self):
        object.__setattr__(self, "flop", 2 * self.heads * self.dim * self.live)
        object.__setattr__(self, "bytes", self.kv_tokens * (self.dim + 4) + 4 * self.S * self.N)


def row_ends_list(contexts, next_n: int) -> list[list[int]]:
    """ends[b][t] for 1-D context lengths (causal draft rows)."""
    return [[max(0, c - next_n + t + 1) for t in range(next_n)] for c in contexts]


def counts_from_ends(ends, next_n: int, heads: int, dim: int, max_context_len: int, clean: bool) -> PagedCounts:
    live = sum(sum(r) for r in ends)
    kv_tokens = sum(max(r) for r in ends)
    return PagedCounts(len(ends) * next_n, max_context_len, heads, dim, live, clean, kv_tokens=kv_tokens)


def spec_counts(spec: PagedSpec) -> PagedCounts:
    ctx = spec.context_lengths()
    return counts_from_ends(row_ends_list(ctx, spec.next_n), spec.next_n, spec.heads, spec.dim, max(ctx),
                            spec.clean_logits)


# -------------------------------------------------------------------------------------------- tensors

@dataclass
class Paged:
    q: "torch.Tensor"  # fp8 [B, next_n, H, D]
    kv_cache: "torch.Tensor"  # uint8 [num_blocks, block_size, 1, D + 4]
    weights: "torch.Tensor"  # fp32 [B*next_n, H]
    context_lens: "torch.Tensor"  # int32 [B] or [B, next_n]
    block_table: "torch.Tensor"  # int32 [B, max_blocks]
    max_context_len: int

    @property
    def batch(self):
        return self.q.shape[0]

    @property
    def next_n(self):
        return self.q.shape[1]

    @property
    def heads(self):
        return self.q.shape[2]

    @property
    def dim(self):
        return self.q.shape[3]

    @property
    def block_size(self):
        return self.kv_cache.shape[1]

    @property
    def S(self):
        return self.batch * self.next_n

    @property
    def N(self):
        return self.max_context_len

    @property
    def fp8(self) -> str:
        from .tensors import FP8_NAMES

        return FP8_NAMES[self.q.dtype]

    def as_dict(self) -> dict:
        import torch

        d = {k: getattr(self, k) for k in KEYS[:-1]}
        d["max_context_len"] = torch.tensor(int(self.max_context_len), dtype=torch.int64)
        return d

    def to(self, device) -> "Paged":
        return Paged(*(getattr(self, k).to(device) for k in KEYS[:-1]), self.max_context_len)

    def row_ends(self):
        """int64 [B, next_n]: one past the last kv token each row sees."""
        import torch

        ctx = self.context_lens.long()
        if ctx.dim() == 2:
            return ctx.clamp_min(0)
        t = torch.arange(self.next_n, device=ctx.device)
        return (ctx[:, None] - self.next_n + t[None, :] + 1).clamp_min(0)

    def reference(self, dtype=None, clean_logits: bool = True):
        import torch

        return reference_paged(self, dtype=dtype or torch.float32, clean_logits=clean_logits)


def pack_cache(kv, scales, block_size: int):
    """kv fp8 [num_blocks*block_size, D] and scales fp32 [num_blocks*block_size] -> uint8 cache
    [num_blocks, block_size, 1, D + 4] in DeepGEMM's byte layout."""
    import torch

    T, D = kv.shape
    nb = T // block_size
    data = kv.view(torch.uint8).reshape(nb, block_size * D)
    sf = scales.float().contiguous().view(torch.uint8).reshape(nb, block_size * 4)
    return torch.cat([data, sf], dim=1).reshape(nb, block_size, 1, D + 4)


def unpack_blocks(kv_cache, blocks, fp8_dtype):
    """Dequantisable contents of `blocks` (int64 [n]): fp8 [n*block_size, D] and fp32 scales [n*block_size]."""
    import torch

    nb, bs, _, dp4 = kv_cache.shape
    D = dp4 - 4
    flat = kv_cache[blocks].reshape(len(blocks), bs * dp4)
    kv = flat[:, : bs * D].contiguous().view(fp8_dtype).reshape(-1, D)
    sf = flat[:, bs * D:].contiguous().view(torch.float32).reshape(-1)
    return kv, sf


def random_paged(spec: PagedSpec, device="cpu", fp8: str = "e4m3fn") -> Paged:
    """Random, never-zero inputs from the seed: contexts, a shuffled block table (blocks not contiguous),
    q randn -> fp8, kv quantised per token into the cache, weights randn."""
    import torch

    from .tensors import FP8_DTYPES, quantize_per_token

    ctx = spec.context_lengths()
    B, T, H, D, bs = spec.batch, spec.next_n, spec.heads, spec.dim, spec.block_size
    if len(ctx) != B:
        raise UserError(f"{len(ctx)} context lengths for --batch {B}")
    blocks_per = [-(-c // bs) for c in ctx]
    max_blocks = max(blocks_per)
    num_blocks = sum(blocks_per) + 3  # a few spare blocks nobody references
    cpu = torch.Generator().manual_seed(spec.seed)
    perm = torch.randperm(num_blocks, generator=cpu).to(torch.int32)
    table = torch.zeros(B, max_blocks, dtype=torch.int32)
    used = 0
    for b, n in enumerate(blocks_per):
        table[b, :n] = perm[used:used + n]
        used += n
    gen = torch.Generator(device=device).manual_seed(spec.seed)
    q = torch.randn(B, T, H, D, generator=gen, device=device).to(FP8_DTYPES[fp8])
    weights = torch.randn(B * T, H, generator=gen, device=device)
    pieces = []
    step = max(1, (1 << 22) // (bs * D))  # blocks per generation chunk: ~16 MB of randn at a time
    for b0 in range(0, num_blocks, step):
        n = min(step, num_blocks - b0)
        kv, sf = quantize_per_token(torch.randn(n * bs, D, generator=gen, device=device), fp8)
        pieces.append(pack_cache(kv, sf, bs))
    kv_cache = torch.cat(pieces, dim=0)
    context_lens = torch.tensor(ctx, dtype=torch.int32, device=device)
    return Paged(q, kv_cache, weights, context_lens, table.to(device), max(ctx))


def validate_meta(t: Paged) -> None:
    """Dtype, shape and layout checks: no data is read (safe inside CUDA-graph capture)."""
    import torch

    from .tensors import FP8_NAMES

    if t.q.dtype not in FP8_NAMES:
        raise UserError(f"q must be fp8 e4m3 (float8_e4m3fn or float8_e4m3fnuz), got {t.q.dtype}")
    if t.q.dim() != 4:
        raise UserError(f"q must be [B, next_n, H, D], got shape {list(t.q.shape)}")
    B, T, H, D = t.q.shape
    if t.kv_cache.dtype != torch.uint8:
        raise UserError(f"kv_cache must be uint8 [num_blocks, block_size, 1, D + 4] (block_size*D fp8 bytes, then "
                        f"block_size fp32 scales per block), got {t.kv_cache.dtype}")
    if t.kv_cache.dim() != 4 or t.kv_cache.shape[2] != 1 or t.kv_cache.shape[3] != D + 4:
        raise UserError(f"kv_cache must be [num_blocks, block_size, 1, {D + 4}] uint8 (D = {D} fp8 bytes + 4 scale "
                        f"bytes per token), got shape {list(t.kv_cache.shape)}")
    nb, bs = t.kv_cache.shape[:2]
    if nb == 0:
        raise UserError("kv_cache holds no blocks")
    if t.kv_cache.stride(3) != 1 or t.kv_cache.stride(1) != D + 4 or t.kv_cache.stride(0) % 16:
        raise UserError(f"kv_cache blocks must be contiguous (strides [k*16, {D + 4}, *, 1]), got strides "
                        f"{list(t.kv_cache.stride())}")
    if t.q.stride(3) != 1 or t.q.stride(2) != D or t.q.stride(1) != H * D or t.q.stride(0) != T * H * D:
        raise UserError("q must be contiguous; call .contiguous()")
    if t.weights.dtype != torch.float32 or tuple(t.weights.shape) != (B * T, H):
        raise UserError(f"weights must be float32 [{B * T}, {H}], got {t.weights.dtype} {list(t.weights.shape)}")
    if not t.weights.is_contiguous():
        raise UserError("weights must be contiguous; call .contiguous()")
    if t.context_lens.dtype != torch.int32 or tuple(t.context_lens.shape) not in ((B,), (B, T)):
        raise UserError(f"context_lens must be int32 [{B}] or [{B}, {T}], got {t.context_lens.dtype} "
                        f"{list(t.context_lens.shape)}")
    if not t.context_lens.is_contiguous():
        raise UserError("context_lens must be contiguous")
    if t.block_table.dtype != torch.int32 or t.block_table.dim() != 2 or t.block_table.shape[0] != B:
        raise UserError(f"block_table must be int32 [{B}, max_blocks], got {t.block_table.dtype} "
                        f"{list(t.block_table.shape)}")
    if t.block_table.stride(1) != 1:
        raise UserError("block_table must be contiguous along blocks")
    if int(t.max_context_len) < 1:
        raise UserError(f"max_context_len must be >= 1, got {t.max_context_len}")
    devices = {getattr(t, k).device for k in KEYS[:-1]}
    if len(devices) > 1:
        raise UserError(f"all tensors must be on one device, got {sorted(map(str, devices))}")


def validate(t: Paged) -> None:
    """validate_meta, then the values: contexts against next_n, max_context_len and the table; table entries."""
    import torch

    validate_meta(t)
    T = t.next_n
    nb, bs = t.kv_cache.shape[:2]
    ctx = t.context_lens.long()
    if (ctx < 0).any():
        raise UserError(f"context_lens must be >= 0, found {int(ctx.min())}")
    if ctx.dim() == 1 and (ctx < T).any():
        b = int((ctx < T).nonzero()[0, 0])
        raise UserError(f"next_n {T} is larger than the context of sequence {b} ({int(ctx[b])} tokens)")
    ends = t.row_ends()
    seq_end = ends.max(dim=1).values  # [B]
    if int(seq_end.max()) > int(t.max_context_len):
        b = int(seq_end.argmax())
        raise UserError(f"sequence {b} has {int(seq_end[b])} tokens, more than max_context_len = {t.max_context_len}")
    need = (seq_end + bs - 1) // bs
    if int(need.max()) > t.block_table.shape[1]:
        b = int(need.argmax())
        raise UserError(f"sequence {b} has {int(seq_end[b])} tokens, longer than its block table covers "
                        f"({t.block_table.shape[1]} blocks of {bs} = {t.block_table.shape[1] * bs})")
    used = torch.arange(t.block_table.shape[1], device=ctx.device)[None, :] < need[:, None]
    bad = used & ((t.block_table < 0) | (t.block_table >= nb))
    if bad.any():
        b, i = (int(x) for x in bad.nonzero()[0])
        raise UserError(f"block_table[{b}, {i}] = {int(t.block_table[b, i])} is out of range [0, {nb}) "
                        f"(num_blocks of kv_cache)")
    if not torch.isfinite(t.weights).all():
        raise UserError("weights holds NaN or inf")
    blocks = t.block_table[used].long().unique()
    _, sf = unpack_blocks(t.kv_cache, blocks, t.q.dtype)
    if not torch.isfinite(sf).all():
        raise UserError("kv_cache holds a NaN or inf scale in a block the table references")


# ------------------------------------------------------------------------------------------ reference

def reference_paged(t: Paged, dtype=None, clean_logits: bool = True, chunk_tokens: int = 8192):
    """[B*next_n, max_context_len] logits in float32 (or float64), gathering kv through the block table;
    chunked over kv tokens so one sequence of any length fits. Dead entries: -inf (clean) or 0."""
    import torch

    dtype = dtype or torch.float32
    B, T, H, D = t.q.shape
    bs = t.block_size
    N = int(t.max_context_len)
    fill = float("-inf") if clean_logits else 0.0
    out = torch.full((B * T, N), fill, dtype=dtype, device=t.q.device)
    ends = t.row_ends()
    for b in range(B):
        e = ends[b]
        hi = int(e.max())
        if hi == 0:
            continue
        q = t.q[b].to(dtype)  # [T, H, D]
        w = t.weights[b * T:(b + 1) * T].to(dtype)  # [T, H]
        step = max(bs, chunk_tokens // bs * bs)
        for k0 in range(0, hi, step):
            k1 = min(hi, k0 + step)
            blocks = t.block_table[b, k0 // bs: -(-k1 // bs)].long()
            kv, sf = unpack_blocks(t.kv_cache, blocks, t.q.dtype)
            kv = kv[: k1 - k0].to(dtype)
            sf = sf[: k1 - k0].to(dtype)
            scores = torch.einsum("thd,nd->thn", q, kv).clamp_min_(0)
            logits = torch.einsum("thn,th->tn", scores, w) * sf[None, :]
            k = torch.arange(k0, k1, device=out.device)
            live = k[None, :] < e[:, None]
            out[b * T:(b + 1) * T, k0:k1] = torch.where(live, logits, torch.tensor(fill, dtype=dtype, device=out.device))
    return out


# -------------------------------------------------------------------------------------------- problem

def shape_of(t: Paged, clean_logits: bool):
    from .dispatch import Shape

    return Shape("paged", t.S, int(t.max_context_len), t.heads, t.dim, clean_logits, t.fp8, batch=t.batch,
                 next_n=t.next_n, block_size=t.block_size)


def problem_from_spec(spec: PagedSpec, fp8: str = "e4m3fn"):
    from .dispatch import Shape
    from .source import Problem

    c = spec_counts(spec)
    shape = Shape("paged", c.S, c.N, spec.heads, spec.dim, spec.clean_logits, fp8, batch=spec.batch,
                  next_n=spec.next_n, block_size=spec.block_size)
    return Problem(spec.label(), shape, c, spec=spec)


def load_paged(path) -> Paged:
    import torch

    from .io import load_tensors

    d = load_tensors(path, KEYS)
    m = d["max_context_len"]
    if m.numel() != 1 or m.dtype.is_floating_point or m.dtype == torch.bool:
        raise UserError(f"{path}: max_context_len must be a 0-d integer tensor, got {m.dtype} {list(m.shape)}")
    t = Paged(d["q"], d["kv_cache"], d["weights"], d["context_lens"], d["block_table"], int(m.item()))
    try:
        validate(t)
    except UserError as e:
        raise UserError(f"{path}: {e}") from None
    return t


def problem_from_file(path, clean_logits: bool):
    from .source import Problem

    t = load_paged(path)
    ends = t.row_ends().tolist()
    c = counts_from_ends(ends, t.next_n, t.heads, t.dim, int(t.max_context_len), clean_logits)
    label = (f"{path} (paged B {t.batch}, next_n {t.next_n}, max ctx {t.max_context_len}, bs {t.block_size}, "
             f"H {t.heads}, D {t.dim})")
    return Problem(label, shape_of(t, clean_logits), c, tensors=t)


__all__ = ["PagedSpec", "PagedCounts", "Paged", "random_paged", "validate", "validate_meta", "reference_paged",
           "problem_from_spec", "problem_from_file", "load_paged", "pack_cache", "unpack_blocks"]


def meta_paged(shape) -> Paged:
    """A Paged of the shape's sizes on the meta device (for cross-compiling: shapes and strides, no memory)."""
    import torch

    from .tensors import FP8_DTYPES

    B, T, H, D, bs, N = shape.batch, shape.next_n, shape.heads, shape.dim, shape.block_size, shape.N
    nb = B * -(-N // bs)
    m = dict(device="meta")
    return Paged(torch.empty(B, T, H, D, dtype=FP8_DTYPES[shape.fp8], **m),
                 torch.empty(nb, bs, 1, D + 4, dtype=torch.uint8, **m), torch.empty(B * T, H, **m),
                 torch.empty(B, dtype=torch.int32, **m), torch.empty(B, -(-N // bs), dtype=torch.int32, **m), N)
