"""Hopper (sm90) paged decode kernel in Gluon, warp-specialised: fp8 MQA logits of next_n draft rows against a
paged fp8 kv cache, streaming whole cache blocks through TMA.

Grid: P ranges x SUBS programs. Range p is the (sequence, cache block) work from entry p of the schedule to entry
p + 1 (get_paged_mqa_logits_metadata's split, read from it or computed by the program itself: SELF_SCHEDULE, while
the L2 is asked for the block table's rows); sub-program j of a range takes blocks j, j + SUBS, ... of each of its
sequence segments, so SUBS programs share an SM and each one's math overlaps the others' loads. The range is found
before warp_specialize, or (SPLIT_INSIDE, the computed split only) by each partition after it, so that the rings'
setup runs while the first loads are in flight (a small decode step is a chain of dependent round trips).

Partitions: the producer warp (at four math warpgroups one per warpgroup, LOADERS) issues by TMA each sequence's q
and each block's fp8 rows [BS, D] and fp32 scales [BS] into the ring of the math warpgroup that takes the block
(Loader; block c goes to warpgroup c % MATH_WG: Blocks). A math warpgroup does per block one wgmma
[BS, D] x [D, NP*H] (kv = M, A operand; draft rows x heads = N, B operand from q's slot), so each kv byte is read
once for all next_n rows, then relu, x weight, head sum, x kv scale, the -inf mask past each row's end (CLEAN) and
the [BS, NP] store, in one of three schedules: plain; PIPE (two accumulators: a block's epilogue beside the next
block's wgmma); parts (MMA_N: a block's draft rows in parts of MMA_N / H rows, one wgmma and one q box each, so that
rows past next_n are not computed and next_n x H may pass one wgmma's 256 columns).

Cache layout (DeepGEMM's): block i starts at byte i * stride_kv_block and holds BS*D fp8 bytes (token-major), then
BS fp32 scales; the launcher describes it as fp8 rows [blocks * RPB, D] (RPB = stride_kv_block / D; block i's tokens
are rows i*RPB ..) and fp32 scales [blocks, BS] at byte BS*D, row stride stride_kv_block / 4. Row (b, t) ends at
ctx[b] - NEXT_N + t + 1 (1-D context lens) or ctx[b, t] (2-D); tokens at or past a sequence's largest row end are
never read. CLEAN: [end, largest end) is written -inf by the tile, [largest end, max_context_len) by a fill spread
over all programs after their blocks.

No metadata makes it fault or hang: a given schedule's entries are clamped as the portable kernel clamps them (any
schedule's ranges cover every token), and the producer reads no block-table entry past a row's table_cols. A block
id is not clamped: the TMA unit bounds every box by the descriptors (zeros outside), so a bad id loads zeros or
some block of the cache, never memory outside it (docs/DESIGN-NOTES.md).

mbarrier phases as in mqa_kernels.common.gluon_ring; each kv slot belongs to one warpgroup, which takes its fills in
order, so a parity wait cannot match a fill two behind. PTX_SLOTS: the math warpgroups wait for and release a slot in
PTX at the ring barriers' offsets (FULL_AT, EMPTY_AT: mqa_cli.launch.barrier_offsets), every thread arriving (empty
count 128), without the warpgroup barrier triton's own ops put before each wait and each elected release.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, warpgroup_mma, \
    warpgroup_mma_wait
from triton.experimental.gluon.language.nvidia.hopper.tma import tensor_descriptor
from triton.language.core import _aggregate as aggregate

from ...common import gluon_compat as compat
from ...common.gluon_heads import lane_head_sum, quad_head_sum
from ...common.gluon_ring import Counter, Ring, Scalar, by_position, release_slot, ring, wait_slot
from ...common.naming import make_kernel_repr
from . import KEYS

IDS = gl.constexpr(32)  # block-table entries the producer reads per vector load (one per lane)
FILL = gl.constexpr(1024)  # columns per -inf fill item (CLEAN)
SPLIT_CHUNK = gl.constexpr(256)  # sequences per step of the in-kernel schedule's scans


# ---- Arguments and shape ----
@aggregate
@by_position
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


@aggregate
@by_position
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
    SPLIT_INSIDE: gl.constexpr  # the computed split: by each partition itself, after warp_specialize (_work)
    OPAQUE: gl.constexpr  # a given schedule's first sequence through an opaque move at three warpgroups (_work)


@aggregate
@by_position
class Work:
    """This program's range of (sequence, block) work: from (b_lo, u_lo) to (b_end, u_end), blocks j mod SUBS."""
    b_lo: gl.tensor
    u_lo: gl.tensor
    b_end: gl.tensor
    u_end: gl.tensor
    j: gl.tensor


@gluon.constexpr_function
def _parts(s):
    """Wgmmas per cache block: 1, or (MMA_N) the parts of MMA_N / H rows that hold rows below next_n (config.parts)."""
    if s.MMA_N == 0:
        return 1
    pr = s.MMA_N // s.H
    return (s.NEXT_N + pr - 1) // pr


# ---- Ring positions ----
@aggregate
@by_position
class Blocks:
    """The kv ring's position: the program's blocks so far (c). Block c goes to math warpgroup c % MATH_WG, which has
    its own STAGES slots and takes its blocks in order (a slot's fills are waited for in order, by one warpgroup)."""
    c: gl.tensor
    MATH_WG: gl.constexpr
    STAGES: gl.constexpr

    @gluon.jit
    def slot(self, k=0):
        """Ring slot and fill parity of block c + k (unsigned: a power-of-two MATH_WG or STAGES is a shift)."""
        u = (self.c + k).to(gl.uint32)
        n = u // self.MATH_WG
        return ((u % self.MATH_WG) * self.STAGES + n % self.STAGES).to(gl.int32), ((n // self.STAGES) & 1).to(gl.int32)

    @gluon.jit
    def first(self, WG: gl.constexpr):
        """k of warpgroup WG's first block from here."""
        return (WG - self.c % self.MATH_WG + self.MATH_WG) % self.MATH_WG

    @gluon.jit
    def after(self, n):
        """The position n blocks on."""
        return Blocks(self.c + n, self.MATH_WG, self.STAGES)


# ---- The program's range ----
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
    """Cache blocks of sequences bidx, the metadata's rule: cdiv(largest context, BS), a negative one as 0; clamped to
    max_context_len, so the batch's sum stays below 2^31 (dispatch keeps batch x its blocks there): int32."""
    e = gl.zeros_like(bidx)
    for t in gl.static_range(NEXT_N):
        e = gl.maximum(e, gl.load(p.ctx_ptr + bidx.to(gl.int64) * p.stride_ctx_b + t * p.stride_ctx_t,
                                  mask=ok, other=0))
    e = gl.minimum(e, p.max_context_len)
    return (e + (BS - 1)) // BS


@gluon.jit
def _locate(incl, ok, target, seq, before):
    """Fold one chunk of inclusive block prefixes into the search for `target`: its sequence is the count of prefixes
    ending at or before it, the blocks before that sequence the largest such prefix (two independent reductions)."""
    done = ok & (incl <= target)
    return seq + gl.sum(done.to(gl.int32), axis=0), gl.maximum(before, gl.max(gl.where(done, incl, 0), axis=0))


@gluon.jit
def _split_points(p, r, P, NEXT_N: gl.constexpr, BS: gl.constexpr):
    """Entries r and r + 1 of get_paged_mqa_logits_metadata, computed by the program itself: entry e is the sequence
    b with cum_before(b) <= t_e < cum_before(b) + blocks(b), t_e = floor(e * total / P), and the block offset
    t_e - cum_before(b); (batch, 0) when t_e = total. Latency is what it costs (a decode step waits for it): the first
    SPLIT_CHUNK context lengths stay in registers (one round trip; more add two passes over the rest, from L2); int32
    arithmetic (t_e = r * (total // P) + r * (total % P) // P); total and prefixes from one scan; each entry from two
    reductions side by side; every warp holds the whole chunk, so no CTA barrier before the hand-off."""
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
def _max4(a0, b0, c0, d0, a1, b1, c1, d1):
    return gl.maximum(a0, a1), gl.maximum(b0, b1), gl.maximum(c0, c1), gl.maximum(d0, d1)


@gluon.jit
def _through_shared(a, b, c, d):
    """The split's four scalars (equal in every thread) read back by a cross-warp reduction of one element a warp (one
    shared-memory address): what derives from them then stays in uniform registers (docs/DESIGN-NOTES.md)."""
    lay: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    z = gl.zeros([gl.num_warps()], gl.int32, layout=lay)
    return gl.reduce((z + a, z + b, z + c, z + d), 0, _max4)


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
        # Any schedule, safely: entry 0 is (0, 0) and entry P (batch, 0) whatever they hold, the others clamped into
        # [0, batch] x [0, blocks of max_context_len]: the ranges cover every token, an empty one does nothing.
        top = gl.cdiv(p.max_context_len, s.BS)
        last = r + 1 == n_ranges
        b_lo = gl.where(r == 0, 0, gl.minimum(gl.maximum(gl.load(p.meta + 2 * r), 0), p.batch))
        u_lo = gl.where(r == 0, 0, gl.minimum(gl.maximum(gl.load(p.meta + 2 * r + 1), 0), top))
        b_end = gl.where(last, p.batch, gl.minimum(gl.maximum(gl.load(p.meta + 2 * r + 2), 0), p.batch))
        u_end = gl.where(last, 0, gl.minimum(gl.maximum(gl.load(p.meta + 2 * r + 3), 0), top))
        if s.OPAQUE and s.MATH_WG == 3:
            # the first sequence through an opaque move: batch 1 compiles the sequence loop as other batches do
            # (docs/CODEGEN.md); buys 5-25 % at batch 1 next_n 5-7 on triton 3.6, 3-5 % at next_n 5 on 3.9 (H100)
            b_lo = _opaque_i32(b_lo)
    return Work(b_lo, u_lo, b_end, u_end, j)


# ---- Prefetch at entry ----
@gluon.jit
def _prefetch_table(p, BS: gl.constexpr):
    """Ask the L2 for the block table's live ids before the split is known (program i: row i, one 32-id piece per
    thread), so that each program's first block-table read meets the L2: one round trip off a small decode step's
    chain (context lengths, split, block ids, cache blocks). No division: it goes ahead of the split's loads."""
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


# ---- Producer: TMA loads ----
@aggregate
@by_position
class Loader:
    """The program's TMA traffic: the shared memory (q slots, kv ring, its scales) and the three descriptors that fill
    it, set up before warp_specialize; the producer issues the copies, the math warpgroups read the slots."""
    q: Ring  # 2 slots of one TMA box (or, MMA_N, of PARTS boxes: slot i's part j in buffer i * PARTS + j)
    kv: Ring  # STAGES slots per math warpgroup, each [BS, D] fp8 rows
    sc: gl.shared_memory_descriptor  # and their [1, BS] fp32 scales
    q_desc: tensor_descriptor
    kv_desc: tensor_descriptor
    sc_desc: tensor_descriptor

    @gluon.jit
    def create(s, q_desc, kv_desc, sc_desc):
        """The shared memory and its barriers, initialised and fenced: q slots released by every math warpgroup
        (empty count MATH_WG), kv slots by one thread of their warpgroup (PTX_SLOTS: by every thread)."""
        q = ring(gl.allocate_shared_memory(q_desc.dtype, [2 * _parts(s)] + q_desc.block_type.shape, q_desc.layout),
                 s.MATH_WG, 2)
        SLOTS: gl.constexpr = s.STAGES * s.MATH_WG
        kv = ring(gl.allocate_shared_memory(kv_desc.dtype, [SLOTS] + kv_desc.block_type.shape, kv_desc.layout),
                  128 if s.PTX_SLOTS else 1)
        sc = gl.allocate_shared_memory(sc_desc.dtype, [SLOTS] + sc_desc.block_type.shape, sc_desc.layout)
        fence_async_shared()
        return Loader(q, kv, sc, q_desc, kv_desc, sc_desc)

    @gluon.jit
    def load_q(self, s, b, qs, qph):
        """Sequence b's q into slot qs once its last use is released: one box of NP * H rows, or (MMA_N) one of
        MMA_N rows per part, or (Q_IN_LANES) a box of the [H / R, B * next_n, R, D] view."""
        mbarrier.wait(self.q.empty.index(qs), qph ^ 1)
        if s.Q_IN_LANES:
            mbarrier.expect(self.q.full.index(qs), self.q_desc.block_type.nbytes)
            compat.async_load(self.q_desc, [0, b * s.NEXT_N, 0, 0], self.q.full.index(qs), self.q.smem.index(qs))
        else:
            PARTS: gl.constexpr = _parts(s)
            QBOX: gl.constexpr = self.q_desc.block_type.shape[0]
            mbarrier.expect(self.q.full.index(qs), PARTS * self.q_desc.block_type.nbytes)
            for part in gl.static_range(PARTS):
                compat.async_load(self.q_desc, [b * (s.NEXT_N * s.H) + part * QBOX, 0], self.q.full.index(qs),
                                  self.q.smem.index(qs * PARTS + part))

    @gluon.jit
    def load_block(self, blk, rows_per_block, st, ph):
        """Cache block blk (its fp8 rows and its scales) into kv slot st once its last fill is released."""
        mbarrier.wait(self.kv.empty.index(st), ph ^ 1)
        mbarrier.expect(self.kv.full.index(st), self.kv_desc.block_type.nbytes + self.sc_desc.block_type.nbytes)
        compat.async_load(self.kv_desc, [blk * rows_per_block, 0], self.kv.full.index(st), self.kv.smem.index(st))
        compat.async_load(self.sc_desc, [blk, 0], self.kv.full.index(st), self.sc.index(st))


@gluon.jit
def _load_segment(p, s, ld, at, L: gl.constexpr, b, u0, n, offs):
    """Producer warp L's blocks of sequence b's segment: the program's n blocks from `at` (block k at token
    u0 + k * SUBS), every one (one producer) or those of math warpgroup L (one producer per warpgroup)."""
    STEP: gl.constexpr = s.MATH_WG if s.LOADERS > 1 else 1  # blocks of the program between two of this warp's
    k0 = 0  # the segment's first block this warp issues, and how many
    if STEP > 1:
        k0 = at.first(L)
    m = gl.maximum(n - k0 + STEP - 1, 0) // STEP
    row = p.table_ptr + b.to(gl.int64) * p.stride_table + u0 + k0 * s.SUBS
    at = at.after(k0)
    # ids[i] is the table's column u0 + k0 * SUBS + i * STEP * SUBS: none past the row's table_cols is read (0: block
    # 0 is loaded there; ids out of range are left to the TMA unit's bounds). One bound per segment: plain loads.
    GAP: gl.constexpr = STEP * s.SUBS
    m_in = gl.minimum(m, gl.maximum(p.table_cols - (u0 + k0 * s.SUBS) + (GAP - 1), 0) // GAP)
    ids = gl.load(row + offs * GAP, mask=offs < m_in, other=0)
    for j0 in range(0, m, IDS):
        nxt = gl.load(row + (j0 + IDS + offs) * GAP, mask=j0 + IDS + offs < m_in, other=0)
        for j in range(0, gl.minimum(IDS, m - j0)):
            blk = gl.sum(gl.where(offs == j, ids, 0), axis=0)
            st, ph = at.slot((j0 + j) * STEP)
            ld.load_block(blk, p.rows_per_block, st, ph)
        ids = nxt


@gluon.jit
def _load_partition(p, s, w, ld, L: gl.constexpr = 0):
    """TMA producer warp L of s.LOADERS: q of each sequence with work here (warp 0), then the cache blocks of the
    math warpgroups it feeds: every block (one producer), or those of warpgroup L alone (one per warpgroup)."""
    lay: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    offs = gl.arange(0, IDS, layout=lay)
    at = Blocks(gl.to_tensor(0), s.MATH_WG, s.STAGES)
    qs_at = Counter(gl.to_tensor(0), 2)  # sequences issued
    if s.SPLIT_INSIDE:
        w = _work(p, s)
    for b in range(w.b_lo, gl.minimum(w.b_end + 1, p.batch)):
        u0, u1, seg_hi = _segment(p, s, w, b, lay)
        if u0 < u1:
            if L == 0:
                qs, qph = qs_at.slot()
                ld.load_q(s, b, qs, qph)
                qs_at = qs_at.next()
            n = (u1 - u0 + s.SUBS - 1) // s.SUBS  # this program's blocks of the segment
            _load_segment(p, s, ld, at, L, b, u0, n, offs)
            at = at.after(n)


# ---- Block epilogue ----
@aggregate
@by_position
class Rows:
    """One sequence's draft rows as a wgmma's epilogue reads them ([1, N] weights; [1, NP] row ends, output row
    offsets (int64) and the mask of rows below next_n)."""
    w: gl.tensor
    ends: gl.tensor
    out: gl.tensor
    ok: gl.tensor


@gluon.jit
def _rows(p, s, b, b64, row0, cols, offs_t):
    """Rows row0 .. row0 + s.NP - 1 of sequence b, in the layouts of a wgmma of columns `cols`: column n holds draft
    row n // H and head n % H from row0, or (Q_IN_LANES, R = 8 / NP) row (n % 8) // R and head (n // 8) * R + n % R."""
    if s.Q_IN_LANES:
        tc = (cols % 8) // (8 // s.NP)
        th = (cols // 8) * (8 // s.NP) + cols % (8 // s.NP)
        wts = gl.load(p.w_ptr + (b64 * s.NEXT_N + tc) * p.stride_w + th, mask=tc < s.NEXT_N, other=0.0)
    else:
        tc = cols // s.H + row0
        wts = gl.load(p.w_ptr + (b64 * s.NEXT_N + tc) * p.stride_w + cols % s.H, mask=tc < s.NEXT_N, other=0.0)
    t = offs_t + row0
    ends = _row_ends(p, b, t, s.NEXT_N)
    out = gl.expand_dims((b64 * s.NEXT_N + t) * p.stride_out, 0)
    return Rows(gl.expand_dims(wts, 0), gl.expand_dims(ends, 0), out, gl.expand_dims(t < s.NEXT_N, 0))


@gluon.jit
def _issue_block(at, s, ld, q_t, acc, k_layout: gl.constexpr):
    """The program's block at.c: wait for its ring slot, start its wgmma with B operand q_t (all draft rows, or the
    first part), read its scales (each thread its own MMA rows', in the accumulator's row layout: no layout
    conversion, a store, barrier and load per block, between the wgmma and its epilogue)."""
    st, ph = at.slot()
    wait_slot(ld.kv, st, ph, s.PTX_SLOTS, s.FULL_AT)
    tok = warpgroup_mma(ld.kv.smem.index(st), q_t, acc, use_acc=False, is_async=True)
    return st, tok, ld.sc.index(st).reshape([s.BS]).load(k_layout)


@gluon.jit
def _head_sum(x, w, s):
    """[BS, NP * H] (wgmma accumulator layout, lane t of a quad holding columns 8j + 2t + {0, 1}) -> [BS, NP]: the
    sum over heads of x * w (x the relu'd scores, w the weights broadcast to x's shape), each lane's share as one FMA
    chain in the accumulator's order (lane_head_sum). Row-major columns (n = row * H + head) spread a draft row's heads
    over the 4 lanes: two shuffle rounds per sum (quad_head_sum). With Q_IN_LANES the q block is loaded (host: the
    [H / R, B * next_n, R, D] view, R = 8 / NP) so that column n holds draft row (n % 8) // R and head
    (n // 8) * R + n % R: at NP 4 each lane holds every head of its own row, at NP 2 a row's heads are in 2 lanes."""
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
def _store_block(p, s, acc, r, sc, u, offs_k, seg_hi):
    """relu, x weight, head sum, x kv scale, -inf past each row's end (CLEAN), store [BS, NP] of block u."""
    x, w = gl.broadcast(gl.maximum(acc, 0.0), r.w)
    lg = _head_sum(x, w, s) * gl.expand_dims(sc, 1)
    k2 = gl.expand_dims(u * s.BS + offs_k, 1)
    if s.CLEAN:
        lg = gl.where(k2 < r.ends, lg, float("-inf"))
    gl.store(p.out_ptr + r.out + k2, lg.to(p.out_ptr.dtype.element_ty), mask=r.ok & (k2 < seg_hi))


# ---- Block schedules: plain, PIPE, parts ----
@gluon.jit
def _blocks_plain(p, s, ld, at, WG: gl.constexpr, q_t, acc, r, u0, u1, seg_hi, offs_k, k_layout: gl.constexpr):
    """Plain: math warpgroup WG's blocks of the segment [u0, u1) (the program's block at.c + k at token u0 + k * SUBS,
    where (at.c + k) % MATH_WG == WG), one wgmma each, waited for before its epilogue. Returns the next position."""
    n_seg = (u1 - u0 + s.SUBS - 1) // s.SUBS
    for k in range(at.first(WG), n_seg, s.MATH_WG):
        st, tok, sc = _issue_block(at.after(k), s, ld, q_t, acc, k_layout)
        done = warpgroup_mma_wait(num_outstanding=0, deps=(tok, ))
        release_slot(ld.kv, st, s.PTX_SLOTS, s.EMPTY_AT)  # slot st: the tile and its scales are read
        _store_block(p, s, done, r, sc, u0 + k * s.SUBS, offs_k, seg_hi)
    return at.after(n_seg)


@gluon.jit
def _blocks_pipe(p, s, ld, at, q_t, acc, r, u0, u1, seg_hi, offs_k, k_layout: gl.constexpr):
    """PIPE (one math warpgroup): the segment's blocks on two accumulators in fixed roles (A: even blocks, B: odd), no
    register copy of an in-flight wgmma: block n+1's wgmma runs while block n's epilogue does. Returns the position."""
    st_a, tok_a, sc_a = _issue_block(at, s, ld, q_t, acc, k_layout)
    at = at.after(1)
    for u in range(u0, u1, 2 * s.SUBS):
        ub = u + s.SUBS
        if ub < u1:
            st_b, tok_b, sc_b = _issue_block(at, s, ld, q_t, acc, k_layout)
            at = at.after(1)
            done_a = warpgroup_mma_wait(num_outstanding=1, deps=(tok_a, ))
            release_slot(ld.kv, st_a, s.PTX_SLOTS, s.EMPTY_AT)
            _store_block(p, s, done_a, r, sc_a, u, offs_k, seg_hi)
            ua = ub + s.SUBS
            if ua < u1:
                st_a, tok_a, sc_a = _issue_block(at, s, ld, q_t, acc, k_layout)
                at = at.after(1)
                done_b = warpgroup_mma_wait(num_outstanding=1, deps=(tok_b, ))
            else:
                done_b = warpgroup_mma_wait(num_outstanding=0, deps=(tok_b, ))
            release_slot(ld.kv, st_b, s.PTX_SLOTS, s.EMPTY_AT)
            _store_block(p, s, done_b, r, sc_b, ub, offs_k, seg_hi)
        else:
            done_a = warpgroup_mma_wait(num_outstanding=0, deps=(tok_a, ))
            release_slot(ld.kv, st_a, s.PTX_SLOTS, s.EMPTY_AT)
            _store_block(p, s, done_a, r, sc_a, u, offs_k, seg_hi)
    return at


@gluon.jit
def _q_part(q, qs, j, PARTS: gl.constexpr):
    """Part j of q slot qs as a wgmma's B operand: buffer qs * PARTS + j, [MMA_N, D], K-major."""
    return q.smem.index(qs * PARTS + j).permute((1, 0))


@gluon.jit
def _blocks_in_parts(p, s, ld, qs, q_phase, at, WG: gl.constexpr, b, u0, u1, seg_hi):
    """Parts (MMA_N): math warpgroup WG's blocks of sequence b's segment [u0, u1), each block's draft rows in PARTS
    parts of PR = MMA_N / H rows, one wgmma each, part j + 1's issued before part j's epilogue (AHEAD: two accumulators
    of MMA_N columns; without it one part at a time). Only parts holding rows below next_n run (next_n 3 at PR 1:
    three wgmmas of N 64, not one of N 256). The rows stay in registers up to 64 a thread (PARTS x MMA_N <= 256),
    else each part reloads them (a few hundred bytes, from L1) before its wgmma wait."""
    MN: gl.constexpr = s.MMA_N
    PR: gl.constexpr = MN // s.H
    PARTS: gl.constexpr = _parts(s)
    HOLD: gl.constexpr = PARTS * MN <= 256
    s2 = Shape(s.NEXT_N, s.H, s.D, s.BS, PR, s.STAGES, s.SUBS, s.CLEAN, False, s.MATH_WG, False, MN, True,
               s.PTX_SLOTS, s.FULL_AT, s.EMPTY_AT, s.LOADERS, s.SELF_SCHEDULE, s.SPLIT_INSIDE, s.OPAQUE)
    mma2: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, MN, 32])
    acc2 = gl.zeros([s.BS, MN], gl.float32, layout=mma2)
    red2: gl.constexpr = _head_sum(acc2, acc2, s2).type.layout
    cols2 = gl.arange(0, MN, layout=gl.SliceLayout(0, mma2))
    offs_t2 = gl.arange(0, PR, layout=gl.SliceLayout(0, red2))
    offs_k2 = gl.arange(0, s.BS, layout=gl.SliceLayout(1, red2))
    b64 = b.to(gl.int64)
    if HOLD:
        held = ()
        for j in gl.static_range(PARTS):
            held = held + (_rows(p, s2, b, b64, j * PR, cols2, offs_t2), )
    mbarrier.wait(ld.q.full.index(qs), q_phase)
    n_seg = (u1 - u0 + s.SUBS - 1) // s.SUBS
    for k in range(at.first(WG), n_seg, s.MATH_WG):
        u = u0 + k * s.SUBS
        st, tok, sc = _issue_block(at.after(k), s, ld, _q_part(ld.q, qs, 0, PARTS), acc2, gl.SliceLayout(1, red2))
        for j in gl.static_range(PARTS):
            if s.AHEAD and j + 1 < PARTS:
                nxt = warpgroup_mma(ld.kv.smem.index(st), _q_part(ld.q, qs, j + 1, PARTS), acc2, use_acc=False,
                                    is_async=True)
            r = held[j] if HOLD else _rows(p, s2, b, b64, j * PR, cols2, offs_t2)
            done = warpgroup_mma_wait(num_outstanding=1 if s.AHEAD and j + 1 < PARTS else 0, deps=(tok, ))
            if j + 1 == PARTS:
                release_slot(ld.kv, st, s.PTX_SLOTS, s.EMPTY_AT)  # slot st: every part and the scales are read
            _store_block(p, s2, done, r, sc, u, offs_k2, seg_hi)
            if j + 1 < PARTS:
                if s.AHEAD:
                    tok = nxt
                else:
                    tok = warpgroup_mma(ld.kv.smem.index(st), _q_part(ld.q, qs, j + 1, PARTS), acc2, use_acc=False,
                                        is_async=True)
    return at.after(n_seg)


# ---- Math partition ----
@gluon.jit
def _math_partition(p, s, w, ld, WG: gl.constexpr):
    """Math warpgroup WG: for each of its cache blocks (the program's block c where c % MATH_WG == WG) the wgmmas, the
    fp32 epilogue and the store, in its schedule; every warpgroup waits for and releases each q slot."""
    NPH: gl.constexpr = s.NP * s.H
    if s.MMA_N == 0:
        mma_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                             instr_shape=[16, NPH, 32])
        acc = gl.zeros([s.BS, NPH], gl.float32, layout=mma_layout)
        red_layout: gl.constexpr = _head_sum(acc, acc, s).type.layout
        t_layout: gl.constexpr = gl.SliceLayout(0, red_layout)
        k_layout: gl.constexpr = gl.SliceLayout(1, red_layout)
        cols = gl.arange(0, NPH, layout=gl.SliceLayout(0, mma_layout))
        offs_t = gl.arange(0, s.NP, layout=t_layout)
        offs_k = gl.arange(0, s.BS, layout=k_layout)
    else:
        t_layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    at = Blocks(gl.to_tensor(0), s.MATH_WG, s.STAGES)
    qs_at = Counter(gl.to_tensor(0), 2)  # sequences consumed
    if s.SPLIT_INSIDE:
        w = _work(p, s)
    for b in range(w.b_lo, gl.minimum(w.b_end + 1, p.batch)):
        u0, u1, seg_hi = _segment(p, s, w, b, t_layout)
        if u0 < u1:
            qs, qph = qs_at.slot()
            if s.MMA_N != 0:
                at = _blocks_in_parts(p, s, ld, qs, qph, at, WG, b, u0, u1, seg_hi)
            else:
                r = _rows(p, s, b, b.to(gl.int64), 0, cols, offs_t)
                mbarrier.wait(ld.q.full.index(qs), qph)
                q_t = ld.q.smem.index(qs).reshape([NPH, s.D]).permute((1, 0))  # [D, NPH], K-major B operand
                if s.PIPE:
                    at = _blocks_pipe(p, s, ld, at, q_t, acc, r, u0, u1, seg_hi, offs_k, k_layout)
                else:
                    at = _blocks_plain(p, s, ld, at, WG, q_t, acc, r, u0, u1, seg_hi, offs_k, k_layout)
            mbarrier.arrive(ld.q.empty.index(qs), count=1)
            qs_at = qs_at.next()
    if s.CLEAN:
        _dead_tails(p, s, WG)


@gluon.jit
def _dead_tails(p, s, WG: gl.constexpr):
    """-inf over [largest row end, max_context_len) of every row (CLEAN), in FILL-column pieces over all programs."""
    fl: gl.constexpr = gl.BlockedLayout([4], [32], [4], [0])
    cols_f = gl.arange(0, FILL, layout=fl)
    neg = gl.full([FILL], float("-inf"), p.out_ptr.dtype.element_ty, layout=fl)
    t_all = gl.arange(0, s.NP, layout=fl)
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
            gl.store(p.out_ptr + r.to(gl.int64) * p.stride_out + col, neg, mask=(col >= hi) & (col < p.max_context_len))


# ---- Kernel ----
@gluon.jit
def _specialize(p, s, w, ld, MATH_REGS: gl.constexpr, SMALL_REGS: gl.constexpr):
    """The partitions: MATH_WG math warpgroups (warpgroup 0 the default partition) and the producer warp(s)."""
    if s.MATH_WG == 1:
        gl.warp_specialize([(_math_partition, (p, s, w, ld, 0)), (_load_partition, (p, s, w, ld))], [1], [SMALL_REGS])
    elif s.MATH_WG == 2:
        gl.warp_specialize([(_math_partition, (p, s, w, ld, 0)), (_math_partition, (p, s, w, ld, 1)),
                            (_load_partition, (p, s, w, ld))], [4, 1], [MATH_REGS, SMALL_REGS])
    elif s.MATH_WG == 3:
        gl.warp_specialize([(_math_partition, (p, s, w, ld, 0)), (_math_partition, (p, s, w, ld, 1)),
                            (_math_partition, (p, s, w, ld, 2)), (_load_partition, (p, s, w, ld))],
                           [4, 4, 1], [MATH_REGS, MATH_REGS, SMALL_REGS])
    else:
        gl.static_assert(s.MATH_WG == 4, "1 to 4 math warpgroups")
        gl.warp_specialize([(_math_partition, (p, s, w, ld, 0)), (_math_partition, (p, s, w, ld, 1)),
                            (_math_partition, (p, s, w, ld, 2)), (_math_partition, (p, s, w, ld, 3)),
                            (_load_partition, (p, s, w, ld, 0)), (_load_partition, (p, s, w, ld, 1)),
                            (_load_partition, (p, s, w, ld, 2)), (_load_partition, (p, s, w, ld, 3))],
                           [4, 4, 4, 1, 1, 1, 1],
                           [MATH_REGS, MATH_REGS, MATH_REGS, SMALL_REGS, SMALL_REGS, SMALL_REGS, SMALL_REGS])


@gluon.jit(repr=make_kernel_repr("paged_mqa_logits_ws_sm90", KEYS))
def paged_mqa_logits_ws_sm90(
    q_desc, kv_desc, sc_desc,  # q [B*NEXT_N*H, D] (Q_IN_LANES: _head_sum's view), the cache's rows, its scales
    w_ptr, ctx_ptr, table_ptr, meta_ptr, out_ptr,  # Decode's; meta_ptr: the schedule (unused: SELF_SCHEDULE)
    batch, max_context_len, rows_per_block, stride_w, stride_ctx_b, stride_ctx_t, ctx_causal, stride_table,
    stride_out, table_cols,
    NEXT_N: gl.constexpr, H: gl.constexpr, D: gl.constexpr, BS: gl.constexpr, NP: gl.constexpr,
    STAGES: gl.constexpr, SUBS: gl.constexpr, CLEAN: gl.constexpr, SELF_SCHEDULE: gl.constexpr, PIPE: gl.constexpr,
    MATH_WG: gl.constexpr, MATH_REGS: gl.constexpr, SMALL_REGS: gl.constexpr,  # setmaxnreg: math 1.., producer
    Q_IN_LANES: gl.constexpr = False, MMA_N: gl.constexpr = 0, AHEAD: gl.constexpr = True,
    PTX_SLOTS: gl.constexpr = False, FULL_AT: gl.constexpr = -1, EMPTY_AT: gl.constexpr = -1,
    LOADERS: gl.constexpr = 1,
    DESC_PARAMS: gl.constexpr = "",  # the TMA descriptors' parameter symbols (mqa_cli.launch.paged_ws_sm90 sets them)
    SPLIT_INSIDE: gl.constexpr = False, OPAQUE: gl.constexpr = True,
):
    gl.static_assert(gl.num_warps() == 4, "the default partition is one math warpgroup")
    gl.static_assert(BS == 64, "a cache block = one warpgroup's 64 MMA rows")
    gl.static_assert((not Q_IN_LANES) | (NP <= 4), "Q_IN_LANES: at most 4 draft rows (one per lane of a quad)")
    gl.static_assert((MATH_WG == 1) | (not PIPE), "two accumulators (PIPE) with one math warpgroup per program")
    gl.static_assert((MMA_N == 0) | ((MMA_N % H == 0) & (MMA_N <= 128) & (not PIPE) & (not Q_IN_LANES)),
                     "MMA_N: a multiple of H up to 128 (two accumulators in flight), without PIPE or Q_IN_LANES")
    gl.static_assert((MMA_N != 0) | (NP * H <= 256), "NP * H past one wgmma's 256 columns needs MMA_N")
    gl.static_assert((not PTX_SLOTS) | ((FULL_AT >= 0) & (EMPTY_AT >= 0)), "PTX_SLOTS needs FULL_AT and EMPTY_AT")
    gl.static_assert(((MATH_WG == 4) & (LOADERS == 4)) | ((MATH_WG != 4) & (LOADERS == 1)),
                     "one producer warp, or one per math warpgroup at four")
    gl.static_assert(DESC_PARAMS != "", "the descriptor prefetch needs DESC_PARAMS (the launcher names the parameters)")
    p = Decode(w_ptr, ctx_ptr, table_ptr, out_ptr, batch, max_context_len, rows_per_block, stride_w, stride_ctx_b,
               stride_ctx_t, ctx_causal, stride_table, stride_out, meta_ptr, table_cols)
    s = Shape(NEXT_N, H, D, BS, NP, STAGES, SUBS, CLEAN, PIPE, MATH_WG, Q_IN_LANES, MMA_N, AHEAD, PTX_SLOTS,
              FULL_AT, EMPTY_AT, LOADERS, SELF_SCHEDULE, SPLIT_INSIDE, OPAQUE)
    _prefetch_descriptors(_descriptor_prefetch_asm(DESC_PARAMS))
    _prefetch_table(p, BS)
    if s.SPLIT_INSIDE:  # each partition computes its range after warp_specialize: the rings' setup and the
        zero = gl.to_tensor(0)  # partitions' start run under the first loads' latency instead of after them
        w = Work(zero, zero, zero, zero, zero)  # not read
    else:
        w = _work(p, s)
    _specialize(p, s, w, Loader.create(s, q_desc, kv_desc, sc_desc), MATH_REGS, SMALL_REGS)
