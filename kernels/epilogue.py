"""Epilogue pieces every plain-Triton kernel shares: the head reduction and the -inf fill.

Written once here so a change to the math (relu, x weight, head sum, x kv scale) or to how dead
columns are filled lands in every kernel.
"""
import triton
import triton.language as tl

from . import config

INT32_MAX = tl.constexpr(config.INT32_MAX)  # kernels read globals only as constexprs


@triton.jit
def weighted_head_sum(scores, w, scale, BLOCK_KV: tl.constexpr, ROWS: tl.constexpr, H: tl.constexpr):
    """[BLOCK_KV, ROWS*H] dot products -> [BLOCK_KV, ROWS] logits: relu, x weight, sum over heads, x kv scale.

    The scale multiplies after the head sum (one multiply per logit instead of one per head).
    """
    x = tl.maximum(scores, 0.0) * w[None, :]
    return tl.sum(tl.reshape(x, (BLOCK_KV, ROWS, H)), axis=2) * scale[:, None]


@triton.jit
def fill_neg_inf(out_base, row_offs, row_ok, row_lo, lo, hi, ROWS: tl.constexpr, WIDTH: tl.constexpr):
    """-inf over columns [max(lo, row_lo[r]), hi) of ROWS output rows, WIDTH columns per store.

    out_base is the (64-bit) address of the block's first row; row_offs the rows' offsets from it.
    row_lo lets a row start later than the others (compressed logits: each row's own length).
    """
    neg = tl.full((ROWS, WIDTH), float("-inf"), tl.float32).to(out_base.dtype.element_ty)
    offs = tl.arange(0, WIDTH)
    for start in range(lo, hi, WIDTH):
        cols = start + offs
        ok = row_ok[:, None] & (cols[None, :] < hi) & (cols[None, :] >= row_lo[:, None])
        tl.store(out_base + row_offs[:, None] + cols[None, :], neg, mask=ok)


@triton.jit
def store_tile(out_base, logits, row_offs, kv_rows, ks, ke, mask, max_seqlen_k, CLEAN: tl.constexpr,
               COMPRESSED: tl.constexpr, MASK_WINDOW: tl.constexpr):
    """Store a [BLOCK_KV, ROWS] logits tile (kv rows x query rows) in the output's dtype.

    Full form: column = kv row; with CLEAN, entries outside [ks, ke) become -inf (only on tiles that
    straddle a window edge: MASK_WINDOW). Compressed form: column = kv row - ks of the row, and only the
    live entries that fit in max_seqlen_k columns are written.
    """
    if COMPRESSED:
        col = kv_rows[:, None] - ks[None, :]
        live = (col >= 0) & (kv_rows[:, None] < ke[None, :]) & (col < max_seqlen_k)
        tl.store(out_base + row_offs[None, :] + col, logits.to(out_base.dtype.element_ty), mask=mask & live)
    else:
        if CLEAN and MASK_WINDOW:
            live = (kv_rows[:, None] >= ks[None, :]) & (kv_rows[:, None] < ke[None, :])
            logits = tl.where(live, logits, float("-inf"))
        tl.store(out_base + row_offs[None, :] + kv_rows[:, None], logits.to(out_base.dtype.element_ty), mask=mask)
