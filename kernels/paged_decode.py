"""Paged decode kernel: fp8 MQA logits of next_n draft rows against a paged fp8 kv cache.

Grid (batch, context splits): program (b, s) covers kv tiles [s*tiles_per_split, ...) of
sequence b, so a batch of 1 still fills the device. Each kv tile (BLOCK_KV tokens gathered
through the block table, 16-byte loads along D) is loaded once and multiplied with all next_n
draft rows x H heads folded into the MMA's N axis (ROWS rows per dot, CHUNKS dots), as the
prefill kernel folds BLOCK_Q x H. relu, x weight, sum over heads, x kv scale. With CLEAN,
entries past each row's end (and tiles past the sequence's context, up to max_context_len)
are written as -inf in the same kernel; without it, tiles past the context are not touched.

Cache layout (DeepGEMM's): block i holds BS*D fp8 bytes (token-major) followed by BS fp32
scales; kv_ptr and scale_ptr are fp8 and fp32 views of the same bytes.
Row (b, t) ends at context_lens[b] - NEXT_N + t + 1 (1-D context_lens: causal draft rows,
ctx_causal = 1, stride_ctx_t = 0) or at context_lens[b, t] (2-D: ctx_causal = 0).
"""
import triton
import triton.language as tl

from .naming import make_kernel_repr

CONFIG_KEYS = ("NEXT_N", "H", "D", "BS", "BLOCK_KV", "ROWS", "CHUNKS", "CLEAN")


@triton.jit
def _chunk_inputs(q_ptr, w_ptr, ctx_ptr, b, stride_ctx_b, stride_ctx_t, ctx_causal,
                  C0: tl.constexpr, NEXT_N: tl.constexpr, H: tl.constexpr, D: tl.constexpr, ROWS: tl.constexpr):
    """q^T [D, ROWS*H], weights [ROWS*H] and row ends [ROWS] of draft rows C0 .. C0+ROWS-1 of sequence b."""
    t = C0 + tl.arange(0, ROWS)
    t_ok = t < NEXT_N
    ends = tl.load(ctx_ptr + b * stride_ctx_b + t * stride_ctx_t, mask=t_ok, other=0)
    ends = tl.where(t_ok, tl.maximum(ends + ctx_causal * (t - NEXT_N + 1), 0), 0)
    # Column c of the dot is (draft row C0 + c // H, head c % H).
    cols = tl.arange(0, ROWS * H)
    c_t = C0 + cols // H
    c_ok = c_t < NEXT_N
    c_row = (b * NEXT_N + c_t).to(tl.int64)
    dims = tl.arange(0, D)
    q_t = tl.load(q_ptr + (c_row * (H * D) + (cols % H) * D)[None, :] + dims[:, None], mask=c_ok[None, :],
                  other=0.0)
    w = tl.load(w_ptr + c_row * H + cols % H, mask=c_ok, other=0.0)
    return q_t, w, ends


@triton.jit
def _chunk_store(kv, scale, q_t, w, ends, out_ptr, b, k, stride_out, max_context_len,
                 C0: tl.constexpr, NEXT_N: tl.constexpr, H: tl.constexpr, ROWS: tl.constexpr,
                 BLOCK_KV: tl.constexpr, CLEAN: tl.constexpr):
    """Logits of one kv tile for ROWS draft rows: one dot, relu, x weight, head sum, x scale, store."""
    scores = tl.dot(kv, q_t)  # [BLOCK_KV, ROWS*H] fp32
    scores = tl.maximum(scores, 0.0) * w[None, :]
    logits = tl.sum(tl.reshape(scores, (BLOCK_KV, ROWS, H)), axis=2) * scale[:, None]  # [BLOCK_KV, ROWS]
    t = C0 + tl.arange(0, ROWS)
    if CLEAN:
        logits = tl.where(k[:, None] < ends[None, :], logits, float("-inf"))
    rows = (b * NEXT_N + t).to(tl.int64)
    tl.store(out_ptr + rows[None, :] * stride_out + k[:, None], logits,
             mask=(t < NEXT_N)[None, :] & (k < max_context_len)[:, None])


@triton.jit
def _chunk_dead(out_ptr, b, k, stride_out, max_context_len,
                C0: tl.constexpr, NEXT_N: tl.constexpr, ROWS: tl.constexpr, BLOCK_KV: tl.constexpr):
    t = C0 + tl.arange(0, ROWS)
    rows = (b * NEXT_N + t).to(tl.int64)
    tl.store(out_ptr + rows[None, :] * stride_out + k[:, None],
             tl.full((BLOCK_KV, ROWS), float("-inf"), tl.float32),
             mask=(t < NEXT_N)[None, :] & (k < max_context_len)[:, None])


@triton.jit(repr=make_kernel_repr("paged_mqa_logits", CONFIG_KEYS))
def paged_mqa_logits(
    q_ptr,  # fp8 e4m3 [B, NEXT_N, H, D], contiguous
    kv_ptr,  # fp8 e4m3 view of the cache bytes: block i at i*stride_kv_block, BS*D fp8 (token-major, D contiguous)
    scale_ptr,  # fp32 view of the same bytes: block i's BS scales at i*stride_scale_block + BS*D/4
    w_ptr,  # fp32 [B*NEXT_N, H], contiguous
    ctx_ptr,  # int32 [B] (ctx_causal = 1) or [B, NEXT_N] (ctx_causal = 0)
    table_ptr,  # int32 [B, max_blocks]: cache block of each sequence's BS-token page
    out_ptr,  # fp32 [B*NEXT_N, stride_out] (row stride padded; the caller views [:, :max_context_len])
    max_context_len,
    stride_kv_block,  # fp8 elements (= bytes) between cache blocks
    stride_scale_block,  # fp32 elements between cache blocks (stride_kv_block / 4)
    stride_table_b,
    stride_ctx_b,
    stride_ctx_t,  # 0 for 1-D context_lens
    ctx_causal,  # 1: row t ends at ctx - NEXT_N + t + 1; 0: at ctx[b, t]
    stride_out,
    tiles_per_split,  # kv tiles each program of grid axis 1 covers
    NEXT_N: tl.constexpr,
    H: tl.constexpr,
    D: tl.constexpr,
    BS: tl.constexpr,  # tokens per cache block (16, 32, 64)
    BLOCK_KV: tl.constexpr,  # tokens per kv tile, a multiple of BS
    ROWS: tl.constexpr,  # draft rows per dot (ROWS * H = the MMA's N)
    CHUNKS: tl.constexpr,  # dots per kv tile (1 or 2): ROWS * CHUNKS >= NEXT_N
    CLEAN: tl.constexpr,
):
    b = tl.program_id(0)
    pid_split = tl.program_id(1)

    q0, w0, ends0 = _chunk_inputs(q_ptr, w_ptr, ctx_ptr, b, stride_ctx_b, stride_ctx_t, ctx_causal,
                                  0, NEXT_N, H, D, ROWS)
    hi = tl.max(ends0, axis=0)  # tokens of sequence b any of its rows sees
    if CHUNKS == 2:
        q1, w1, ends1 = _chunk_inputs(q_ptr, w_ptr, ctx_ptr, b, stride_ctx_b, stride_ctx_t, ctx_causal,
                                      ROWS, NEXT_N, H, D, ROWS)
        hi = tl.maximum(hi, tl.max(ends1, axis=0))

    # This program's span of kv tiles, and its live part [span_lo, live_hi).
    span_lo = pid_split * tiles_per_split * BLOCK_KV
    span_hi = tl.minimum(span_lo + tiles_per_split * BLOCK_KV, tl.cdiv(max_context_len, BLOCK_KV) * BLOCK_KV)
    live_hi = tl.maximum(tl.minimum(tl.cdiv(hi, BLOCK_KV) * BLOCK_KV, span_hi), span_lo)

    offs = tl.arange(0, BLOCK_KV)
    dims = tl.arange(0, D)
    table_row = table_ptr + b.to(tl.int64) * stride_table_b
    for start in range(span_lo, live_hi, BLOCK_KV):
        k = start + offs
        k_ok = k < hi
        block = tl.load(table_row + k // BS, mask=k_ok, other=0).to(tl.int64)
        slot = k % BS
        kv = tl.load(kv_ptr + (block * stride_kv_block + slot * D)[:, None] + dims[None, :], mask=k_ok[:, None],
                     other=0.0)
        scale = tl.load(scale_ptr + block * stride_scale_block + (BS * D // 4) + slot, mask=k_ok, other=0.0)
        _chunk_store(kv, scale, q0, w0, ends0, out_ptr, b, k, stride_out, max_context_len,
                     0, NEXT_N, H, ROWS, BLOCK_KV, CLEAN)
        if CHUNKS == 2:
            _chunk_store(kv, scale, q1, w1, ends1, out_ptr, b, k, stride_out, max_context_len,
                         ROWS, NEXT_N, H, ROWS, BLOCK_KV, CLEAN)

    if CLEAN:
        for start in range(live_hi, span_hi, BLOCK_KV):
            k = start + offs
            _chunk_dead(out_ptr, b, k, stride_out, max_context_len, 0, NEXT_N, ROWS, BLOCK_KV)
            if CHUNKS == 2:
                _chunk_dead(out_ptr, b, k, stride_out, max_context_len, ROWS, NEXT_N, ROWS, BLOCK_KV)
