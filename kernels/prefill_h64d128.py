"""Specialised prefill kernel for the common DeepSeek shape (H = 64, D = 128; any H*D that fits works).

Differs from the portable kernel where it pays on long rows:
- query blocks run in a chosen ORDER: 0 forward, 1 last-first (in causal and compressed layouts
  later rows see more kv, so the heaviest blocks start first and the grid's tail is short), 2 zigzag
  (alternately from both ends, so write-heavy and compute-heavy blocks are resident together);
- dead tiles (-inf) are stored DEAD_MULT kv tiles at a time: fewer, wider stores;
- the kv loop is split into head / interior / tail: interior tiles lie inside every row's window
  of the block and inside N, so they load, compute and store with no masks at all;
- the logits row stride is padded to a multiple of BLOCK_KV, so stores never need column masks,
  and row masks exist only when S is not a multiple of BLOCK_Q (EVEN_S).
"""
import triton
import triton.language as tl

from .naming import make_kernel_repr

CONFIG_KEYS = ("H", "D", "BLOCK_Q", "BLOCK_KV", "CLEAN", "EVEN_S", "ORDER", "DEAD_MULT")


@triton.jit
def _tile(kv_ptr, kv_scale_ptr, q_t, w, ks, ke, out_ptr, rows, row_ok, start, N, stride_kv_n, stride_out_s,
          D: tl.constexpr, H: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_KV: tl.constexpr,
          CLEAN: tl.constexpr, EVEN_S: tl.constexpr, MASKED: tl.constexpr):
    kv_rows = start + tl.arange(0, BLOCK_KV)
    dims = tl.arange(0, D)
    if MASKED:
        kv_ok = kv_rows < N
        kv = tl.load(kv_ptr + kv_rows[:, None] * stride_kv_n + dims[None, :], mask=kv_ok[:, None], other=0.0)
        scale = tl.load(kv_scale_ptr + kv_rows, mask=kv_ok, other=0.0)
    else:
        kv = tl.load(kv_ptr + kv_rows[:, None] * stride_kv_n + dims[None, :])
        scale = tl.load(kv_scale_ptr + kv_rows)
    scores = tl.dot(kv, q_t)  # [BLOCK_KV, BLOCK_Q*H] fp32
    scores = tl.maximum(scores, 0.0) * w[None, :]
    logits = tl.sum(tl.reshape(scores, (BLOCK_KV, BLOCK_Q, H)), axis=2) * scale[:, None]
    if MASKED and CLEAN:
        live = (kv_rows[:, None] >= ks[None, :]) & (kv_rows[:, None] < ke[None, :])
        logits = tl.where(live, logits, float("-inf"))
    ptrs = out_ptr + rows[None, :] * stride_out_s + kv_rows[:, None]
    if EVEN_S:
        tl.store(ptrs, logits)
    else:
        tl.store(ptrs, logits, mask=row_ok[None, :])


@triton.jit(repr=make_kernel_repr("mqa_logits_h64d128", CONFIG_KEYS))
def mqa_logits_h64d128(
    q_ptr,  # fp8 e4m3 [S, H, D], head and dim contiguous
    kv_ptr,  # fp8 e4m3 [N, D], dim contiguous
    kv_scale_ptr,  # fp32 [N]
    w_ptr,  # fp32 [S, H], head contiguous
    ks_ptr,  # int32 [S]
    ke_ptr,  # int32 [S]
    out_ptr,  # fp32 [S, stride_out_s], stride_out_s a multiple of BLOCK_KV
    S,
    N,
    stride_q_s,
    stride_kv_n,
    stride_w_s,
    stride_out_s,
    H: tl.constexpr,
    D: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_KV: tl.constexpr,
    CLEAN: tl.constexpr,
    EVEN_S: tl.constexpr,
    ORDER: tl.constexpr,  # 0 forward, 1 last-first, 2 zigzag
    DEAD_MULT: tl.constexpr,  # kv tiles per -inf store
):
    pid = tl.program_id(0)
    last = tl.num_programs(0) - 1
    if ORDER == 1:
        pid = last - pid
    elif ORDER == 2:
        pid = tl.where(pid % 2 == 0, last - pid // 2, pid // 2)
    q0 = pid * BLOCK_Q
    rows = q0 + tl.arange(0, BLOCK_Q)
    row_ok = rows < S
    ks = tl.load(ks_ptr + rows, mask=row_ok, other=2147483647)
    ke = tl.load(ke_ptr + rows, mask=row_ok, other=0)
    lo = tl.min(ks, axis=0)
    hi = tl.max(ke, axis=0)
    # Interior: inside every row's window (rows past S do not constrain it).
    in_lo = tl.max(tl.where(row_ok, ks, 0), axis=0)
    in_hi = tl.min(tl.where(row_ok, ke, 2147483647), axis=0)

    cols = tl.arange(0, BLOCK_Q * H)
    c_row = q0 + cols // H
    c_head = cols % H
    dims = tl.arange(0, D)
    if EVEN_S:
        q_t = tl.load(q_ptr + c_row[None, :] * stride_q_s + c_head[None, :] * D + dims[:, None])
        w = tl.load(w_ptr + c_row * stride_w_s + c_head)
    else:
        c_ok = c_row < S
        q_t = tl.load(q_ptr + c_row[None, :] * stride_q_s + c_head[None, :] * D + dims[:, None],
                      mask=c_ok[None, :], other=0.0)
        w = tl.load(w_ptr + c_row * stride_w_s + c_head, mask=c_ok, other=0.0)

    n_end = tl.cdiv(N, BLOCK_KV) * BLOCK_KV
    live_lo = (lo // BLOCK_KV) * BLOCK_KV
    live_hi = tl.maximum(tl.minimum(tl.cdiv(hi, BLOCK_KV) * BLOCK_KV, n_end), live_lo)
    # Interior tiles: [full_lo, full_hi), whole tiles inside [in_lo, in_hi) and inside N.
    full_lo = tl.minimum(tl.maximum(tl.cdiv(in_lo, BLOCK_KV) * BLOCK_KV, live_lo), live_hi)
    full_hi = tl.maximum(tl.minimum((tl.minimum(in_hi, N) // BLOCK_KV) * BLOCK_KV, live_hi), full_lo)

    for start in range(live_lo, full_lo, BLOCK_KV):
        _tile(kv_ptr, kv_scale_ptr, q_t, w, ks, ke, out_ptr, rows, row_ok, start, N, stride_kv_n, stride_out_s,
              D, H, BLOCK_Q, BLOCK_KV, CLEAN, EVEN_S, True)
    for start in range(full_lo, full_hi, BLOCK_KV):
        _tile(kv_ptr, kv_scale_ptr, q_t, w, ks, ke, out_ptr, rows, row_ok, start, N, stride_kv_n, stride_out_s,
              D, H, BLOCK_Q, BLOCK_KV, CLEAN, EVEN_S, False)
    for start in range(full_hi, live_hi, BLOCK_KV):
        _tile(kv_ptr, kv_scale_ptr, q_t, w, ks, ke, out_ptr, rows, row_ok, start, N, stride_kv_n, stride_out_s,
              D, H, BLOCK_Q, BLOCK_KV, CLEAN, EVEN_S, True)

    if CLEAN:
        _fill_dead(out_ptr, rows, row_ok, 0, live_lo, stride_out_s, BLOCK_Q, BLOCK_KV * DEAD_MULT)
        _fill_dead(out_ptr, rows, row_ok, live_hi, n_end, stride_out_s, BLOCK_Q, BLOCK_KV * DEAD_MULT)


@triton.jit
def _fill_dead(out_ptr, rows, row_ok, lo, hi, stride_out_s, BLOCK_Q: tl.constexpr, WIDTH: tl.constexpr):
    """-inf over columns [lo, hi) of the block's rows, WIDTH columns per store."""
    dead = tl.full((BLOCK_Q, WIDTH), float("-inf"), tl.float32)
    offs = tl.arange(0, WIDTH)
    for start in range(lo, hi, WIDTH):
        cols = start + offs
        tl.store(out_ptr + rows[:, None] * stride_out_s + cols[None, :], dead,
                 mask=row_ok[:, None] & (cols < hi)[None, :])
