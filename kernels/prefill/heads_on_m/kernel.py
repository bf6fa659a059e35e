"""AMD prefill kernel (H 64 or 32, D 128): each query row's heads on the matrix core's M axis.

A workgroup holds BLOCK_Q query rows; the kv tile is the MMA's M, the rows' heads its N: scores [BLOCK_KV,
BLOCK_Q * H] = kv [BLOCK_KV, D] . q^T [D, BLOCK_Q * H]. Triton's AMD MFMA layout (transposed: lanes along M, a
lane's registers along N) deals the 32-column N tiles to the waves round-robin, so the columns are ordered (head
group, row, head in group) and wave r holds every head of query row r: relu, x weight and the sum over heads run in
that wave's registers (adds and one lane swap), with no shared-memory round trip and no barrier; each kv tile,
loaded once into LDS, serves the block's BLOCK_Q rows. Per tile: kv scales first, then the kv rows; the last tile's
rows past N read row N - 1 (an address clamp, not a masked load: no compare and select per address).

Loop bounds are uniform: they come from scalar loads of the block's windows, never from vector reductions, so
the loop counter and the tile addresses live in scalar registers. Like the h64d128 kernel: query blocks in a chosen
ORDER, -inf stored DEAD_MULT tiles at a time, 64-bit row bases; one tile loop (masked), not three.
"""
import triton
import triton.language as tl

from ...common.epilogue import INT32_MAX, fill_neg_inf, fma_chain, store_tile
from ...common.naming import make_kernel_repr
from ...common.prologue import ordered_program
from . import KEYS

HEAD_TILE = tl.constexpr(32)  # N of one 32 x 32 MFMA: the heads one wave's tile holds


@triton.jit
def _row_window(ks_ptr, ke_ptr, row, S, stride_ks, stride_ke):
    """(ks, ke) of one query row, as scalars; a row past S reads the last row's window (it changes no bound)."""
    r = tl.minimum(row, S - 1).to(tl.int64)
    return tl.load(ks_ptr + r * stride_ks), tl.load(ke_ptr + r * stride_ke)


@triton.jit
def _tile(kv_ptr, kv_scale_ptr, q_t, w, ks, ke, out_base, row_offs, row_ok, start, N, max_seqlen_k, stride_kv_n,
          stride_scale, D: tl.constexpr, H: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_KV: tl.constexpr,
          CLEAN: tl.constexpr, COMPRESSED: tl.constexpr, EVEN_S: tl.constexpr, MASKED: tl.constexpr):
    """One kv tile: logits [BLOCK_KV, BLOCK_Q] of the block's rows, stored."""
    offs = tl.arange(0, BLOCK_KV)
    kv_rows = start + offs
    dims = tl.arange(0, D)
    if MASKED:  # rows past N read row N - 1: their columns are past every window (-inf) or in the row padding
        offs = tl.minimum(offs, N - 1 - start)
    kv_ptrs = kv_ptr + tl.cast(start, tl.int64) * stride_kv_n + (offs * stride_kv_n)[:, None] + dims[None, :]
    scale = tl.load(kv_scale_ptr + (start + offs) * stride_scale)
    kv = tl.load(kv_ptrs)
    scores = tl.dot(kv, q_t)  # [BLOCK_KV, BLOCK_Q * H], columns in _columns' order
    logits = _head_sum(scores, w, BLOCK_KV, BLOCK_Q, H) * scale[:, None]  # [BLOCK_KV, BLOCK_Q]
    if COMPRESSED:
        store_tile(out_base, logits, row_offs, kv_rows, ks, ke, row_ok[None, :], max_seqlen_k, CLEAN, COMPRESSED,
                   MASKED)
    elif EVEN_S:
        store_tile(out_base, logits, row_offs, kv_rows, ks, ke, None, max_seqlen_k, CLEAN, COMPRESSED, MASKED)
    else:
        store_tile(out_base, logits, row_offs, kv_rows, ks, ke, row_ok[None, :], max_seqlen_k, CLEAN, COMPRESSED,
                   MASKED)


@triton.jit
def _head_sum(scores, w, BLOCK_KV: tl.constexpr, BLOCK_Q: tl.constexpr, H: tl.constexpr):
    """[BLOCK_KV, BLOCK_Q * H] scores (columns in _columns' order) -> [BLOCK_KV, BLOCK_Q]: relu, x weight, sum over
    each row's heads.

    relu is one max a value (NaN propagates, as torch.relu does). In the 32 x 32 MFMA accumulator a lane holds,
    of each 32-head group, heads 8 j + 4 (lane // 32) + i (j, i < 4); the other half of the group sits in lane
    l ^ 32. So the columns are regrouped [kv, row, lane half, (group, j, i)]: the last axis is one lane's registers
    and is summed as one FMA chain (fma_chain: a multiply, then FMAs), then the two lane halves are added (a lane
    swap)."""
    x = tl.maximum(scores, 0.0, propagate_nan=tl.PropagateNan.ALL)
    wb = tl.broadcast_to(w[None, :], (BLOCK_KV, BLOCK_Q * H))
    if H < HEAD_TILE:  # (fewer heads than a tile's N: the rows share tiles; a plain sum, off the fast path)
        return tl.sum(tl.reshape(x * wb, (BLOCK_KV, BLOCK_Q, H)), axis=2)
    G: tl.constexpr = H // HEAD_TILE
    # column (g, row, j, half, i) -> [kv, row, half, g, j, i]
    x = tl.reshape(tl.permute(tl.reshape(x, (BLOCK_KV, G, BLOCK_Q, 4, 2, 4)), (0, 2, 4, 1, 3, 5)),
                   (BLOCK_KV, BLOCK_Q, 2, H // 2))
    wb = tl.reshape(tl.permute(tl.reshape(wb, (BLOCK_KV, G, BLOCK_Q, 4, 2, 4)), (0, 2, 4, 1, 3, 5)),
                    (BLOCK_KV, BLOCK_Q, 2, H // 2))
    return tl.sum(fma_chain(0.0, x, wb, H // 2, True), axis=2)


@triton.jit
def _columns(BLOCK_Q: tl.constexpr, H: tl.constexpr):
    """(query row, head) of each MMA column n: tiles of HEAD_TILE heads, row-minor ((head group, row, head in group)),
    so that the MFMA layout, which deals N tiles to the waves round-robin, gives wave r every head of row r."""
    n = tl.arange(0, BLOCK_Q * H)
    if H < HEAD_TILE:
        return n // H, n % H
    return (n // HEAD_TILE) % BLOCK_Q, (n // (HEAD_TILE * BLOCK_Q)) * HEAD_TILE + n % HEAD_TILE


@triton.jit(repr=make_kernel_repr("mqa_logits_heads_on_m", KEYS))
def mqa_logits_heads_on_m(
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
    BLOCK_Q: tl.constexpr,  # query rows per workgroup (one per wave)
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

    # The block's span [lo, hi) from scalar loads: uniform loop bounds.
    lo = INT32_MAX
    hi = 0
    for i in tl.static_range(BLOCK_Q):
        a, b = _row_window(ks_ptr, ke_ptr, q0 + i, S, stride_ks, stride_ke)
        lo = tl.minimum(lo, a)
        hi = tl.maximum(hi, b)
    # The rows' own windows, for masks (rows past S: empty).
    ks = tl.load(ks_ptr + rows * stride_ks, mask=row_ok, other=INT32_MAX)
    ke = tl.load(ke_ptr + rows * stride_ke, mask=row_ok, other=0)

    out_base = out_ptr + tl.cast(q0, tl.int64) * stride_out_s
    row_offs = r * stride_out_s

    n_end = tl.cdiv(N, BLOCK_KV) * BLOCK_KV
    live_lo = (lo // BLOCK_KV) * BLOCK_KV
    live_hi = tl.maximum(tl.minimum(tl.cdiv(hi, BLOCK_KV) * BLOCK_KV, n_end), live_lo)

    # -inf first: its addresses die before the tile loops start (the columns are disjoint from the tiles').
    if CLEAN:
        if COMPRESSED:  # each row's tail [ke - ks, max_seqlen_k)
            length = tl.where(row_ok, tl.minimum(tl.maximum(ke - ks, 0), max_seqlen_k), max_seqlen_k)
            fill_neg_inf(out_base, row_offs, row_ok, length, tl.min(length, axis=0), max_seqlen_k, BLOCK_Q, 64)
        else:
            zero = tl.zeros((BLOCK_Q,), tl.int32)
            fill_neg_inf(out_base, row_offs, row_ok, zero, 0, live_lo, BLOCK_Q, BLOCK_KV * DEAD_MULT)
            fill_neg_inf(out_base, row_offs, row_ok, zero, live_hi, n_end, BLOCK_Q, BLOCK_KV * DEAD_MULT)

    # q^T [D, BLOCK_Q * H] and weights [BLOCK_Q * H], columns (row, head) in _columns' order
    c_row, c_head = _columns(BLOCK_Q, H)
    dims = tl.arange(0, D)
    q_base = q_ptr + tl.cast(q0, tl.int64) * stride_q_s
    w_base = w_ptr + tl.cast(q0, tl.int64) * stride_w_s
    q_ptrs = q_base + (c_row * stride_q_s + c_head * stride_q_h)[None, :] + dims[:, None]
    w_ptrs = w_base + c_row * stride_w_s + c_head * stride_w_h
    if EVEN_S:
        q_t = tl.load(q_ptrs)
        w = tl.load(w_ptrs)
    else:
        c_ok = q0 + c_row < S
        q_t = tl.load(q_ptrs, mask=c_ok[None, :], other=0.0)
        w = tl.load(w_ptrs, mask=c_ok, other=0.0)

    # One loop over the live tiles, masked (a compare and a select a value)
    for start in range(live_lo, live_hi, BLOCK_KV):
        _tile(kv_ptr, kv_scale_ptr, q_t, w, ks, ke, out_base, row_offs, row_ok, start, N, max_seqlen_k, stride_kv_n,
              stride_scale, D, H, BLOCK_Q, BLOCK_KV, CLEAN, COMPRESSED, EVEN_S, True)
