"""Hopper (sm90) paged decode kernel in Gluon, warp-specialised: fp8 MQA logits of next_n draft rows against a
paged fp8 kv cache, streaming whole cache blocks through TMA.

Grid: P ranges x SUBS programs. Range p is (sequence, cache block) work from entry p of the schedule to entry
p + 1 (get_paged_mqa_logits_metadata's split, read from it or computed by the program itself: SELF_SCHEDULE,
in 32-bit arithmetic; program i first asks the L2 for row i of the block table, so that the first block-id read
after the split meets the L2);
sub-program j of a range takes blocks j, j + SUBS, ... of each of its sequence segments, so SUBS programs share
an SM and each one's math overlaps the others' loads. The range is found before warp_specialize and handed to the
partitions, or (SPLIT_INSIDE, the computed split only) by each partition itself: then the rings' setup and the
partitions' start run while the first loads are in flight (a small decode step is a chain of dependent round trips).

Partitions (gl.warp_specialize):
- producer (worker, 1 warp; with four math warpgroups LOADERS = 4: one warp per math warpgroup, warp k issuing
  the blocks of warpgroup k alone, warp 0 also q): per sequence, q [NP*H, D] by TMA into a double-buffered slot;
  per cache block, the block id read from the block table (32 ids per vector load, the next 32 loaded while these
  are issued) and two TMAs into the ring of the math warpgroup that takes the block (STAGES slots each): the
  block's fp8 rows [BS, D] and its fp32 scales [BS]. One producer issues the blocks in order, so a warpgroup whose
  ring is full holds up the loads of every other; with a producer each, none waits on another's ring;
- math (the default partition and MATH_WG - 1 workers, one warpgroup each; block c of the program goes to
  warpgroup c % MATH_WG): per cache block one wgmma [BS, D] x [D, NP*H] (kv = M, A operand; draft rows x heads =
  N, B operand, K-major from q's slot), so each kv byte is read once for all next_n rows; then relu, x weight,
  head sum, x kv scale, the -inf mask past each row's end (CLEAN), and the [BS, NP] store. PIPE (one warpgroup):
  two accumulators, a block's epilogue beside the next block's wgmma. MMA_N: each block's draft rows in parts of
  MMA_N / H rows, one wgmma each, the next part's wgmma issued before a part's epilogue (_blocks_in_parts; AHEAD
  off: one part at a time, one accumulator, so that three warpgroups fit the registers); the
  rows past next_n are neither loaded nor computed (next_n 3: 2 + 1 rows, not 4), and next_n x heads may pass one
  wgmma's 256 columns (next_n 5-8 at H 64). q then comes in one TMA box per part.

Cache layout (DeepGEMM's): block i starts at byte i * stride_kv_block and holds BS*D fp8 bytes (token-major)
followed by BS fp32 scales. The launcher describes it twice: fp8 rows [blocks * RPB, D] (RPB = stride_kv_block /
D rows per block; block i's tokens are rows i*RPB .. i*RPB + BS - 1) and fp32 scales [blocks, BS] at byte offset
BS*D with row stride stride_kv_block / 4.
Row (b, t) ends at ctx[b] - NEXT_N + t + 1 (1-D context lens, ctx_causal 1, stride_ctx_t 0) or ctx[b, t] (2-D).
Tokens at or past the sequence's largest row end (clamped to max_context_len) are never read. With CLEAN, row
entries in [end, largest end) are written -inf by the tile, and [largest end, max_context_len) by a fill spread
over all programs after their blocks.

No metadata makes it fault or hang: a given schedule's entries are clamped as the portable kernel clamps them
(entry 0 read as (0, 0), entry P as (batch, 0), sequences into [0, batch], blocks into [0, cdiv(max_context_len,
BS)]: every partition then walks the same well-formed range, and any schedule's ranges cover every token), and the
producer reads no block-table entry past a row's table_cols (a context longer than its row covers loads block 0
there). A block id is not clamped: the TMA unit checks every box against the descriptors' bounds (the cache's
blocks: fp8 rows [(num_blocks - 1) * RPB + BS, D], scales [num_blocks, BS]) and fills what lies outside with
zeros, so a bad id (or one whose row coordinate id * RPB wraps in 32 bits) loads zeros or some block of the cache,
never memory outside it (no clamp of the ids in the producer: docs/DESIGN-NOTES.md).

mbarrier phases as in mqa_kernels.common.gluon_ring: the n-th fill of a slot is waited with parity n & 1 by
its math warpgroup, and its (n-1)-th release with parity (n & 1) ^ 1 by the producer before refilling it. Each
slot belongs to one warpgroup, which takes its fills in order: a parity wait cannot match a fill two behind (one
ring shared by several warpgroups can: a warpgroup early for fill n passes on the completed fill n - 2).
PTX_SLOTS: the math warpgroups wait for a fill and release a slot in PTX at the ring barriers' offsets (FULL_AT,
EMPTY_AT, which mqa_cli.launch.barrier_offsets reads from a first build), every thread arriving (empty count 128).
Triton's own ops put a 128-thread barrier before each wait and each elected release; without them each warp still
waits for a slot's fills in order, and no fill starts before all 128 threads released the one before.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.language.core import _aggregate as aggregate

from ...common import gluon_compat as compat
from ...common.gluon_heads import lane_head_sum, quad_head_sum
from ...common.gluon_ring import Scalar, release_slot, ring, scalar, slot_phase, wait_slot
from ...common.naming import make_kernel_repr
from . import KEYS

IDS = gl.constexpr(32)  # block-table entries the producer reads per vector load (one per lane)
FILL = gl.constexpr(1024)  # columns per -inf fill item (CLEAN)
SPLIT_CHUNK = gl.constexpr(256)  # sequences per step of the in-kernel schedule's scans


@aggregate
class Decode:
    """The runtime arguments both partitions read: pointers, sizes, strides (elements)."""

    w_ptr: gl.tensor  # fp32 [B*NEXT_N, H], row stride stride_w, heads contiguous
    ctx_ptr: gl.tensor  # int32 [B] or [B, NEXT_N]
    table_ptr: gl.tensor  # int32 [B, max_blocks], row stride stride_table
    out_ptr: gl.tensor  # fp32 / bf16 [B*NEXT_N, stride_out]
    batch: Scalar
    max_context_len: Scalar
    rows_per_block: Scalar  # RPB: rows of the fp8 descriptor per cache block
    stride_w: Scalar
    stride_ctx_b: Scalar
    stride_ctx_t: Scalar
    ctx_causal: Scalar
    stride_table: Scalar
    stride_out: Scalar
    meta: gl.tensor  # int32 [P + 1, 2]: the schedule (read unless SELF_SCHEDULE)
    table_cols: Scalar  # entries of a block-table row: the producer reads none past them

    @gluon.constexpr_function
    def __init__(self, w_ptr, ctx_ptr, table_ptr, out_ptr, batch, max_context_len, rows_per_block, stride_w,
                 stride_ctx_b, stride_ctx_t, ctx_causal, stride_table, stride_out, meta, table_cols):
        self.meta = meta
        self.table_cols = scalar(table_cols)
        self.w_ptr = w_ptr
        self.ctx_ptr = ctx_ptr
        self.table_ptr = table_ptr
        self.out_ptr = out_ptr
        self.batch = scalar(batch)
        self.max_context_len = scalar(max_context_len)
        self.rows_per_block = scalar(rows_per_block)
        self.stride_w = scalar(stride_w)
        self.stride_ctx_b = scalar(stride_ctx_b)
        self.stride_ctx_t = scalar(stride_ctx_t)
        self.ctx_causal = scalar(ctx_causal)
        self.stride_table = scalar(stride_table)
        self.stride_out = scalar(stride_out)


@aggregate
class Shape:
    """The compile-time shape of the work."""

    NEXT_N: gl.constexpr
    H: gl.constexpr
    D: gl.constexpr
    BS: gl.constexpr  # tokens per cache block = the wgmma's M (64)
    NP: gl.constexpr  # draft rows per wgmma (next_n rounded up); NP * H = the wgmma's N
    STAGES: gl.constexpr  # kv ring depth per math warpgroup (its cache blocks in flight)
    SUBS: gl.constexpr  # programs sharing one schedule range
    CLEAN: gl.constexpr
    PIPE: gl.constexpr  # two accumulators: a block's epilogue overlaps the next block's wgmma
    MATH_WG: gl.constexpr  # math warpgroups per program; block c of the program goes to warpgroup c % MATH_WG
    Q_IN_LANES: gl.constexpr  # wgmma column n = (draft row (n % 8) // (8 // NP), head ...): see _head_sum
    MMA_N: gl.constexpr  # columns per wgmma when a block's draft rows go in parts (MMA_N / H rows each); 0: one wgmma
    AHEAD: gl.constexpr  # parts: part j + 1's wgmma issued before part j's epilogue (two accumulators in flight)
    PTX_SLOTS: gl.constexpr  # kv ring slots waited for and released in PTX (gluon_ring.wait_slot, release_slot)
    FULL_AT: gl.constexpr  # PTX_SLOTS: byte offset of the kv ring's full barriers in shared memory
    EMPTY_AT: gl.constexpr  # PTX_SLOTS: and of its empty barriers
    LOADERS: gl.constexpr  # producer warps: 1 (all blocks) or MATH_WG = 4 (warp k feeds math warpgroup k's ring alone)
    SELF_SCHEDULE: gl.constexpr  # the split computed by the program (else read from p.meta)
    SPLIT_INSIDE: gl.constexpr  # each partition computes its range itself, after warp_specialize (_work)

    @gluon.constexpr_function
    def __init__(self, NEXT_N, H, D, BS, NP, STAGES, SUBS, CLEAN, PIPE, MATH_WG, Q_IN_LANES, MMA_N=0, AHEAD=True,
                 PTX_SLOTS=False, FULL_AT=-1, EMPTY_AT=-1, LOADERS=1, SELF_SCHEDULE=True, SPLIT_INSIDE=False):
        self.NEXT_N = gl.constexpr(NEXT_N)
        self.H = gl.constexpr(H)
        self.D = gl.constexpr(D)
        self.BS = gl.constexpr(BS)
        self.NP = gl.constexpr(NP)
        self.STAGES = gl.constexpr(STAGES)
        self.SUBS = gl.constexpr(SUBS)
        self.CLEAN = gl.constexpr(CLEAN)
        self.PIPE = gl.constexpr(PIPE)
        self.MATH_WG = gl.constexpr(MATH_WG)
        self.Q_IN_LANES = gl.constexpr(Q_IN_LANES)
        self.MMA_N = gl.constexpr(MMA_N)
        self.AHEAD = gl.constexpr(AHEAD)
        self.PTX_SLOTS = gl.constexpr(PTX_SLOTS)
        self.FULL_AT = gl.constexpr(FULL_AT)
        self.EMPTY_AT = gl.constexpr(EMPTY_AT)
        self.LOADERS = gl.constexpr(LOADERS)
        self.SELF_SCHEDULE = gl.constexpr(SELF_SCHEDULE)
        self.SPLIT_INSIDE = gl.constexpr(bool(SPLIT_INSIDE) and bool(SELF_SCHEDULE))  # the computed split only


@aggregate
class Work:
    """This program's range of (sequence, block) work: from (b_lo, u_lo) to (b_end, u_end), blocks j mod SUBS."""

    b_lo: gl.tensor
    u_lo: gl.tensor
    b_end: gl.tensor
    u_end: gl.tensor
    j: gl.tensor

    @gluon.constexpr_function
    def __init__(self, b_lo, u_lo, b_end, u_end, j):
        self.b_lo = b_lo
        self.u_lo = u_lo
        self.b_end = b_end
        self.u_end = u_end
        self.j = j


@gluon.constexpr_function
def _parts(s):
    """Wgmmas per cache block: 1, or with MMA_N the parts of MMA_N / H rows that hold rows below next_n (the rule of
    config.parts, which sizes the q slots on the host; triton resolves no plain function here)."""
    if s.MMA_N == 0:
        return 1
    pr = s.MMA_N // s.H
    return (s.NEXT_N + pr - 1) // pr


@gluon.jit
def _slot(c, s):
    """Ring slot and fill parity of the program's block c: block c goes to math warpgroup c % MATH_WG, which has its
    own STAGES slots and takes its blocks in order (so a slot's fills are waited for in order, by one warpgroup)."""
    u = c.to(gl.uint32)  # c >= 0: unsigned, so a power-of-two MATH_WG or STAGES is a shift and a mask
    n = u // s.MATH_WG
    return ((u % s.MATH_WG) * s.STAGES + n % s.STAGES).to(gl.int32), ((n // s.STAGES) & 1).to(gl.int32)


@gluon.jit
def _row_ends(p, b, t, NEXT_N: gl.constexpr):
    """Row ends of draft rows t (a vector; rows >= NEXT_N get 0) of sequence b."""
    ok = t < NEXT_N
    e = gl.load(p.ctx_ptr + b.to(gl.int64) * p.stride_ctx_b + t * p.stride_ctx_t, mask=ok, other=0)
    e = e + p.ctx_causal * (t - NEXT_N + 1)
    return gl.where(ok, gl.maximum(e, 0), 0)


@gluon.jit
def _segment(p, s, w, b, layout: gl.constexpr):
    """Blocks [u0, u1) of sequence b that this program takes (step SUBS from u0), and the range's token end."""
    ends = _row_ends(p, b, gl.arange(0, s.NP, layout=layout), s.NEXT_N)
    hi = gl.minimum(gl.max(ends, axis=0), p.max_context_len)
    seg_lo = gl.where(b == w.b_lo, w.u_lo * s.BS, 0)
    seg_hi = gl.where(b == w.b_end, gl.minimum(w.u_end * s.BS, hi), hi)
    u0 = seg_lo // s.BS + w.j
    u1 = gl.where(seg_lo < seg_hi, (seg_hi + s.BS - 1) // s.BS, 0)
    return u0, u1, seg_hi


@gluon.jit
def _add(a, b):
    return a + b


@gluon.jit
def _units(p, bidx, ok, NEXT_N: gl.constexpr, BS: gl.constexpr):
    """Cache blocks of sequences bidx, in the metadata's rule: cdiv(largest context of the sequence, BS), a
    negative context as 0. The context is clamped to max_context_len (no valid input passes it), so that the sum
    over the batch is at most batch x cdiv(max_context_len, BS), which dispatch keeps below 2^31: int32 throughout."""
    e = gl.zeros_like(bidx)
    for t in gl.static_range(NEXT_N):
        e = gl.maximum(e, gl.load(p.ctx_ptr + bidx.to(gl.int64) * p.stride_ctx_b + t * p.stride_ctx_t,
                                  mask=ok, other=0))
    e = gl.minimum(e, p.max_context_len)
    return (e + (BS - 1)) // BS


@gluon.jit
def _locate(incl, ok, target, seq, before):
    """Fold one chunk of inclusive block prefixes into the search for `target`: the entry's sequence is the number
    of sequences whose prefix ends at or before it (prefixes grow, so they are the ones before it), and the blocks
    before that sequence are the largest such prefix. Two independent reductions, no scan of their own."""
    done = ok & (incl <= target)
    return seq + gl.sum(done.to(gl.int32), axis=0), gl.maximum(before, gl.max(gl.where(done, incl, 0), axis=0))


@gluon.jit
def _split_points(p, r, P, NEXT_N: gl.constexpr, BS: gl.constexpr):
    """Entries r and r + 1 of get_paged_mqa_logits_metadata, computed by the program itself: entry e is the
    sequence b with cum_before(b) <= t_e < cum_before(b) + blocks(b), t_e = floor(e * total / P), and the block
    offset t_e - cum_before(b); (batch, 0) when t_e = total. The first chunk of context lengths stays in registers,
    so up to SPLIT_CHUNK sequences cost one memory round trip; more add two passes over the rest (a few KB, from L2).

    Latency is what it costs (a decode step waits for it before its first block-table read), so: int32 arithmetic
    (t_e exact as r * (total // P) + r * (total % P) // P, no 64-bit division); the total and the prefixes from one
    scan; each entry from two reductions that run side by side. Every warp holds the whole chunk (the layout covers
    SPLIT_CHUNK in one warp), so no CTA barrier comes before the hand-off (_through_shared)."""
    layout: gl.constexpr = gl.BlockedLayout([SPLIT_CHUNK // 32], [32], [gl.num_warps()], [0])
    offs = gl.arange(0, SPLIT_CHUNK, layout=layout)
    ok0 = offs < p.batch
    incl0 = gl.associative_scan(_units(p, offs, ok0, NEXT_N, BS), 0, _add)
    total = gl.max(incl0, axis=0)
    for c0 in range(SPLIT_CHUNK, p.batch, SPLIT_CHUNK):
        bidx = c0 + offs
        total += gl.sum(_units(p, bidx, bidx < p.batch, NEXT_N, BS), axis=0)
    per = total // P
    rem = total - per * P
    t_lo = r * per + (r * rem) // P
    t_hi = (r + 1) * per + ((r + 1) * rem) // P
    zero = gl.to_tensor(0)
    b_lo, before_lo = _locate(incl0, ok0, t_lo, zero, zero)
    b_hi, before_hi = _locate(incl0, ok0, t_hi, zero, zero)
    carry = gl.max(incl0, axis=0)
    for c0 in range(SPLIT_CHUNK, p.batch, SPLIT_CHUNK):
        bidx = c0 + offs
        ok = bidx < p.batch
        incl = gl.associative_scan(_units(p, bidx, ok, NEXT_N, BS), 0, _add) + carry
        b_lo, before_lo = _locate(incl, ok, t_lo, b_lo, before_lo)
        b_hi, before_hi = _locate(incl, ok, t_hi, b_hi, before_hi)
        carry = gl.max(gl.where(ok, incl, 0), axis=0)
    return _through_shared(b_lo, t_lo - before_lo, b_hi, t_hi - before_hi)


@gluon.jit
def _prefetch_table(p, BS: gl.constexpr):
    """Ask the L2 for the block table's live ids before the split is known: program i takes row i (one 32-id piece
    per thread: rows of up to 4096 blocks; the rows of programs past the batch, none). Each program's first
    block-table read then meets the L2 instead of memory: at small batches a decode step is a chain of dependent
    memory round trips (context lengths, split, block ids, cache blocks), and this takes one of them off it. At
    large batches (rows past the grid) latency is hidden anyway. No division: it is issued ahead of the split's
    loads."""
    lay: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    piece = gl.arange(0, 32 * gl.num_warps(), layout=lay)
    b = gl.program_id(0)
    ok = (piece < gl.cdiv(gl.minimum(gl.cdiv(p.max_context_len, BS), p.table_cols), IDS)) & (b < p.batch)
    ptr = p.table_ptr + b.to(gl.int64) * p.stride_table + gl.where(ok, piece * IDS, 0)
    gl.inline_asm_elementwise("@$2 prefetch.global.L2 [$1];\n\tmov.u32 $0, 0;", "=r,l,b", [ptr, ok], dtype=gl.int32,
                              is_pure=False, pack=1)


@gluon.constexpr_function
def _descriptor_prefetch_asm(params):
    """PTX that asks the TMA unit for each descriptor named in `params` (its kernel parameters' symbols, comma-
    separated) ahead of its first copy: `prefetch.param.tensormap`, predicated on $1."""
    lines = [f"@$1 prefetch.param.tensormap [{name}];" for name in str(params).split(",")]
    return gl.constexpr("\n\t".join(lines + ["mov.u32 $0, 0;"]))


@gluon.jit
def _prefetch_descriptors(asm: gl.constexpr):
    """The TMA descriptors prefetched at entry by one thread of the program. Without it each is fetched on its first
    copy: the cache's after the block ids, on the chain of dependent round trips a small decode step waits for."""
    lay: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    first = gl.arange(0, 32 * gl.num_warps(), layout=lay) == 0
    gl.inline_asm_elementwise(asm, "=r,b", [first], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _opaque_i32(x):
    """int32 x through a PTX move the compiler cannot see through (no instruction in the SASS): its range is hidden
    from what is derived from it."""
    return gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=gl.int32, is_pure=True, pack=1)


@gluon.jit
def _work(p, s):
    """This program's range of (sequence, block) work: range r of the schedule's P, sub-program j of SUBS; computed
    (SELF_SCHEDULE) or read from the schedule."""
    pid = gl.program_id(0)
    n_ranges = gl.num_programs(0) // s.SUBS
    r = pid % n_ranges
    j = pid // n_ranges
    if s.SELF_SCHEDULE:
        b_lo, u_lo, b_end, u_end = _split_points(p, r, n_ranges, s.NEXT_N, s.BS)
    else:
        # Any schedule, safely: entry 0 is (0, 0) and entry P is (batch, 0) whatever they hold; the others are
        # clamped (sequences into [0, batch], blocks into [0, the blocks of max_context_len]), so the ranges of all
        # programs cover every token, and a range whose start is not before its end does nothing.
        top = gl.cdiv(p.max_context_len, s.BS)
        last = r + 1 == n_ranges
        b_lo = gl.where(r == 0, 0, gl.minimum(gl.maximum(gl.load(p.meta + 2 * r), 0), p.batch))
        u_lo = gl.where(r == 0, 0, gl.minimum(gl.maximum(gl.load(p.meta + 2 * r + 1), 0), top))
        b_end = gl.where(last, p.batch, gl.minimum(gl.maximum(gl.load(p.meta + 2 * r + 2), 0), p.batch))
        u_end = gl.where(last, 0, gl.minimum(gl.maximum(gl.load(p.meta + 2 * r + 3), 0), top))
        if s.MATH_WG == 3:
            # the clamped first sequence through an opaque move, so that a batch of 1 the JIT specialised compiles
            # the sequence loop as any other batch does (docs/CODEGEN.md, "batch 1")
            b_lo = _opaque_i32(b_lo)
    return Work(b_lo, u_lo, b_end, u_end, j)


@gluon.jit
def _rings(s, q_desc, kv_desc, sc_desc):
    """The program's shared memory: the q slots and the kv ring with their barriers, initialised and fenced."""
    # q slots: 2 x one TMA box (or, MMA_N, 2 x PARTS boxes of MMA_N rows: slot i's part j in buffer i * PARTS + j),
    # released by every math warpgroup (empty count MATH_WG).
    q = ring(gl.allocate_shared_memory(q_desc.dtype, [2 * _parts(s)] + q_desc.block_type.shape, q_desc.layout),
              s.MATH_WG, 2)
    # kv ring: STAGES slots per math warpgroup, each [BS, D] fp8 rows + [1, BS] fp32 scales, one barrier pair per slot.
    SLOTS: gl.constexpr = s.STAGES * s.MATH_WG
    kv = ring(gl.allocate_shared_memory(kv_desc.dtype, [SLOTS] + kv_desc.block_type.shape, kv_desc.layout),
               128 if s.PTX_SLOTS else 1)  # PTX_SLOTS: every thread of the warpgroup releases
    sc_smem = gl.allocate_shared_memory(sc_desc.dtype, [SLOTS] + sc_desc.block_type.shape, sc_desc.layout)
    fence_async_shared()
    return q, kv, sc_smem


@gluon.jit
def _max4(a0, b0, c0, d0, a1, b1, c1, d1):
    return gl.maximum(a0, a1), gl.maximum(b0, b1), gl.maximum(c0, c1), gl.maximum(d0, d1)


@gluon.jit
def _through_shared(a, b, c, d):
    """The split's four scalars (equal in every thread) read back by a cross-warp reduction of one element a warp,
    which goes through one shared-memory address: the blocks, slots and descriptors derived from them then stay in
    uniform registers (why this form: docs/DESIGN-NOTES.md)."""
    lay: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    z = gl.zeros([gl.num_warps()], gl.int32, layout=lay)
    return gl.reduce((z + a, z + b, z + c, z + d), 0, _max4)


@gluon.jit
def _load_partition(p, s, w, q, kv, sc_smem, q_desc, kv_desc, sc_desc, L: gl.constexpr = 0):
    """TMA producer warp L of s.LOADERS: q of each sequence with work here (warp 0), then the cache blocks of the
    math warpgroups it feeds through their rings: every block (one producer), or those of warpgroup L alone (one
    producer per warpgroup, so that a warpgroup whose ring is full holds up no other warpgroup's loads)."""
    lay: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    offs = gl.arange(0, IDS, layout=lay)
    STEP: gl.constexpr = s.MATH_WG if s.LOADERS > 1 else 1  # blocks of the program between two of this warp's
    c = 0  # the program's blocks so far: block c's ring slot and fill parity are _slot(c, s)
    i = 0  # sequences issued: q slot i % 2, use i // 2
    if s.SPLIT_INSIDE:
        w = _work(p, s)
    for b in range(w.b_lo, gl.minimum(w.b_end + 1, p.batch)):
        u0, u1, seg_hi = _segment(p, s, w, b, lay)
        if u0 < u1:
            if L == 0:
                qs, qph = slot_phase(i, 2)
                mbarrier.wait(q.empty.index(qs), qph ^ 1)
                if s.Q_IN_LANES:  # the [H / R, B * next_n, R, D] view: draft rows b * next_n ..
                    mbarrier.expect(q.full.index(qs), q_desc.block_type.nbytes)
                    compat.async_load(q_desc, [0, b * s.NEXT_N, 0, 0], q.full.index(qs),
                                                    q.smem.index(qs))
                else:  # one box of NP * H rows, or (MMA_N) one of MMA_N rows per part, into buffers qs * PARTS + j
                    PARTS: gl.constexpr = _parts(s)
                    QBOX: gl.constexpr = q_desc.block_type.shape[0]
                    mbarrier.expect(q.full.index(qs), PARTS * q_desc.block_type.nbytes)
                    for part in gl.static_range(PARTS):
                        compat.async_load(q_desc, [b * (s.NEXT_N * s.H) + part * QBOX, 0],
                                                        q.full.index(qs), q.smem.index(qs * PARTS + part))
                i += 1
            n = (u1 - u0 + s.SUBS - 1) // s.SUBS  # this program's blocks of the segment
            k0 = 0  # the segment's first block this warp issues, and how many
            if STEP > 1:
                k0 = (L - c % STEP + STEP) % STEP
            m = gl.maximum(n - k0 + STEP - 1, 0) // STEP
            row = p.table_ptr + b.to(gl.int64) * p.stride_table + u0 + k0 * s.SUBS
            # ids[i] is the table's column u0 + k0 * SUBS + i * STEP * SUBS: those past the row's table_cols are not
            # read (0: a context longer than its row covers loads block 0 there; ids out of range are left to the
            # TMA unit's bounds, see the module docstring). One bound per segment: the loads are the plain ones.
            GAP: gl.constexpr = STEP * s.SUBS
            m_in = gl.minimum(m, gl.maximum(p.table_cols - (u0 + k0 * s.SUBS) + (GAP - 1), 0) // GAP)
            ids = gl.load(row + offs * GAP, mask=offs < m_in, other=0)
            for j0 in range(0, m, IDS):
                nxt = gl.load(row + (j0 + IDS + offs) * GAP, mask=j0 + IDS + offs < m_in, other=0)
                for j in range(0, gl.minimum(IDS, m - j0)):
                    blk = gl.sum(gl.where(offs == j, ids, 0), axis=0)
                    st, ph = _slot(c + k0 + (j0 + j) * STEP, s)
                    mbarrier.wait(kv.empty.index(st), ph ^ 1)
                    mbarrier.expect(kv.full.index(st), kv_desc.block_type.nbytes + sc_desc.block_type.nbytes)
                    compat.async_load(kv_desc, [blk * p.rows_per_block, 0], kv.full.index(st),
                                                    kv.smem.index(st))
                    compat.async_load(sc_desc, [blk, 0], kv.full.index(st), sc_smem.index(st))
                ids = nxt
            c += n


@gluon.jit
def _scales(sc_smem, st, BS: gl.constexpr, k_layout: gl.constexpr):
    """The fp32 scales of the cache block in ring slot st, one per MMA row (read before the slot is released): each
    thread reads its own rows' scales from shared memory in the accumulator's row layout, so no layout conversion
    (a store, a warpgroup barrier and a load per block) stands between the wgmma and its epilogue."""
    return sc_smem.index(st).reshape([BS]).load(k_layout)


@gluon.jit
def _issue_block(c, s, kv, sc_smem, q_t, acc, k_layout: gl.constexpr):
    """The program's block c: wait for its ring slot, start its wgmma with B operand q_t (all draft rows, or the
    first part), read its kv scales."""
    st, ph = _slot(c, s)
    wait_slot(kv, st, ph, s.PTX_SLOTS, s.FULL_AT)
    tok = warpgroup_mma(kv.smem.index(st), q_t, acc, use_acc=False, is_async=True)
    return st, tok, _scales(sc_smem, st, s.BS, k_layout)


@gluon.jit
def _head_sum(x, w, s):
    """[BS, NP * H] (wgmma accumulator layout, lane t of a quad holding columns 8j + 2t + {0, 1}) -> [BS, NP]: the
    sum over heads of x * w (x the relu'd scores, w the weights broadcast to x's shape), each lane's share as one FMA
    chain in the accumulator's order (lane_head_sum: it stays one whatever order triton reduces in).

    Row-major columns (n = row * H + head) spread each draft row's heads over the 4 lanes: two shuffle rounds per
    sum (quad_head_sum). With Q_IN_LANES the q block is loaded (host: the [H / R, B * next_n, R, D] view, R = 8 / NP) so
    that column n holds draft row (n % 8) // R and head (n // 8) * R + n % R: at NP 4 each lane holds every head of
    its own row (no shuffle), at NP 2 a row's heads are in 2 lanes (one round)."""
    if s.Q_IN_LANES:
        R: gl.constexpr = 8 // s.NP
        L: gl.constexpr = R // 2  # lanes sharing a row: c = n % R = 2 (lane bit) + e
        J: gl.constexpr = (s.NP * s.H) // 8
        # [kv, j, row, lane bit, e] -> [kv, row, lane bit, (j, e)]: each lane's heads of a row on the last axis
        xs = gl.reshape(gl.permute(gl.reshape(x, [s.BS, J, s.NP, L, 2]), (0, 2, 3, 1, 4)), [s.BS, s.NP, L, 2 * J])
        ws = gl.reshape(gl.permute(gl.reshape(w, [s.BS, J, s.NP, L, 2]), (0, 2, 3, 1, 4)), [s.BS, s.NP, L, 2 * J])
        return gl.sum(lane_head_sum(xs, ws, 2 * J), axis=2)
    else:
        return quad_head_sum(x, w, s.BS, s.NP, s.H)


@gluon.jit
def _store_block(p, s, acc, w2, sc, u, offs_k, ends2, out_rows, t_ok, seg_hi):
    """relu, x weight, head sum, x kv scale, -inf past each row's end (CLEAN), store [BS, NP] of block u."""
    x, w = gl.broadcast(gl.maximum(acc, 0.0), w2)
    lg = _head_sum(x, w, s) * gl.expand_dims(sc, 1)
    k2 = gl.expand_dims(u * s.BS + offs_k, 1)
    if s.CLEAN:
        lg = gl.where(k2 < ends2, lg, float("-inf"))
    gl.store(p.out_ptr + out_rows + k2, lg.to(p.out_ptr.dtype.element_ty), mask=t_ok & (k2 < seg_hi))


@gluon.jit
def _rows_of_part(p, s2, b, b64, row0, cols, offs_t):
    """Weights, row ends, output row offsets and the row mask of draft rows row0 .. row0 + s2.NP - 1 of sequence b,
    in the layouts of one part's wgmma (columns n = row * H + head, rows counted from row0)."""
    tc = cols // s2.H + row0
    wts = gl.load(p.w_ptr + (b64 * s2.NEXT_N + tc) * p.stride_w + cols % s2.H, mask=tc < s2.NEXT_N, other=0.0)
    t = offs_t + row0
    ends = _row_ends(p, b, t, s2.NEXT_N)
    out_rows = gl.expand_dims((b64 * s2.NEXT_N + t) * p.stride_out, 0)
    return gl.expand_dims(wts, 0), gl.expand_dims(ends, 0), out_rows, gl.expand_dims(t < s2.NEXT_N, 0)


@gluon.jit
def _q_part(q, qs, j, PARTS: gl.constexpr):
    """Part j of q slot qs as a wgmma's B operand: buffer qs * PARTS + j, [MMA_N, D], K-major."""
    return q.smem.index(qs * PARTS + j).permute((1, 0))


@gluon.jit
def _blocks_in_parts(p, s, q, qs, q_phase, kv, sc_smem, WG: gl.constexpr, b, u0, u1, seg_hi, c):
    """Math warpgroup WG's blocks of sequence b's segment [u0, u1) (MMA_N): each block's draft rows in PARTS parts of
    PR = MMA_N / H rows, one wgmma each, part j + 1's wgmma issued before part j's epilogue, so the tensor cores
    work on one part while the warpgroup finishes the other; two accumulators of MMA_N columns in registers (AHEAD;
    without it one part at a time, the other warpgroups' wgmmas beside its epilogue).
    Only the parts that hold rows below next_n run (next_n 3 at PR 1: three wgmmas of N 64 where one wgmma would
    take N 256). The rows' weights and ends stay in registers while they take at most 64 a thread (PARTS x MMA_N <=
    256); past that each part reloads them (a few hundred bytes, from L1) before its wgmma wait. Returns the
    program's block count after the segment."""
    H: gl.constexpr = s.H
    BS: gl.constexpr = s.BS
    MN: gl.constexpr = s.MMA_N
    PR: gl.constexpr = MN // H
    PARTS: gl.constexpr = _parts(s)
    HOLD: gl.constexpr = PARTS * MN <= 256
    s2 = Shape(s.NEXT_N, H, s.D, BS, PR, s.STAGES, s.SUBS, s.CLEAN, False, s.MATH_WG, False, MN, True, s.PTX_SLOTS,
               s.FULL_AT, s.EMPTY_AT, s.LOADERS)
    mma2: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, MN, 32])
    acc2 = gl.zeros([BS, MN], gl.float32, layout=mma2)
    red2: gl.constexpr = _head_sum(acc2, acc2, s2).type.layout
    cols2 = gl.arange(0, MN, layout=gl.SliceLayout(0, mma2))
    offs_t2 = gl.arange(0, PR, layout=gl.SliceLayout(0, red2))
    offs_k2 = gl.arange(0, BS, layout=gl.SliceLayout(1, red2))
    b64 = b.to(gl.int64)
    if HOLD:
        held = ()
        for j in gl.static_range(PARTS):
            held = held + (_rows_of_part(p, s2, b, b64, j * PR, cols2, offs_t2), )
    mbarrier.wait(q.full.index(qs), q_phase)
    n_seg = (u1 - u0 + s.SUBS - 1) // s.SUBS
    for k in range((WG - c % s.MATH_WG + s.MATH_WG) % s.MATH_WG, n_seg, s.MATH_WG):
        u = u0 + k * s.SUBS
        st, tok, sc = _issue_block(c + k, s, kv, sc_smem, _q_part(q, qs, 0, PARTS), acc2, gl.SliceLayout(1, red2))
        for j in gl.static_range(PARTS):
            if s.AHEAD and j + 1 < PARTS:
                nxt = warpgroup_mma(kv.smem.index(st), _q_part(q, qs, j + 1, PARTS), acc2, use_acc=False,
                                    is_async=True)
            if HOLD:
                w2j, ends2j, rows_j, ok_j = held[j]
            else:
                w2j, ends2j, rows_j, ok_j = _rows_of_part(p, s2, b, b64, j * PR, cols2, offs_t2)
            if s.AHEAD and j + 1 < PARTS:
                done = warpgroup_mma_wait(num_outstanding=1, deps=(tok, ))
            else:
                done = warpgroup_mma_wait(num_outstanding=0, deps=(tok, ))
            if j + 1 == PARTS:
                release_slot(kv, st, s.PTX_SLOTS, s.EMPTY_AT)  # slot st: every part and the scales are read
            _store_block(p, s2, done, w2j, sc, u, offs_k2, ends2j, rows_j, ok_j, seg_hi)
            if j + 1 < PARTS:
                if s.AHEAD:
                    tok = nxt
                else:
                    tok = warpgroup_mma(kv.smem.index(st), _q_part(q, qs, j + 1, PARTS), acc2, use_acc=False,
                                        is_async=True)
    return c + n_seg


@gluon.jit
def _math_partition(p, s, w, q, kv, sc_smem, WG: gl.constexpr):
    """Math warpgroup WG of MATH_WG: for each of its cache blocks (block c of the program when c % MATH_WG == WG) one
    wgmma for all draft rows (or one per part: MMA_N), the fp32 epilogue and the store. Every warpgroup waits for and
    releases each q slot."""
    H: gl.constexpr = s.H
    NP: gl.constexpr = s.NP
    BS: gl.constexpr = s.BS
    NPH: gl.constexpr = NP * H
    out_ty: gl.constexpr = p.out_ptr.dtype.element_ty
    if s.MMA_N == 0:
        mma_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                             instr_shape=[16, NPH, 32])
        acc = gl.zeros([BS, NPH], gl.float32, layout=mma_layout)
        red_layout: gl.constexpr = _head_sum(acc, acc, s).type.layout
        t_layout: gl.constexpr = gl.SliceLayout(0, red_layout)
        k_layout: gl.constexpr = gl.SliceLayout(1, red_layout)
        cols = gl.arange(0, NPH, layout=gl.SliceLayout(0, mma_layout))
        offs_t = gl.arange(0, NP, layout=t_layout)
        offs_k = gl.arange(0, BS, layout=k_layout)
    else:
        t_layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    c = 0  # the program's blocks so far (this warpgroup's among them: c % MATH_WG == WG): _slot(c, s)
    i = 0  # sequences consumed: q slot i % 2, use i // 2
    if s.SPLIT_INSIDE:
        w = _work(p, s)
    for b in range(w.b_lo, gl.minimum(w.b_end + 1, p.batch)):
        u0, u1, seg_hi = _segment(p, s, w, b, t_layout)
        if u0 < u1:
            qs, qph = slot_phase(i, 2)
            if s.MMA_N != 0:
                c = _blocks_in_parts(p, s, q, qs, qph, kv, sc_smem, WG, b, u0, u1, seg_hi, c)
            else:
                b64 = b.to(gl.int64)
                if s.Q_IN_LANES:  # column n: draft row (n % 8) // R, head (n // 8) * R + n % R, R = 8 / NP
                    tc = (cols % 8) // (8 // NP)
                    th = (cols // 8) * (8 // NP) + cols % (8 // NP)
                else:
                    tc = cols // H
                    th = cols % H
                wts = gl.load(p.w_ptr + (b64 * s.NEXT_N + tc) * p.stride_w + th, mask=tc < s.NEXT_N, other=0.0)
                w2 = gl.expand_dims(wts, 0)
                ends2 = gl.expand_dims(_row_ends(p, b, offs_t, s.NEXT_N), 0)
                out_rows = gl.expand_dims((b64 * s.NEXT_N + offs_t) * p.stride_out, 0)  # int64 [1, NP]
                t_ok = gl.expand_dims(offs_t < s.NEXT_N, 0)
                mbarrier.wait(q.full.index(qs), qph)
                q_t = q.smem.index(qs).reshape([NPH, s.D]).permute((1, 0))  # [D, NPH], K-major B operand
                if s.PIPE:
                    # Two accumulators in fixed roles (A: even blocks, B: odd), so no register copy of an in-flight
                    # wgmma: block n+1's wgmma runs on the tensor cores while block n's epilogue runs.
                    st_a, tok_a, sc_a = _issue_block(c, s, kv, sc_smem, q_t, acc, k_layout)
                    c += 1
                    for u in range(u0, u1, 2 * s.SUBS):
                        ub = u + s.SUBS
                        if ub < u1:
                            st_b, tok_b, sc_b = _issue_block(c, s, kv, sc_smem, q_t, acc, k_layout)
                            c += 1
                            done_a = warpgroup_mma_wait(num_outstanding=1, deps=(tok_a, ))
                            release_slot(kv, st_a, s.PTX_SLOTS, s.EMPTY_AT)
                            _store_block(p, s, done_a, w2, sc_a, u, offs_k, ends2, out_rows, t_ok, seg_hi)
                            ua = ub + s.SUBS
                            if ua < u1:
                                st_a, tok_a, sc_a = _issue_block(c, s, kv, sc_smem, q_t, acc, k_layout)
                                c += 1
                                done_b = warpgroup_mma_wait(num_outstanding=1, deps=(tok_b, ))
                            else:
                                done_b = warpgroup_mma_wait(num_outstanding=0, deps=(tok_b, ))
                            release_slot(kv, st_b, s.PTX_SLOTS, s.EMPTY_AT)
                            _store_block(p, s, done_b, w2, sc_b, ub, offs_k, ends2, out_rows, t_ok, seg_hi)
                        else:
                            done_a = warpgroup_mma_wait(num_outstanding=0, deps=(tok_a, ))
                            release_slot(kv, st_a, s.PTX_SLOTS, s.EMPTY_AT)
                            _store_block(p, s, done_a, w2, sc_a, u, offs_k, ends2, out_rows, t_ok, seg_hi)
                else:
                    # The program's blocks of this segment are c_seg .. c_seg + n_seg - 1 (block k at token
                    # u0 + k*SUBS); this warpgroup takes those with (c_seg + k) % MATH_WG == WG.
                    n_seg = (u1 - u0 + s.SUBS - 1) // s.SUBS
                    c_seg = c
                    for k in range((WG - c_seg % s.MATH_WG + s.MATH_WG) % s.MATH_WG, n_seg, s.MATH_WG):
                        st, tok, sc = _issue_block(c_seg + k, s, kv, sc_smem, q_t, acc, k_layout)
                        done = warpgroup_mma_wait(num_outstanding=0, deps=(tok, ))
                        release_slot(kv, st, s.PTX_SLOTS, s.EMPTY_AT)  # slot st: the tile and its scales are read
                        _store_block(p, s, done, w2, sc, u0 + k * s.SUBS, offs_k, ends2, out_rows, t_ok, seg_hi)
                    c = c_seg + n_seg
            mbarrier.arrive(q.empty.index(qs), count=1)
            i += 1

    if s.CLEAN:
        # Dead tails [largest row end of the sequence, max_context_len), in FILL-column pieces over all programs.
        fl: gl.constexpr = gl.BlockedLayout([4], [32], [4], [0])
        cols_f = gl.arange(0, FILL, layout=fl)
        neg = gl.full([FILL], float("-inf"), out_ty, layout=fl)
        t_all = gl.arange(0, NP, layout=fl)
        n_chunks = gl.cdiv(p.max_context_len, FILL)
        pid = gl.program_id(0) * s.MATH_WG + WG
        nprog = gl.num_programs(0) * s.MATH_WG
        for item in range(pid, p.batch * s.NEXT_N * n_chunks, nprog):
            r = item // n_chunks
            c0 = (item - r * n_chunks) * FILL
            ends = _row_ends(p, r // s.NEXT_N, t_all, s.NEXT_N)
            hi = gl.minimum(gl.max(ends, axis=0), p.max_context_len)
            if hi < c0 + FILL:
                col = c0 + cols_f
                gl.store(p.out_ptr + r.to(gl.int64) * p.stride_out + col, neg,
                         mask=(col >= hi) & (col < p.max_context_len))


@gluon.jit(repr=make_kernel_repr("paged_mqa_logits_ws_sm90", KEYS))
def paged_mqa_logits_ws_sm90(
    q_desc,  # TMA descriptor: fp8 q viewed [B*NEXT_N*H, D], block [NP*H, D]; Q_IN_LANES: viewed
    # [H/R, B*NEXT_N, R, D] (strides R*D, H*D, D, 1; R = 8 / NP), block [H/R, NP, R, D]
    kv_desc,  # TMA descriptor: the cache's fp8 rows [blocks*RPB, D], block [BS, D]
    sc_desc,  # TMA descriptor: the cache's fp32 scales [blocks, BS] (row stride stride_kv_block / 4), block [1, BS]
    w_ptr,  # fp32 [B*NEXT_N, H], heads contiguous
    ctx_ptr,  # int32 [B] or [B, NEXT_N]
    table_ptr,  # int32 [B, max_blocks], blocks contiguous
    meta_ptr,  # int32 [P + 1, 2] contiguous: (sequence, block) where each range starts (unused: SELF_SCHEDULE)
    out_ptr,  # fp32 or bf16 [B*NEXT_N, >= max_context_len], row stride stride_out
    batch,
    max_context_len,
    rows_per_block,  # RPB = stride_kv_block / D
    stride_w,
    stride_ctx_b, stride_ctx_t,  # stride_ctx_t = 0 for 1-D context lens
    ctx_causal,  # 1: 1-D context lens (row t ends at ctx - NEXT_N + t + 1); 0: 2-D
    stride_table,
    stride_out,
    table_cols,  # entries of a block-table row: the producer reads none past them
    NEXT_N: gl.constexpr,
    H: gl.constexpr,
    D: gl.constexpr,
    BS: gl.constexpr,
    NP: gl.constexpr,
    STAGES: gl.constexpr,
    SUBS: gl.constexpr,
    CLEAN: gl.constexpr,
    SELF_SCHEDULE: gl.constexpr,
    PIPE: gl.constexpr,  # two accumulators per math warpgroup (epilogue of block n beside the wgmma of block n+1)
    MATH_WG: gl.constexpr,  # math warpgroups per program (1-4), taking the program's blocks in turn
    MATH_REGS: gl.constexpr,  # registers per thread of math warpgroups 1.. (setmaxnreg; warpgroup 0 gets the rest)
    SMALL_REGS: gl.constexpr,  # registers per thread of the producer warp
    Q_IN_LANES: gl.constexpr = False,  # draft rows spread over the lanes of a quad (see _head_sum)
    MMA_N: gl.constexpr = 0,  # columns per wgmma, a block's draft rows in parts of MMA_N / H (0: one wgmma of NP * H)
    AHEAD: gl.constexpr = True,  # parts: the next part's wgmma issued before a part's epilogue
    PTX_SLOTS: gl.constexpr = False,  # ring slots waited for and released in PTX: no warpgroup barrier per block
    FULL_AT: gl.constexpr = -1,  # PTX_SLOTS: offset of the kv full barriers (mqa_cli.launch.barrier_offsets resolves it)
    EMPTY_AT: gl.constexpr = -1,  # PTX_SLOTS: and of the empty barriers
    LOADERS: gl.constexpr = 1,  # producer warps: 1, or 4 at MATH_WG 4 (one per math warpgroup's ring; _load_partition)
    DESC_PARAMS: gl.constexpr = "",  # the TMA descriptors' parameter symbols (mqa_cli.launch.paged_ws_sm90 sets them)
    SPLIT_INSIDE: gl.constexpr = False,  # the computed split: by each partition after warp_specialize (_work)
):
    gl.static_assert(gl.num_warps() == 4, "the default partition is one math warpgroup")
    gl.static_assert(BS == 64, "a cache block = one warpgroup's 64 MMA rows")
    gl.static_assert((not Q_IN_LANES) | (NP <= 4), "Q_IN_LANES: at most 4 draft rows (one per lane of a quad)")
    p = Decode(w_ptr, ctx_ptr, table_ptr, out_ptr, batch, max_context_len, rows_per_block, stride_w, stride_ctx_b,
               stride_ctx_t, ctx_causal, stride_table, stride_out, meta_ptr, table_cols)
    gl.static_assert((MATH_WG == 1) | (not PIPE), "two accumulators (PIPE) with one math warpgroup per program")
    gl.static_assert((MMA_N == 0) | ((MMA_N % H == 0) & (MMA_N <= 128) & (not PIPE) & (not Q_IN_LANES)),
                     "MMA_N: a multiple of H up to 128 (two accumulators in flight), without PIPE or Q_IN_LANES")
    gl.static_assert((MMA_N != 0) | (NP * H <= 256), "NP * H past one wgmma's 256 columns needs MMA_N")
    gl.static_assert((not PTX_SLOTS) | ((FULL_AT >= 0) & (EMPTY_AT >= 0)), "PTX_SLOTS needs FULL_AT and EMPTY_AT")
    gl.static_assert(((MATH_WG == 4) & (LOADERS == 4)) | ((MATH_WG != 4) & (LOADERS == 1)),
                     "one producer warp, or one per math warpgroup at four")
    s = Shape(NEXT_N, H, D, BS, NP, STAGES, SUBS, CLEAN, PIPE, MATH_WG, Q_IN_LANES, MMA_N, AHEAD, PTX_SLOTS,
              FULL_AT, EMPTY_AT, LOADERS, SELF_SCHEDULE, SPLIT_INSIDE)
    gl.static_assert(DESC_PARAMS != "", "the descriptor prefetch needs DESC_PARAMS (the launcher names the parameters)")
    _prefetch_descriptors(_descriptor_prefetch_asm(DESC_PARAMS))
    _prefetch_table(p, BS)
    if s.SPLIT_INSIDE:  # each partition computes its range after warp_specialize: the rings' setup and the
        zero = gl.to_tensor(0)  # partitions' start run under the first loads' latency instead of after them
        w = Work(zero, zero, zero, zero, zero)  # not read
    else:
        w = _work(p, s)

    q, kv, sc_smem = _rings(s, q_desc, kv_desc, sc_desc)

    if MATH_WG == 1:
        gl.warp_specialize([(_math_partition, (p, s, w, q, kv, sc_smem, 0)),
                            (_load_partition, (p, s, w, q, kv, sc_smem, q_desc, kv_desc, sc_desc))],
                           [1], [SMALL_REGS])
    elif MATH_WG == 2:
        gl.warp_specialize([(_math_partition, (p, s, w, q, kv, sc_smem, 0)),
                            (_math_partition, (p, s, w, q, kv, sc_smem, 1)),
                            (_load_partition, (p, s, w, q, kv, sc_smem, q_desc, kv_desc, sc_desc))],
                           [4, 1], [MATH_REGS, SMALL_REGS])
    elif MATH_WG == 3:
        gl.warp_specialize([(_math_partition, (p, s, w, q, kv, sc_smem, 0)),
                            (_math_partition, (p, s, w, q, kv, sc_smem, 1)),
                            (_math_partition, (p, s, w, q, kv, sc_smem, 2)),
                            (_load_partition, (p, s, w, q, kv, sc_smem, q_desc, kv_desc, sc_desc))],
                           [4, 4, 1], [MATH_REGS, MATH_REGS, SMALL_REGS])
    else:  # four math warpgroups, each fed by its own producer warp
        gl.static_assert(MATH_WG == 4, "1 to 4 math warpgroups")
        gl.warp_specialize([(_math_partition, (p, s, w, q, kv, sc_smem, 0)),
                            (_math_partition, (p, s, w, q, kv, sc_smem, 1)),
                            (_math_partition, (p, s, w, q, kv, sc_smem, 2)),
                            (_math_partition, (p, s, w, q, kv, sc_smem, 3)),
                            (_load_partition, (p, s, w, q, kv, sc_smem, q_desc, kv_desc, sc_desc, 0)),
                            (_load_partition, (p, s, w, q, kv, sc_smem, q_desc, kv_desc, sc_desc, 1)),
                            (_load_partition, (p, s, w, q, kv, sc_smem, q_desc, kv_desc, sc_desc, 2)),
                            (_load_partition, (p, s, w, q, kv, sc_smem, q_desc, kv_desc, sc_desc, 3))],
                           [4, 4, 4, 1, 1, 1, 1],
                           [MATH_REGS, MATH_REGS, MATH_REGS, SMALL_REGS, SMALL_REGS, SMALL_REGS, SMALL_REGS])
