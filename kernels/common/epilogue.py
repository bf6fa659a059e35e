"""Epilogue pieces every plain-Triton kernel shares: the head reduction and the -inf fill.

Written once here so a change to the math (relu, x weight, head sum, x kv scale) or to how dead
columns are filled lands in every kernel.
"""
import triton
import triton.language as tl

from . import config

INT32_MAX = tl.constexpr(config.INT32_MAX)  # kernels read globals only as constexprs


@triton.jit
def fma_chain(acc, x, w, K: tl.constexpr, FIRST: tl.constexpr):
    """acc + sum_k x[..., k] * w[..., k] over the last axis (K, a power of two >= 2) of x and w, as K dependent FMAs
    (FIRST: the chain starts with a multiply and acc is not read).

    Written out so that it stays one FMA chain whatever order triton reduces in: since triton 3.8 a reduction adds a
    thread's values as a tree, whose inner adds cannot take a multiply (a tree of H products costs H/2 FMUL + H/2 FFMA
    + H/2 FADD where the chain costs 1 FMUL + H - 1 FFMA). The columns must be one thread's registers (the caller
    lays them out so): each split is then a renaming, no data moves. Order: even columns, then odd, at each level."""
    if K == 2:
        x0, x1 = tl.split(x)
        w0, w1 = tl.split(w)
        if FIRST:
            acc = x0 * w0
        else:
            acc = tl.fma(x0, w0, acc)
        return tl.fma(x1, w1, acc)
    else:
        x0, x1 = tl.split(tl.reshape(x, x.shape[:-1] + (K // 2, 2)))
        w0, w1 = tl.split(tl.reshape(w, w.shape[:-1] + (K // 2, 2)))
        acc = fma_chain(acc, x0, w0, K // 2, FIRST)
        return fma_chain(acc, x1, w1, K // 2, False)


@triton.jit
def weighted_head_sum(scores, w, scale, BLOCK_KV: tl.constexpr, ROWS: tl.constexpr, H: tl.constexpr):
    """[BLOCK_KV, ROWS*H] dot products -> [BLOCK_KV, ROWS] logits: relu, x weight, sum over heads, x kv scale.

    Column c = row * H + head. In the MMA accumulator a thread holds columns 8j + 2t + {0, 1} (t its lane in the
    quad): a row's heads h = 8j + 2t + e, H/4 of them in its registers (j, e), the rest in the quad's other lanes. The
    in-thread part is one FMA chain (fma_chain), then the quad's 4 partial sums are added across lanes. The scale
    multiplies after the head sum (one multiply per logit instead of one per head)."""
    x = tl.maximum(scores, 0.0)
    wb = tl.broadcast_to(w[None, :], (BLOCK_KV, ROWS * H))
    if H >= 8:
        # [kv, row, j, t, e] -> [kv, row, t, (j, e)]: the thread's heads of a row last
        x = tl.reshape(tl.permute(tl.reshape(x, (BLOCK_KV, ROWS, H // 8, 4, 2)), (0, 1, 3, 2, 4)), (BLOCK_KV, ROWS, 4, H // 4))
        wb = tl.reshape(tl.permute(tl.reshape(wb, (BLOCK_KV, ROWS, H // 8, 4, 2)), (0, 1, 3, 2, 4)), (BLOCK_KV, ROWS, 4, H // 4))
        part = fma_chain(0.0, x, wb, H // 4, True)
        return tl.sum(part, axis=2) * scale[:, None]
    else:
        return tl.sum(tl.reshape(x * wb, (BLOCK_KV, ROWS, H)), axis=2) * scale[:, None]


@triton.jit
def head_major_sum(scores, w, scale, BLOCK_KV: tl.constexpr, ROWS: tl.constexpr, H: tl.constexpr):
    """weighted_head_sum for head-major columns (c = head * ROWS + row). The accumulator's columns 8j + 2t + e of a
    thread hold, for ROWS >= 8, every head of its rows (one FMA chain per logit, no shuffle); for ROWS 4 half of them,
    the other half in the lane t ^ 2 (a chain, then one shuffle round)."""
    x = tl.maximum(scores, 0.0)
    wb = tl.broadcast_to(w[None, :], (BLOCK_KV, ROWS * H))
    if ROWS >= 8:
        x = tl.permute(tl.reshape(x, (BLOCK_KV, H, ROWS)), (0, 2, 1))
        wb = tl.permute(tl.reshape(wb, (BLOCK_KV, H, ROWS)), (0, 2, 1))
        return fma_chain(0.0, x, wb, H, True) * scale[:, None]
    elif ROWS == 4:
        # c = 8 j + 4 (lane bit) + row: [kv, j, lane bit, row] -> [kv, row, lane bit, j]
        x = tl.permute(tl.reshape(x, (BLOCK_KV, H // 2, 2, ROWS)), (0, 3, 2, 1))
        wb = tl.permute(tl.reshape(wb, (BLOCK_KV, H // 2, 2, ROWS)), (0, 3, 2, 1))
        return tl.sum(fma_chain(0.0, x, wb, H // 2, True), axis=2) * scale[:, None]
    else:
        return tl.sum(tl.reshape(x * wb, (BLOCK_KV, H, ROWS)), axis=1) * scale[:, None]


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
