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
            check_contexts(self.contexts, "--contexts")

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
