"""Specialised prefill kernel for the common DeepSeek shape (H = 64 or 32, D = 128).

Differs from the portable kernel where it pays on long rows:
- query blocks run in a chosen ORDER: 0 forward, 1 last-first (in causal and compressed layouts later
  rows see more kv, so the heaviest blocks start first and the grid's tail is short), 2 zigzag
  (alternately from both ends, so write-heavy and compute-heavy blocks are resident together);
- dead tiles (-inf) are stored DEAD_MULT kv tiles at a time: fewer, wider stores;
- the kv loop is split into head / interior / tail: interior tiles lie inside every row's window of the
  block and inside N, so they load, compute and store with no window masks;
- the logits row stride is padded to a multiple of BLOCK_KV, so full-form stores need no column masks,
  and row masks exist only when S is not a multiple of BLOCK_Q (EVEN_S).
Row bases are 64-bit.
"""
import triton
import triton.language as tl

from ...common.epilogue import INT32_MAX, fill_neg_inf, store_tile, weighted_head_sum
from ...common.naming import make_kernel_repr
from ...common.prologue import block_queries, block_windows, ordered_program
from . import KEYS


@triton.jit
def _tile(kv_ptr, kv_scale_ptr, q_t, w, ks, ke, out_base, row_offs, row_ok, start, N, max_seqlen_k, stride_kv_n,
          stride_scale,
          D: tl.constexpr, H: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_KV: tl.constexpr, CLEAN: tl.constexpr,
          COMPRESSED: tl.constexpr, EVEN_S: tl.constexpr, MASKED: tl.constexpr):
    offs = tl.arange(0, BLOCK_KV)
    kv_rows = start + offs
    dims = tl.arange(0, D)
    kv_ptrs = kv_ptr + tl.cast(start, tl.int64) * stride_kv_n + (offs * stride_kv_n)[:, None] + dims[None, :]
    if MASKED:
        kv_ok = kv_rows < N
        kv = tl.load(kv_ptrs, mask=kv_ok[:, None], other=0.0)
        scale = tl.load(kv_scale_ptr + kv_rows * stride_scale, mask=kv_ok, other=0.0)
    else:
        kv = tl.load(kv_ptrs)
        scale = tl.load(kv_scale_ptr + kv_rows * stride_scale)
    logits = weighted_head_sum(tl.dot(kv, q_t), w, scale, BLOCK_KV, BLOCK_Q, H)
    if COMPRESSED:
        store_tile(out_base, logits, row_offs, kv_rows, ks, ke, row_ok[None, :], max_seqlen_k, CLEAN, COMPRESSED, MASKED)
    elif EVEN_S:
        store_tile(out_base, logits, row_offs, kv_rows, ks, ke, None, max_seqlen_k, CLEAN, COMPRESSED, MASKED)
    else:
        store_tile(out_base, logits, row_offs, kv_rows, ks, ke, row_ok[None, :], max_seqlen_k, CLEAN, COMPRESSED, MASKED)


@triton.jit(repr=make_kernel_repr("mqa_logits_h64d128", KEYS))
def mqa_logits_h64d128(
    q_ptr,  # fp8 e4m3 [S, H, D], dim contiguous
    kv_ptr,  # fp8 e4m3 [N, D], dim contiguous
    kv_scale_ptr,  # fp32 [N] (any stride)
    w_ptr,  # fp32 [S, H]
    ks_ptr,  # int32 [S] (any stride)
    ke_ptr,  # int32 [S] (any stride)
    out_ptr,  # fp32 or bf16 [S, stride_out_s]; full form: stride_out_s a multiple of BLOCK_KV
    S,
    N,
    max_seqlen_k,  # COMPRESSED: output columns per row
    stride_q_s, stride_q_h, stride_kv_n, stride_scale, stride_w_s, stride_w_h, stride_ks, stride_ke, stride_out_s,
    H: tl.constexpr,
    D: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_KV: tl.constexpr,
    CLEAN: tl.constexpr,
    COMPRESSED: tl.constexpr,
    BF16: tl.constexpr,
    EVEN_S: tl.constexpr,
    ORDER: tl.constexpr,  # 0 forward, 1 last-first, 2 zigzag
    DEAD_MULT: tl.constexpr,  # kv tiles per -inf store
):
    q0 = ordered_program(ORDER) * BLOCK_Q
    r = tl.arange(0, BLOCK_Q)
    rows = q0 + r
    row_ok = rows < S
    ks, ke, lo, hi = block_windows(ks_ptr, ke_ptr, rows, row_ok, stride_ks, stride_ke)
    # Interior: inside every row's window (rows past S do not constrain it).
    in_lo = tl.max(tl.where(row_ok, ks, 0), axis=0)
    in_hi = tl.min(tl.where(row_ok, ke, INT32_MAX), axis=0)

    q_t, w = block_queries(q_ptr, w_ptr, q0, S, stride_q_s, stride_q_h, stride_w_s, stride_w_h, BLOCK_Q, H, D,
                           not EVEN_S)
    out_base = out_ptr + tl.cast(q0, tl.int64) * stride_out_s
    row_offs = r * stride_out_s

    n_end = tl.cdiv(N, BLOCK_KV) * BLOCK_KV
    live_lo = (lo // BLOCK_KV) * BLOCK_KV
    live_hi = tl.maximum(tl.minimum(tl.cdiv(hi, BLOCK_KV) * BLOCK_KV, n_end), live_lo)
    # Interior tiles: [full_lo, full_hi), whole tiles inside [in_lo, in_hi) and inside N.
    full_lo = tl.minimum(tl.maximum(tl.cdiv(in_lo, BLOCK_KV) * BLOCK_KV, live_lo), live_hi)
    full_hi = tl.maximum(tl.minimum((tl.minimum(in_hi, N) // BLOCK_KV) * BLOCK_KV, live_hi), full_lo)

    for start in range(live_lo, full_lo, BLOCK_KV):
        _tile(kv_ptr, kv_scale_ptr, q_t, w, ks, ke, out_base, row_offs, row_ok, start, N, max_seqlen_k, stride_kv_n,
              stride_scale, D, H, BLOCK_Q, BLOCK_KV, CLEAN, COMPRESSED, EVEN_S, True)
    for start in range(full_lo, full_hi, BLOCK_KV):
        _tile(kv_ptr, kv_scale_ptr, q_t, w, ks, ke, out_base, row_offs, row_ok, start, N, max_seqlen_k, stride_kv_n,
              stride_scale, D, H, BLOCK_Q, BLOCK_KV, CLEAN, COMPRESSED, EVEN_S, False)
    for start in range(full_hi, live_hi, BLOCK_KV):
        _tile(kv_ptr, kv_scale_ptr, q_t, w, ks, ke, out_base, row_offs, row_ok, start, N, max_seqlen_k, stride_kv_n,
              stride_scale, D, H, BLOCK_Q, BLOCK_KV, CLEAN, COMPRESSED, EVEN_S, True)

    if CLEAN:
        if COMPRESSED:  # each row's tail [ke - ks, max_seqlen_k)
            length = tl.where(row_ok, tl.minimum(tl.maximum(ke - ks, 0), max_seqlen_k), max_seqlen_k)
            fill_neg_inf(out_base, row_offs, row_ok, length, tl.min(length, axis=0), max_seqlen_k, BLOCK_Q, 64)
        else:
            zero = tl.zeros((BLOCK_Q,), tl.int32)
            fill_neg_inf(out_base, row_offs, row_ok, zero, 0, live_lo, BLOCK_Q, BLOCK_KV * DEAD_MULT)
            fill_neg_inf(out_base, row_offs, row_ok, zero, live_hi, n_end, BLOCK_Q, BLOCK_KV * DEAD_MULT)
