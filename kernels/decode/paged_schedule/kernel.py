"""Schedule metadata of the paged decode kernel in one program (mqa_cli.launch.schedule._metadata_torch is the spec).

Sequence b has u_b = cdiv(max(ctx_b, 0), block_kv) blocks (ctx_b: its largest row end), cb_b blocks before
it and T in all. Entry p (0 <= p <= P) starts at block t_p = floor(p T / P): its sequence is the b with
cb_b <= t_p < cb_b + u_b, its block t_p - cb_b; when t_p = T (p = P, or T = 0) it is (B, 0).

Seen from the sequences, b holds entries [lo_b, hi_b) with lo_b = ceil(cb_b P / T), hi_b = ceil((cb_b + u_b) P / T)
(empty when u_b = 0; p >= lo_b <=> p T >= cb_b P <=> t_p >= cb_b). Passes:
  1. T: one walk over the context lens (tl.cumsum per chunk, a running carry).
  2. Again, with the running prefix cb_b: each b with lo_b < hi_b marks its first entry lo_b with (b, cb_b
     mod 2^32); the entries were set to "no mark" (-1) first.
  3. Over the entries: the last mark at or before p (a scan, carried across steps) gives (b, cb_b); the block
     is t_p - cb_b, exact from the low 32 bits since it is below 2^31.
No int32 product can wrap: prefixes, T and p T are int64; row offsets are 64-bit.
"""
import triton
import triton.language as tl

from ...common.naming import make_kernel_repr
from . import KEYS


@triton.jit
def _last_mark(s1, c1, s2, c2):
    """Scan combine: the later of two marks (s >= 0 marks an entry)."""
    later = s2 >= 0
    return tl.where(later, s2, s1), tl.where(later, c2, c1)


@triton.jit
def _blocks(ctx_ptr, b, batch, next_n, stride_b, stride_t, block_kv):
    """Blocks of sequences b (a vector): cdiv of the largest row end (negatives as 0); 0 past the batch."""
    ok = b < batch
    row = ctx_ptr + tl.cast(b, tl.int64) * stride_b
    hi = tl.zeros(b.shape, tl.int32)
    for t in range(next_n):
        hi = tl.maximum(hi, tl.load(row + tl.cast(t, tl.int64) * stride_t, mask=ok, other=0))
    q = hi // block_kv
    return (q + (q * block_kv < hi).to(tl.int32)).to(tl.int64)


@triton.jit(repr=make_kernel_repr("paged_schedule", KEYS))
def paged_schedule(
    ctx_ptr,  # int32 [B] or [B, next_n], any strides
    out_ptr,  # int32 [P + 1, 2] contiguous
    batch,
    next_n,  # 1 for 1-D context lens
    stride_b, stride_t,  # stride_t = 0 for 1-D context lens
    block_kv,
    programs,  # P
    CHUNK: tl.constexpr,  # sequences per step
    PBLOCK: tl.constexpr,  # entries per step of pass 3
):
    lanes = tl.arange(0, CHUNK)
    entries = tl.arange(0, PBLOCK)
    n_entries = programs + 1
    # "No mark" in every entry (pass 2 overwrites the marked ones after the barrier).
    for e0 in range(0, n_entries, PBLOCK):
        p = e0 + entries
        tl.store(out_ptr + 2 * p, tl.full((PBLOCK,), -1, tl.int32), mask=p < n_entries)

    # Pass 1: T.
    total = tl.full((), 0, tl.int64)
    for b0 in range(0, batch, CHUNK):
        total += tl.sum(_blocks(ctx_ptr, b0 + lanes, batch, next_n, stride_b, stride_t, block_kv), axis=0)

    tl.debug_barrier()
    # Pass 2: mark each sequence's first entry.
    P64 = tl.cast(programs, tl.int64)
    div = tl.maximum(total, 1)  # T = 0: no sequence holds an entry (all u_b = 0)
    carry = tl.full((), 0, tl.int64)
    for b0 in range(0, batch, CHUNK):
        b = b0 + lanes
        u = _blocks(ctx_ptr, b, batch, next_n, stride_b, stride_t, block_kv)
        cum = carry + tl.cumsum(u, axis=0)
        before = cum - u
        lo = (before * P64 + div - 1) // div
        hi = (cum * P64 + div - 1) // div
        mark = out_ptr + 2 * lo
        own = (lo < hi) & (b < batch)
        tl.store(mark, b, mask=own)
        tl.store(mark + 1, before.to(tl.int32), mask=own)  # low 32 bits (int64 -> int32 truncates)
        carry += tl.sum(u, axis=0)

    tl.debug_barrier()
    # Pass 3: every entry from the last mark at or before it.
    seq_c = tl.full((), -1, tl.int32)
    before_c = tl.full((), 0, tl.int32)
    for e0 in range(0, n_entries, PBLOCK):
        p = e0 + entries
        ok = p < n_entries
        s = tl.load(out_ptr + 2 * p, mask=ok, other=-1)
        c = tl.load(out_ptr + 2 * p + 1, mask=ok, other=0)
        s, c = tl.associative_scan((s, c), 0, _last_mark)
        s, c = _last_mark(seq_c, before_c, s, c)
        last = entries == PBLOCK - 1
        seq_c = tl.max(s, axis=0)  # marks grow with p
        before_c = tl.sum(tl.where(last, c, 0), axis=0)
        t = tl.cast(p, tl.int64) * total // P64
        blk = (t - c.to(tl.int64)).to(tl.int32)  # off from t_p - cb_b by a multiple of 2^32: truncation drops it
        end = (s < 0) | (p == programs)  # t_p = T
        tl.store(out_ptr + 2 * p, tl.where(end, batch, s), mask=ok)
        tl.store(out_ptr + 2 * p + 1, tl.where(end, 0, blk), mask=ok)
