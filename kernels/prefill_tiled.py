"""Portable prefill kernel: fp8 MQA logits on any Triton target (and the interpreter).

Layout (the one that wins on tensor cores): a kv tile is the MMA's M operand and
BLOCK_Q query rows x H heads form N, so one dot gives [BLOCK_KV, BLOCK_Q*H] scores whose
head reduction stays inside the tile. relu, x weight, sum over heads, then x kv_scale.
Only kv tiles inside [min ks, max ke) of the query block are computed; with CLEAN the
rest of the block's rows (within this program's kv split) are written as -inf.
"""
import triton
import triton.language as tl

from .naming import make_kernel_repr

CONFIG_KEYS = ("H", "D", "BLOCK_Q", "BLOCK_KV", "CLEAN")


@triton.jit(repr=make_kernel_repr("mqa_logits_tiled", CONFIG_KEYS))
def mqa_logits_tiled(
    q_ptr,  # fp8 e4m3 [S, H, D], head and dim contiguous
    kv_ptr,  # fp8 e4m3 [N, D], dim contiguous
    kv_scale_ptr,  # fp32 [N]
    w_ptr,  # fp32 [S, H], head contiguous
    ks_ptr,  # int32 [S]: first live kv row of each query row
    ke_ptr,  # int32 [S]: one past the last live kv row
    out_ptr,  # fp32 [S, stride_out_s] (row stride padded; the caller views [:, :N])
    S,
    N,
    stride_q_s,
    stride_kv_n,
    stride_w_s,
    stride_out_s,
    tiles_per_split,  # kv tiles each program of grid axis 1 covers
    H: tl.constexpr,
    D: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_KV: tl.constexpr,
    CLEAN: tl.constexpr,
):
    pid_q = tl.program_id(0)
    pid_split = tl.program_id(1)
    q0 = pid_q * BLOCK_Q

    rows = q0 + tl.arange(0, BLOCK_Q)
    row_ok = rows < S
    ks = tl.load(ks_ptr + rows, mask=row_ok, other=2147483647)
    ke = tl.load(ke_ptr + rows, mask=row_ok, other=0)
    lo = tl.min(ks, axis=0)
    hi = tl.max(ke, axis=0)

    # q^T as [D, BLOCK_Q*H]: column c is (query row c // H, head c % H).
    cols = tl.arange(0, BLOCK_Q * H)
    c_row = q0 + cols // H
    c_head = cols % H
    c_ok = c_row < S
    dims = tl.arange(0, D)
    q_t = tl.load(q_ptr + c_row[None, :] * stride_q_s + c_head[None, :] * D + dims[:, None],
                  mask=c_ok[None, :], other=0.0)
    w = tl.load(w_ptr + c_row * stride_w_s + c_head, mask=c_ok, other=0.0)

    # This program's kv span, in whole tiles.
    n_tiles = tl.cdiv(N, BLOCK_KV)
    t_begin = pid_split * tiles_per_split
    t_end = tl.minimum(t_begin + tiles_per_split, n_tiles)
    span_lo = t_begin * BLOCK_KV
    span_hi = t_end * BLOCK_KV
    live_lo = tl.minimum(tl.maximum((lo // BLOCK_KV) * BLOCK_KV, span_lo), span_hi)
    live_hi = tl.maximum(tl.minimum(tl.cdiv(hi, BLOCK_KV) * BLOCK_KV, span_hi), live_lo)

    offs = tl.arange(0, BLOCK_KV)
    for start in range(live_lo, live_hi, BLOCK_KV):
        kv_rows = start + offs
        kv_ok = kv_rows < N
        kv = tl.load(kv_ptr + kv_rows[:, None] * stride_kv_n + dims[None, :], mask=kv_ok[:, None], other=0.0)
        scores = tl.dot(kv, q_t)  # [BLOCK_KV, BLOCK_Q*H] fp32
        scores = tl.maximum(scores, 0.0) * w[None, :]
        logits = tl.sum(tl.reshape(scores, (BLOCK_KV, BLOCK_Q, H)), axis=2)  # [BLOCK_KV, BLOCK_Q]
        scale = tl.load(kv_scale_ptr + kv_rows, mask=kv_ok, other=0.0)
        logits = logits * scale[:, None]
        if CLEAN:
            live = (kv_rows[:, None] >= ks[None, :]) & (kv_rows[:, None] < ke[None, :])
            logits = tl.where(live, logits, float("-inf"))
        tl.store(out_ptr + rows[None, :] * stride_out_s + kv_rows[:, None], logits,
                 mask=row_ok[None, :] & kv_ok[:, None])

    if CLEAN:
        dead = tl.full((BLOCK_KV, BLOCK_Q), float("-inf"), tl.float32)
        for start in range(span_lo, live_lo, BLOCK_KV):
            kv_rows = start + offs
            tl.store(out_ptr + rows[None, :] * stride_out_s + kv_rows[:, None], dead,
                     mask=row_ok[None, :] & (kv_rows < N)[:, None])
        for start in range(live_hi, span_hi, BLOCK_KV):
            kv_rows = start + offs
            tl.store(out_ptr + rows[None, :] * stride_out_s + kv_rows[:, None], dead,
                     mask=row_ok[None, :] & (kv_rows < N)[:, None])
