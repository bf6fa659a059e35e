"""The paged decode form as sizes: spec, context lengths and counts (no torch: `explain` stays cheap).

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
logits rows written). That is the formula of docs/REFERENCE.md, kept for clean on and off so the
achieved fractions compare with the reference figures; q, weights and the block table (under 0.5 %
at the decode sizes) are left out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..errors import UserError
from .prefill import Counts, row_bytes

BLOCK_SIZES = (16, 32, 64)
KEYS = ("q", "kv_cache", "weights", "context_lens", "block_table", "max_context_len")
# The decode kernels count tokens in 32-bit integers, with room for a tile's overshoot past the end.
MAX_CONTEXT = 2 ** 31 - 2 ** 16
MAX_BATCH = 2 ** 24  # sequences of one decode problem (its logits alone would need 2 GiB per token of context)


def logits_bytes(rows: int, max_context_len: int, size: int = 4) -> int:
    """Bytes of the row-padded logits buffer [rows, max_context_len] in elements of `size` bytes."""
    return rows * row_bytes(max_context_len, size)


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
        if self.batch > MAX_BATCH:
            raise UserError(f"--batch {self.batch:,} passes the {MAX_BATCH:,} sequences a decode problem may hold "
                            f"(its logits alone would need {logits_bytes(self.batch * self.next_n, self.next_n):,} "
                            f"bytes or more)")
        if self.contexts is None and self.context_lens_from is None and self.context_len > MAX_CONTEXT:
            raise UserError(f"--context-len {self.context_len:,} is past the decode kernels' 32-bit token offsets "
                            f"(at most {MAX_CONTEXT:,})")
        if self.contexts is not None:
            if len(self.contexts) != self.batch:
                raise UserError(f"{len(self.contexts)} context lengths for --batch {self.batch}")
            check_contexts(self.contexts, "--contexts")

    def with_(self, **changes) -> "PagedSpec":
        return replace(self, **changes)

    def context_lengths(self) -> list[int]:
        """Per-sequence context lengths: explicit, from the file, or drawn from the seed in [(1-j)C, (1+j)C)."""
        return [int(x) for x in self.context_array()]

    def context_array(self):
        """context_lengths() as an int64 numpy array (the counts use it: no per-sequence Python objects)."""
        import numpy as np

        if self.contexts is not None:
            return np.asarray([int(c) for c in self.contexts], dtype=np.int64)
        if self.context_lens_from is not None:
            return np.asarray(read_context_lens(self.context_lens_from, self.next_n), dtype=np.int64)
        C, j = self.context_len, self.context_jitter
        lo = max(self.next_n, int(math.floor((1 - j) * C)))
        hi = max(lo + 1, int(math.ceil((1 + j) * C)))
        return np.random.default_rng(self.seed).integers(lo, hi, size=self.batch).astype(np.int64)

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
    check_contexts(out, str(p))
    return out


def check_contexts(contexts, where: str) -> None:
    """Context lengths are >= 0 (0: a padding request, whose rows are empty) and not all 0."""
    neg = [c for c in contexts if c < 0]
    if neg:
        raise UserError(f"{where}: context lengths must be >= 0, found {neg[0]}")
    if max(contexts) < 1:
        raise UserError(f"{where}: every context length is 0; at least one sequence needs a token")


# --------------------------------------------------------------------------------------------- counts

@dataclass(frozen=True)
class PagedCounts(Counts):
    """Counts of a paged problem: S = B*next_n rows, N = max_context_len; bytes as in the module docstring."""

    kv_tokens: int = 0  # sum over sequences of the tokens read from the cache

    def __post_init__(self):
        object.__setattr__(self, "flop", 2 * self.heads * self.dim * self.live)
        object.__setattr__(self, "bytes", self.kv_tokens * (self.dim + 4) + 4 * self.S * self.N)


def counts_from_ends(ends, next_n: int, heads: int, dim: int, max_context_len: int, clean: bool) -> PagedCounts:
    live = sum(sum(r) for r in ends)
    kv_tokens = sum(max(r) for r in ends)
    return PagedCounts(len(ends) * next_n, max_context_len, heads, dim, live, clean, kv_tokens=kv_tokens)


def spec_counts(spec: PagedSpec) -> PagedCounts:
    """Counts from the context lengths as one numpy array: row t of a sequence of c tokens sees max(0, c - T + t +
    1) of them, so a sequence's rows see T*c - T(T-1)/2 tokens (c >= T) or c(c+1)/2 (c < T)."""
    import numpy as np

    c, T = spec.context_array(), spec.next_n
    c = np.maximum(c, 0)
    live = int(np.where(c >= T, T * c - T * (T - 1) // 2, c * (c + 1) // 2).sum())
    return PagedCounts(spec.batch * T, int(c.max()), spec.heads, spec.dim, live, spec.clean_logits,
                       kv_tokens=int(c.sum()))


def memory(spec: PagedSpec, *, logits_size: int = 4, reference_size: int = 0) -> dict:
    """Bytes running the problem takes (no tensor made): its inputs while generated (q from fp32 randn; the cache
    from 16 MB pieces, then joined: twice its bytes), the row-padded logits buffer and, with reference_size (4 or
    8: a check), the reference."""
    import numpy as np

    B, T, H, D, bs = spec.batch, spec.next_n, spec.heads, spec.dim, spec.block_size
    c = spec.context_array()
    blocks = -(-np.maximum(c, 0) // bs)
    n_blocks, per, longest = int(blocks.sum()) + 3, int(blocks.max()), int(c.max())
    cache = n_blocks * bs * (D + 4)
    inputs = B * T * H * D * 5 + 2 * cache + 4 * B * T * H + 4 * B + 4 * B * per
    logits = logits_bytes(B * T, longest, logits_size)
    reference = B * T * longest * reference_size
    return {"inputs": inputs, "logits": logits, "reference": reference, "total": inputs + logits + reference}
