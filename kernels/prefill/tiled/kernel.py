"""Portable prefill kernel: fp8 MQA logits on any Triton target (and the interpreter).

Layout (the one that wins on tensor cores): a kv tile is the MMA's M operand and BLOCK_Q query rows x
H heads form N, so one dot gives [BLOCK_KV, BLOCK_Q*H] scores whose head reduction stays inside the
tile. Only kv tiles inside [min ks, max ke) of the query block are computed; with CLEAN the rest of the
block's rows (within this program's kv split) are written as -inf. Tiles inside every row's window are
stored without the window mask (full form). Row bases are 64-bit.

Column order of N: row-major (column = row * H + head, the shared prologue/epilogue) or, with HEAD_MAJOR,
column = head * BLOCK_Q + row. The MMA accumulator gives each thread 2 adjacent columns of every 8, the 4
threads of a quad the rest of those 8: row-major, a row's heads span the quad, so the head sum needs
shuffles and leaves every logit repeated in 4 threads (scale, mask and store done 4 times); head-major
with BLOCK_Q >= 8, a row's heads all sit in one thread's registers, so the sum is plain adds and each
logit lives in one thread. It matters at small H, where a tile holds many rows (tools/tune/sweep_heads.py).
"""
import triton
import triton.language as tl

from ...common.epilogue import fill_neg_inf, head_major_sum, store_tile, weighted_head_sum
from ...common.naming import make_kernel_repr
from ...common.prologue import block_queries, block_windows
from . import KEYS


@triton.jit
def _head_major_queries(q_ptr, w_ptr, q0, S, stride_q_s, stride_q_h, stride_w_s, stride_w_h,
                        BLOCK_Q: tl.constexpr, H: tl.constexpr, D: tl.constexpr):
    """q^T [D, BLOCK_Q*H] and weights [BLOCK_Q*H] of rows q0 .. q0+BLOCK_Q-1, column c = (head c // BLOCK_Q,
    row c % BLOCK_Q); rows past S load zeros. The block base is 64-bit, as in the shared prologue."""
    cols = tl.arange(0, BLOCK_Q * H)
    r = cols % BLOCK_Q
    h = cols // BLOCK_Q
    ok = q0 + r < S
    base = tl.cast(q0, tl.int64)
    dims = tl.arange(0, D)
    q_t = tl.load(q_ptr + base * stride_q_s + (r * stride_q_s + h * stride_q_h)[None, :] + dims[:, None],
                  mask=ok[None, :], other=0.0)
    w = tl.load(w_ptr + base * stride_w_s + r * stride_w_s + h * stride_w_h, mask=ok, other=0.0)
    return q_t, w


@triton.jit(repr=make_kernel_repr("mqa_logits_tiled", KEYS))
def mqa_logits_tiled(
    q_ptr,  # fp8 e4m3 [S, H, D], dim contiguous
    kv_ptr,  # fp8 e4m3 [N, D], dim contiguous
    kv_scale_ptr,  # fp32 [N] (any stride)
    w_ptr,  # fp32 [S, H]
    ks_ptr,  # int32 [S] (any stride): first live kv row of each query row
    ke_ptr,  # int32 [S] (any stride): one past the last live kv row
    out_ptr,  # fp32 or bf16 [S, stride_out_s]; columns = kv rows (full) or kv row - ks (COMPRESSED)
    S,
    N,
    max_seqlen_k,  # COMPRESSED: output columns per row
    stride_q_s, stride_q_h, stride_kv_n, stride_scale, stride_w_s, stride_w_h, stride_ks, stride_ke, stride_out_s,
    tiles_per_split,  # kv tiles each program of grid axis 1 covers
    H: tl.constexpr,
    D: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_KV: tl.constexpr,
    CLEAN: tl.constexpr,
    COMPRESSED: tl.constexpr,
    BF16: tl.constexpr,  # output dtype is bf16 (names the compiled kernel; the store casts to out_ptr's type)
    HEAD_MAJOR: tl.constexpr,  # column of the dot = head * BLOCK_Q + row (else row * H + head)
):
    pid_q = tl.program_id(0)
    pid_split = tl.program_id(1)
    q0 = pid_q * BLOCK_Q

    r = tl.arange(0, BLOCK_Q)
    rows = q0 + r
    row_ok = rows < S
    ks, ke, lo, hi = block_windows(ks_ptr, ke_ptr, rows, row_ok, stride_ks, stride_ke)
    if HEAD_MAJOR:
        q_t, w = _head_major_queries(q_ptr, w_ptr, q0, S, stride_q_s, stride_q_h, stride_w_s, stride_w_h, BLOCK_Q, H,
                                     D)
    else:
        q_t, w = block_queries(q_ptr, w_ptr, q0, S, stride_q_s, stride_q_h, stride_w_s, stride_w_h, BLOCK_Q, H, D,
                               True)
    dims = tl.arange(0, D)
    out_base = out_ptr + tl.cast(q0, tl.int64) * stride_out_s
    row_offs = r * stride_out_s

    # This program's kv span, in whole tiles, and its live part.
    n_tiles = tl.cdiv(N, BLOCK_KV)
    t_begin = pid_split * tiles_per_split
    t_end = tl.minimum(t_begin + tiles_per_split, n_tiles)
    span_lo = t_begin * BLOCK_KV
    span_hi = t_end * BLOCK_KV
    live_lo = tl.minimum(tl.maximum((lo // BLOCK_KV) * BLOCK_KV, span_lo), span_hi)
    live_hi = tl.maximum(tl.minimum(tl.cdiv(hi, BLOCK_KV) * BLOCK_KV, span_hi), live_lo)

    # Tiles inside [max ks, min ke) of the block's rows (all valid; never past N) need no window mask; a block
    # with a row past S has none (that row's ks is INT32_MAX).
    in_lo = tl.max(ks, axis=0)
    in_hi = tl.minimum(tl.min(ke, axis=0), N)

    offs = tl.arange(0, BLOCK_KV)
    for start in range(live_lo, live_hi, BLOCK_KV):
        kv_rows = start + offs
        kv_ok = kv_rows < N
        kv = tl.load(kv_ptr + tl.cast(start, tl.int64) * stride_kv_n + (offs * stride_kv_n)[:, None] + dims[None, :],
                     mask=kv_ok[:, None], other=0.0)
        scale = tl.load(kv_scale_ptr + kv_rows * stride_scale, mask=kv_ok, other=0.0)
        if HEAD_MAJOR:
            logits = head_major_sum(tl.dot(kv, q_t), w, scale, BLOCK_KV, BLOCK_Q, H)
        else:
            logits = weighted_head_sum(tl.dot(kv, q_t), w, scale, BLOCK_KV, BLOCK_Q, H)
        if COMPRESSED:
            store_tile(out_base, logits, row_offs, kv_rows, ks, ke, row_ok[None, :] & kv_ok[:, None], max_seqlen_k,
                       CLEAN, COMPRESSED, True)
        elif (start >= in_lo) & (start + BLOCK_KV <= in_hi):  # inside every row's window: no window mask
            store_tile(out_base, logits, row_offs, kv_rows, ks, ke, row_ok[None, :], max_seqlen_k, CLEAN, COMPRESSED,
                       False)
        else:
            store_tile(out_base, logits, row_offs, kv_rows, ks, ke, row_ok[None, :] & kv_ok[:, None], max_seqlen_k,
                       CLEAN, COMPRESSED, True)

    if CLEAN:
        if COMPRESSED:
            if pid_split == 0:  # each row's tail [ke - ks, max_seqlen_k)
                length = tl.where(row_ok, tl.minimum(tl.maximum(ke - ks, 0), max_seqlen_k), max_seqlen_k)
                fill_neg_inf(out_base, row_offs, row_ok, length, tl.min(length, axis=0), max_seqlen_k, BLOCK_Q, 64)
        else:
            zero = tl.zeros((BLOCK_Q,), tl.int32)
            fill_neg_inf(out_base, row_offs, row_ok, zero, span_lo, tl.minimum(live_lo, N), BLOCK_Q, BLOCK_KV)
            fill_neg_inf(out_base, row_offs, row_ok, zero, live_hi, tl.minimum(span_hi, N), BLOCK_Q, BLOCK_KV)
