"""Paged decode kernel: fp8 MQA logits of next_n draft rows against a paged fp8 kv cache.

Persistent grid of P * SUBS programs. Program pid serves schedule range p = pid % P: from entry p
(sequence, cache block) of the metadata up to entry p + 1, as sub-program j = pid // P of SUBS (tiles
j, j + SUBS, ... of each sequence segment). The metadata splits the cache blocks of all sequences
evenly, so every program streams about the same number of bytes whatever the context lengths.

Per sequence: q^T [D, ROWS*H] and weights are loaded once; each kv tile (BLOCK_KV tokens gathered
through the block table, 16-byte loads along D) feeds one dot per ROWS draft rows (kv = M, rows x
heads = N), then relu, x weight, head sum, x kv scale, and the [BLOCK_KV, ROWS] logits are stored.

Cache layout (DeepGEMM's): block i starts at byte i * stride_kv_block and holds BS*D fp8 bytes
(token-major) followed by BS fp32 scales; the scale pointer is the byte pointer bitcast to fp32.
KV_SHUFFLED: the BS*D fp8 bytes in aiter's pre-shuffled order instead (aiter.ops.shuffle.shuffle_weight with
its (16, 16) layout on the [BS, D] rows: byte (token s, dim d) at (s // 16) * 16 * D + (d // 16) * 256 +
(s % 16) * 16 + d % 16; BS a multiple of 16), read in place; the scales as before.
Row (b, t) ends at ctx[b] - NEXT_N + t + 1 (1-D context lens: ctx_causal = 1, stride_ctx_t = 0)
or at ctx[b, t] (2-D: ctx_causal = 0). Tokens at or past the sequence's largest row end (clamped to
max_context_len) are never read. With CLEAN, row entries in [end, largest end) are written -inf by
the tile, and [largest end, max_context_len) by a fill spread over all programs in FILL pieces.

No metadata makes it fault or loop without end: a given schedule's entries are clamped before use (entry 0
read as (0, 0), entry P as (batch, 0), sequences into [0, batch], blocks into [0, cdiv(max_context_len, BS)]),
so any schedule's ranges still cover every token (each logit is computed whole by one program: a foreign or
stale schedule costs balance, never a wrong or missing logit); block ids are clamped into [0, num_blocks), so a
bad id reads some block of the cache, never memory outside it, and a context past what its block-table row
covers reads id 0 there, not past the row.
"""
import triton
import triton.language as tl

from ...common.epilogue import weighted_head_sum
from ...common.naming import make_kernel_repr
from . import KEYS


@triton.jit
def _row_ends(ctx_ptr, b, stride_ctx_b, stride_ctx_t, ctx_causal, t, NEXT_N: tl.constexpr):
    """Row ends of draft rows t (a vector; rows >= NEXT_N get 0) of sequence b."""
    ok = t < NEXT_N
    e = tl.load(ctx_ptr + tl.cast(b, tl.int64) * stride_ctx_b + t * stride_ctx_t, mask=ok, other=0)
    e = e + ctx_causal * (t - NEXT_N + 1)
    return tl.where(ok, tl.maximum(e, 0), 0)


@triton.jit
def _seq_hi(ctx_ptr, b, stride_ctx_b, stride_ctx_t, ctx_causal, max_context_len,
            NEXT_N: tl.constexpr, NP: tl.constexpr):
    """Tokens of sequence b that any of its rows sees, clamped to max_context_len."""
    ends = _row_ends(ctx_ptr, b, stride_ctx_b, stride_ctx_t, ctx_causal, tl.arange(0, NP), NEXT_N)
    return tl.minimum(tl.max(ends, axis=0), max_context_len)


@triton.jit
def _chunk_inputs(q_ptr, w_ptr, b, stride_q_b, stride_q_t, stride_q_h, stride_w,
                  C0: tl.constexpr, NEXT_N: tl.constexpr, H: tl.constexpr, D: tl.constexpr, ROWS: tl.constexpr):
    """q^T [D, ROWS*H] and weights [ROWS*H] of draft rows C0 .. C0+ROWS-1; column c = (row C0 + c // H, head c % H)."""
    cols = tl.arange(0, ROWS * H)
    t = C0 + cols // H
    h = cols % H
    ok = t < NEXT_N
    b64 = tl.cast(b, tl.int64)
    dims = tl.arange(0, D)
    q_off = b64 * stride_q_b + t * stride_q_t + h * stride_q_h
    q_t = tl.load(q_ptr + q_off[None, :] + dims[:, None], mask=ok[None, :], other=0.0)
    w = tl.load(w_ptr + (b64 * NEXT_N + t) * stride_w + h, mask=ok, other=0.0)
    return q_t, w


@triton.jit
def _tile_blocks(table_row, start, seg_hi, num_blocks, table_cols, BS: tl.constexpr, BLOCK_KV: tl.constexpr):
    """Cache block ids (int64) of the tile's tokens [start, start + BLOCK_KV), clamped into [0, num_blocks); 0
    past seg_hi and past the row's table_cols entries."""
    k = start + tl.arange(0, BLOCK_KV)
    col = k // BS
    blk = tl.load(table_row + col, mask=(k < seg_hi) & (col < table_cols), other=0)
    return tl.minimum(tl.maximum(blk, 0), num_blocks - 1).to(tl.int64)


@triton.jit
def _tile_kv(kv_ptr, blk, start, seg_hi, stride_kv_block, BS: tl.constexpr, D: tl.constexpr,
             BLOCK_KV: tl.constexpr, KV_SHUFFLED: tl.constexpr):
    """The tile's fp8 rows [BLOCK_KV, D] and fp32 scales [BLOCK_KV] (zeros past seg_hi)."""
    k = start + tl.arange(0, BLOCK_KV)
    ok = k < seg_hi
    slot = k % BS
    base = kv_ptr + blk * stride_kv_block
    dims = tl.arange(0, D)
    if KV_SHUFFLED:
        # aiter's pre-shuffled block: 16-token groups; inside one, the 16-byte pieces of D go piece-major
        # (piece p of token r at group + p * 256 + r * 16), so each 16-byte load along D stays contiguous.
        row = (slot // 16) * (16 * D) + (slot % 16) * 16
        kv = tl.load((base + row)[:, None] + ((dims // 16) * 256 + dims % 16)[None, :], mask=ok[:, None], other=0.0)
    else:
        kv = tl.load((base + slot * D)[:, None] + dims[None, :], mask=ok[:, None], other=0.0)
    sp = (base + BS * D).to(tl.pointer_type(tl.float32), bitcast=True) + slot
    return kv, tl.load(sp, mask=ok, other=0.0)


@triton.jit
def _chunk_logits(kv, scale, q_t, w, ends, out_ptr, b, k, k_ok, stride_out,
                  C0: tl.constexpr, NEXT_N: tl.constexpr, H: tl.constexpr, ROWS: tl.constexpr,
                  BLOCK_KV: tl.constexpr, CLEAN: tl.constexpr):
    """One dot [BLOCK_KV, D] x [D, ROWS*H], relu, x weight, head sum, x scale; store [BLOCK_KV, ROWS]. The head sum
    is the shared one (epilogue.weighted_head_sum: FMA chains on every triton release)."""
    lg = weighted_head_sum(tl.dot(kv, q_t), w, scale, BLOCK_KV, ROWS, H)  # [BLOCK_KV, ROWS]
    t = C0 + tl.arange(0, ROWS)
    rows = tl.cast(b, tl.int64) * NEXT_N + t
    if ROWS == 1:
        lg = tl.sum(lg, axis=1)  # (one column: no add)
        if CLEAN and NEXT_N > 1:  # (at NEXT_N == 1 the row's end is the tile's bound)
            lg = tl.where(k < tl.max(ends, axis=0), lg, float("-inf"))
        tl.store(out_ptr + rows * stride_out + k, lg.to(out_ptr.dtype.element_ty), mask=k_ok)
    else:
        if CLEAN:
            lg = tl.where(k[:, None] < ends[None, :], lg, float("-inf"))
        tl.store(out_ptr + rows[None, :] * stride_out + k[:, None], lg.to(out_ptr.dtype.element_ty),
                 mask=(t < NEXT_N)[None, :] & k_ok[:, None])


@triton.jit
def _units(ctx_ptr, bidx, ok, stride_ctx_b, stride_ctx_t, NEXT_N: tl.constexpr, NP: tl.constexpr, BS: tl.constexpr):
    """Cache blocks of sequences bidx, in the metadata's rule: cdiv(max(largest context of the sequence, 0), BS)."""
    t = tl.arange(0, NP)
    e = tl.load(ctx_ptr + tl.cast(bidx, tl.int64)[:, None] * stride_ctx_b + t[None, :] * stride_ctx_t,
                mask=ok[:, None] & (t < NEXT_N)[None, :], other=0)
    return (tl.cast(tl.maximum(tl.max(e, axis=1), 0), tl.int64) + (BS - 1)) // BS


@triton.jit
def _split_point(ctx_ptr, batch, stride_ctx_b, stride_ctx_t, p, P,
                 NEXT_N: tl.constexpr, NP: tl.constexpr, BS: tl.constexpr, CHUNK: tl.constexpr):
    """Entry p of get_paged_mqa_logits_metadata, computed by the program itself (SELF_SCHEDULE): the
    sequence b with cum_before(b) <= floor(p * total / P) < cum_before(b) + blocks(b), and the block offset
    into it; (batch, 0) at or past the total. Two passes over the context lengths (a few KB, from L2)."""
    total = tl.cast(0, tl.int64)
    for c0 in range(0, batch, CHUNK):
        bidx = c0 + tl.arange(0, CHUNK)
        total += tl.sum(_units(ctx_ptr, bidx, bidx < batch, stride_ctx_b, stride_ctx_t, NEXT_N, NP, BS), axis=0)
    target = tl.cast(p, tl.int64) * total // P
    carry = tl.cast(0, tl.int64)
    seq = tl.cast(batch, tl.int32)
    off = tl.cast(0, tl.int64)
    for c0 in range(0, batch, CHUNK):
        bidx = c0 + tl.arange(0, CHUNK)
        ok = bidx < batch
        u = _units(ctx_ptr, bidx, ok, stride_ctx_b, stride_ctx_t, NEXT_N, NP, BS)
        incl = tl.cumsum(u, axis=0) + carry
        before = incl - u
        hit = ok & (before <= target) & (target < incl)
        seq = tl.minimum(seq, tl.min(tl.where(hit, bidx, batch), axis=0))
        off += tl.sum(tl.where(hit, target - before, 0), axis=0)
        carry += tl.sum(u, axis=0)
    return seq, tl.cast(off, tl.int32)


def _name(specialization) -> str:
    """The config-aware name; a pre-shuffled cache adds _KV_SHUFFLED_1 (the plain layout's names stay as they were)."""
    constants = getattr(specialization, "constants", None) or {}
    shuffled = constants.get("KV_SHUFFLED") is True
    return _BASE_NAME(specialization) + ("_KV_SHUFFLED_1" if shuffled else "")


_BASE_NAME = make_kernel_repr("paged_mqa_logits", KEYS)


@triton.jit(repr=_name)
def paged_mqa_logits(
    q_ptr,  # fp8 [B, NEXT_N, H, D], D contiguous
    kv_ptr,  # fp8 view of the cache bytes: block i at i * stride_kv_block (bytes)
    w_ptr,  # fp32 [B*NEXT_N, H], H contiguous
    ctx_ptr,  # int32 [B] or [B, NEXT_N]
    table_ptr,  # int32 [B, max_blocks], blocks contiguous
    meta_ptr,  # int32 [P + 1, 2] contiguous: (sequence, block) where each range starts
    out_ptr,  # fp32 or bf16 [B*NEXT_N, >= max_context_len], row stride stride_out
    batch,
    max_context_len,
    stride_q_b, stride_q_t, stride_q_h,
    stride_kv_block,
    stride_w,
    stride_ctx_b, stride_ctx_t,  # stride_ctx_t = 0 for 1-D context lens
    ctx_causal,  # 1: 1-D context lens (row t ends at ctx - NEXT_N + t + 1); 0: 2-D
    stride_table,
    stride_out,
    num_blocks,  # blocks of the cache: ids are clamped into [0, num_blocks)
    table_cols,  # entries of a block-table row: none past them is read
    NEXT_N: tl.constexpr,
    H: tl.constexpr,
    D: tl.constexpr,
    BS: tl.constexpr,  # tokens per cache block; also the metadata's block unit
    BLOCK_KV: tl.constexpr,  # tokens per kv tile
    ROWS: tl.constexpr,  # draft rows per dot (ROWS * H = the MMA's N)
    CHUNKS: tl.constexpr,  # dots per kv tile (1 or 2): ROWS * CHUNKS >= NEXT_N
    SUBS: tl.constexpr,  # programs sharing one schedule range
    CLEAN: tl.constexpr,
    FILL: tl.constexpr,  # columns per -inf fill item
    SELF_SCHEDULE: tl.constexpr,  # each program computes its metadata entries itself (meta_ptr unused)
    KV_SHUFFLED: tl.constexpr = False,  # the cache's fp8 rows in aiter's pre-shuffled order (_tile_kv)
):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    n_ranges = nprog // SUBS
    p = pid % n_ranges
    j = pid // n_ranges
    NP: tl.constexpr = ROWS * CHUNKS

    if SELF_SCHEDULE:
        b_lo, u_lo = _split_point(ctx_ptr, batch, stride_ctx_b, stride_ctx_t, p, n_ranges, NEXT_N, NP, BS, 256)
        b_end, u_end = _split_point(ctx_ptr, batch, stride_ctx_b, stride_ctx_t, p + 1, n_ranges, NEXT_N, NP, BS, 256)
    else:
        # Any schedule, safely: entry 0 is (0, 0) and entry P is (batch, 0) whatever they hold; the others are
        # clamped (sequences into [0, batch], blocks into [0, the blocks of max_context_len]), so the ranges of
        # all programs cover every token, and a range whose start is not before its end does nothing.
        top = tl.cdiv(max_context_len, BS)
        b_lo = tl.where(p == 0, 0, tl.minimum(tl.maximum(tl.load(meta_ptr + 2 * p), 0), batch))
        u_lo = tl.where(p == 0, 0, tl.minimum(tl.maximum(tl.load(meta_ptr + 2 * p + 1), 0), top))
        last = p + 1 == n_ranges
        b_end = tl.where(last, batch, tl.minimum(tl.maximum(tl.load(meta_ptr + 2 * p + 2), 0), batch))
        u_end = tl.where(last, 0, tl.minimum(tl.maximum(tl.load(meta_ptr + 2 * p + 3), 0), top))

    offs = tl.arange(0, BLOCK_KV)
    for b in range(b_lo, tl.minimum(b_end + 1, batch)):
        ends0 = _row_ends(ctx_ptr, b, stride_ctx_b, stride_ctx_t, ctx_causal, tl.arange(0, ROWS), NEXT_N)
        hi = tl.max(ends0, axis=0)
        if CHUNKS == 2:
            ends1 = _row_ends(ctx_ptr, b, stride_ctx_b, stride_ctx_t, ctx_causal, ROWS + tl.arange(0, ROWS), NEXT_N)
            hi = tl.maximum(hi, tl.max(ends1, axis=0))
        hi = tl.minimum(hi, max_context_len)
        # This range's part of sequence b, in tokens: [seg_lo, seg_hi).
        seg_lo = tl.where(b == b_lo, u_lo * BS, 0)
        seg_hi = tl.where(b == b_end, tl.minimum(u_end * BS, hi), hi)
        if seg_lo < seg_hi:
            q0, w0 = _chunk_inputs(q_ptr, w_ptr, b, stride_q_b, stride_q_t, stride_q_h, stride_w,
                                   0, NEXT_N, H, D, ROWS)
            if CHUNKS == 2:
                q1, w1 = _chunk_inputs(q_ptr, w_ptr, b, stride_q_b, stride_q_t, stride_q_h, stride_w,
                                       ROWS, NEXT_N, H, D, ROWS)
            table_row = table_ptr + tl.cast(b, tl.int64) * stride_table
            step: tl.constexpr = SUBS * BLOCK_KV
            s0 = seg_lo + j * BLOCK_KV
            # Triton's software pipeliner (num_stages) turns the gathers into cp.async stages; with the
            # block-table indirection it keeps more than one tile in flight only from num_stages 5 up.
            for start in range(s0, seg_hi, step):
                blk = _tile_blocks(table_row, start, seg_hi, num_blocks, table_cols, BS, BLOCK_KV)
                kv, scale = _tile_kv(kv_ptr, blk, start, seg_hi, stride_kv_block, BS, D, BLOCK_KV, KV_SHUFFLED)
                k = start + offs
                k_ok = k < seg_hi
                _chunk_logits(kv, scale, q0, w0, ends0, out_ptr, b, k, k_ok, stride_out,
                              0, NEXT_N, H, ROWS, BLOCK_KV, CLEAN)
                if CHUNKS == 2:
                    _chunk_logits(kv, scale, q1, w1, ends1, out_ptr, b, k, k_ok, stride_out,
                                  ROWS, NEXT_N, H, ROWS, BLOCK_KV, CLEAN)

    if CLEAN:
        # Dead tails [largest row end of the sequence, max_context_len), in FILL-column pieces over all programs.
        n_chunks = tl.cdiv(max_context_len, FILL)
        cols = tl.arange(0, FILL)
        neg = tl.full((FILL,), float("-inf"), tl.float32)
        for item in range(pid, batch * NEXT_N * n_chunks, nprog):
            r = item // n_chunks
            c0 = (item - r * n_chunks) * FILL
            hi = _seq_hi(ctx_ptr, r // NEXT_N, stride_ctx_b, stride_ctx_t, ctx_causal, max_context_len, NEXT_N, NP)
            if hi < c0 + FILL:
                col = c0 + cols
                tl.store(out_ptr + tl.cast(r, tl.int64) * stride_out + col, neg.to(out_ptr.dtype.element_ty),
                         mask=(col >= hi) & (col < max_context_len))
