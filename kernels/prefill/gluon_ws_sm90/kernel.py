"""Hopper (sm90) prefill kernel in Gluon, warp-specialised: fp8 MQA logits with two or three math warpgroups.

Partitions (gl.warp_specialize, register reallocation by setmaxnreg):
- math warpgroups 0 .. MATH_WG - 1 (the default partition and MATH_WG - 1 workers, 4 warps each);
- a TMA producer (1 warp): each work item's q blocks into a double-buffered slot per query group, its kv tiles into
  a STAGES-deep ring (mqa_kernels.common.gluon_ring) that every math warpgroup releases;
- a -inf filler (1 warp, CLEAN only): 16-byte stores over each row's dead columns beside the math (full form:
  outside the item's live kv tiles; compressed form: each row's tail [ke - ks, max_seqlen_k)).
Work item = Q_GROUPS*BLOCK_Q query rows against its live kv tiles of KV_GROUPS*BLOCK_KV rows; math warpgroup g takes
query block g % Q_GROUPS and the 64-row block g // Q_GROUPS of each tile, and multiplies it (the wgmma's M, A
operand) by its K-major q block [D, BLOCK_Q*H] (N, B operand). kv_splits (a runtime argument) makes a query block
kv_splits work items, each an equal share of its live kv tiles (_item).
Each math warpgroup waits for its own wgmma, releases the kv slot, then runs the fp32 epilogue (relu, x weight,
head sum, x kv_scale, -inf mask on boundary tiles, store in fp32 or bf16) while the other warpgroups' wgmmas run.
Options: Q_IN_LANES (q loaded head-pair-major so that a lane holds every head of its query rows: _head_sum),
CHAINS (a lane's head sum as independent FMA chains), TMA_STORE (logits through shared memory and a TMA store),
TILE_PTR (the store's address form), PTX_SLOTS (slots waited for and released in PTX: gluon_ring.wait_slot),
PINGPONG 2 (the two warpgroups issue their wgmma in turn through named barriers 14 and 15; warpgroup 1's last pass
has no wait to meet, and the barrier is left part-arrived at exit). config.py says which config takes which.
Persistent grid: program p takes work items in snake order (p, 2P-1-p, 2P+p, ...) counted from the last query
block (the heaviest in causal-like layouts) backwards. No CTA-wide barrier in the loop.

Output forms: full (column = kv row; CLEAN writes -inf outside [ks, ke)) and COMPRESSED (column c of row
i = kv row ks[i] + c for c < min(ke[i], N) - ks[i], at most max_seqlen_k; only those are written, and
with CLEAN the rest of the row's max_seqlen_k columns are -inf). Row bases (row x stride) are 64-bit.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.language.core import _aggregate as aggregate

from ...common import gluon_compat as compat
from ...common.config import INT32_MAX as _INT32_MAX
from ...common.config import NEG_INF_FILL as _NEG_INF_FILL
from ...common.gluon_heads import lane_head_sum, quad_head_sum
from ...common.gluon_ring import Ring, Scalar, release_slot, ring, scalar, slot_phase, wait_slot
from ...common.naming import make_kernel_repr
from . import KEYS

INT32_MAX = gl.constexpr(_INT32_MAX)  # "no row" sentinel for min-reductions over ks
NEG_INF_FILL = gl.constexpr(_NEG_INF_FILL)  # elements per -inf store loop step of the filler warp


@aggregate
class Problem:
    """The runtime arguments every partition reads: pointers, sizes, strides (elements), item count."""

    kv_scale_ptr: gl.tensor  # fp32 [N], stride_scale
    w_ptr: gl.tensor  # fp32 [S, H], row stride stride_w_s, heads contiguous
    ks_ptr: gl.tensor  # int32 [S], stride_ks
    ke_ptr: gl.tensor  # int32 [S], stride_ke
    out_ptr: gl.tensor  # fp32 / bf16 [S, stride_out_s]
    S: Scalar
    N: Scalar
    max_seqlen_k: Scalar  # COMPRESSED: output columns per row
    stride_scale: Scalar
    stride_w_s: Scalar
    stride_ks: Scalar
    stride_ke: Scalar
    stride_out_s: Scalar
    n_items: Scalar
    kv_splits: Scalar

    @gluon.constexpr_function
    def __init__(self, kv_scale_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, S, N, max_seqlen_k, stride_scale, stride_w_s,
                 stride_ks, stride_ke, stride_out_s, n_items, kv_splits):
        self.kv_scale_ptr = kv_scale_ptr
        self.w_ptr = w_ptr
        self.ks_ptr = ks_ptr
        self.ke_ptr = ke_ptr
        self.out_ptr = out_ptr
        self.S = scalar(S)
        self.N = scalar(N)
        self.max_seqlen_k = scalar(max_seqlen_k)
        self.stride_scale = scalar(stride_scale)
        self.stride_w_s = scalar(stride_w_s)
        self.stride_ks = scalar(stride_ks)
        self.stride_ke = scalar(stride_ke)
        self.stride_out_s = scalar(stride_out_s)
        self.n_items = scalar(n_items)
        self.kv_splits = scalar(kv_splits)


@aggregate
class Tiling:
    """The compile-time shape of the work: tile sizes and output form."""

    H: gl.constexpr
    D: gl.constexpr
    BLOCK_Q: gl.constexpr  # query rows per math warpgroup; BLOCK_Q * H = the wgmma's N (128 or 256)
    BLOCK_KV: gl.constexpr  # kv rows per tile = the wgmma's M (64, one warpgroup)
    STAGES: gl.constexpr  # kv ring depth
    CLEAN: gl.constexpr
    COMPRESSED: gl.constexpr
    Q_GROUPS: gl.constexpr  # query blocks of BLOCK_Q rows per work item (one per group of math warpgroups)
    KV_GROUPS: gl.constexpr  # math warpgroups sharing a query block, each taking BLOCK_KV rows of a kv tile
    ROWS: gl.constexpr  # query rows per work item = Q_GROUPS * BLOCK_Q
    KV_TILE: gl.constexpr  # kv rows per ring slot = KV_GROUPS * BLOCK_KV
    Q_IN_LANES: gl.constexpr  # wgmma column n = (query row (n // 2) % BLOCK_Q, head 2 (n // 2 BLOCK_Q) + n % 2): _head_sum
    TMA_STORE: gl.constexpr  # logits tiles leave through shared memory and a TMA store (full form only)
    CHAINS: gl.constexpr  # Q_IN_LANES: independent FMA chains per logit in the head sum
    TILE_PTR: gl.constexpr  # per-thread stores address the tile's base pointer plus the item's held offsets
    PTX_SLOTS: gl.constexpr  # kv ring slots waited for and released in PTX (gluon_ring.wait_slot, release_slot)
    FULL_AT: gl.constexpr  # PTX_SLOTS: byte offset of the kv ring's full barriers in shared memory
    EMPTY_AT: gl.constexpr  # PTX_SLOTS: and of its empty barriers
    PINGPONG: gl.constexpr  # 2: the two math warpgroups issue their wgmma in turn (named barriers)

    @gluon.constexpr_function
    def __init__(self, H, D, BLOCK_Q, BLOCK_KV, STAGES, CLEAN, COMPRESSED, Q_GROUPS, KV_GROUPS, Q_IN_LANES,
                 TMA_STORE, CHAINS, TILE_PTR, PTX_SLOTS, FULL_AT, EMPTY_AT, PINGPONG):
        self.H = gl.constexpr(H)
        self.D = gl.constexpr(D)
        self.BLOCK_Q = gl.constexpr(BLOCK_Q)
        self.BLOCK_KV = gl.constexpr(BLOCK_KV)
        self.STAGES = gl.constexpr(STAGES)
        self.CLEAN = gl.constexpr(CLEAN)
        self.COMPRESSED = gl.constexpr(COMPRESSED)
        self.Q_GROUPS = gl.constexpr(Q_GROUPS)
        self.KV_GROUPS = gl.constexpr(KV_GROUPS)
        self.ROWS = gl.constexpr(Q_GROUPS * BLOCK_Q)
        self.KV_TILE = gl.constexpr(KV_GROUPS * BLOCK_KV)
        self.Q_IN_LANES = gl.constexpr(Q_IN_LANES)
        self.TMA_STORE = gl.constexpr(TMA_STORE)
        self.CHAINS = gl.constexpr(CHAINS)
        self.TILE_PTR = gl.constexpr(TILE_PTR)
        self.PTX_SLOTS = gl.constexpr(PTX_SLOTS)
        self.FULL_AT = gl.constexpr(FULL_AT)
        self.EMPTY_AT = gl.constexpr(EMPTY_AT)
        self.PINGPONG = gl.constexpr(PINGPONG)


@gluon.jit
def _row(ptr, row, stride):
    """Address of row `row` (a scalar) of a strided array: the product in 64 bits."""
    return ptr + row.to(gl.int64) * stride


@gluon.jit
def _load_rows(ptr, row0, offs, stride, mask, other):
    """ptr[(row0 + offs) * stride] for a strided 1-D array, the product in 64 bits per element (so that no
    loop-invariant pointer vector is held across the loops: docs/DESIGN-NOTES.md)."""
    return gl.load(ptr + (row0 + offs).to(gl.int64) * stride, mask=mask, other=other)


@gluon.jit
def _live_tiles(p, q0, ROWS: gl.constexpr, BLOCK_KV: gl.constexpr, WARPS: gl.constexpr):
    """First kv tile and tile count covering [min ks, max ke) of query rows [q0, q0 + ROWS), within [0, N)."""
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])
    r = gl.arange(0, ROWS, layout=layout)
    ok = q0 + r < p.S
    lo = gl.min(_load_rows(p.ks_ptr, q0, r, p.stride_ks, ok, INT32_MAX), axis=0)
    hi = gl.minimum(gl.max(_load_rows(p.ke_ptr, q0, r, p.stride_ke, ok, 0), axis=0), p.N)
    t_lo = gl.maximum(lo, 0) // BLOCK_KV
    t_hi = (hi + BLOCK_KV - 1) // BLOCK_KV
    return t_lo, gl.maximum(t_hi - t_lo, 0)


@aggregate
class Item:
    """One work item: query block [q0, q0 + ROWS) against its share (`lo`, `count` kv tiles) of the block's live
    tiles (`t_lo`, `n_tiles`); `part` says which of the kv_splits shares it is."""

    q0: gl.tensor
    lo: gl.tensor
    count: gl.tensor
    part: gl.tensor
    t_lo: gl.tensor
    n_tiles: gl.tensor

    @gluon.constexpr_function
    def __init__(self, q0, lo, count, part, t_lo, n_tiles):
        self.q0 = q0
        self.lo = lo
        self.count = count
        self.part = part
        self.t_lo = t_lo
        self.n_tiles = n_tiles


@gluon.jit
def _item(p, t, j, WARPS: gl.constexpr):
    """Round j of this program: snake order over work items (p, 2P-1-p, 2P+p, ...) counted from the last
    query block (the heaviest in causal-like layouts), so each program's sum of work evens out. A query block
    makes kv_splits items, each an equal share of its live kv tiles (a causal triangle's long rows spread over
    more programs; kv_splits 1: the whole row range)."""
    P = gl.num_programs(0)
    pid = gl.program_id(0)
    item = j * P + gl.where(j % 2 == 0, pid, P - 1 - pid)
    part = item % p.kv_splits
    q0 = (p.n_items // p.kv_splits - 1 - item // p.kv_splits) * t.ROWS
    t_lo, n_tiles = _live_tiles(p, q0, t.ROWS, t.KV_TILE, WARPS)
    share = (n_tiles + p.kv_splits - 1) // p.kv_splits
    count = gl.minimum(gl.maximum(n_tiles - part * share, 0), share)
    return Item(q0, t_lo + part * share, count, part, t_lo, n_tiles)


@gluon.jit
def _my_rounds(n_items):
    """Rounds of this program: every full round, plus the last partial one if its snake slot is filled."""
    P = gl.num_programs(0)
    p = gl.program_id(0)
    full = n_items // P
    last = full * P + gl.where(full % 2 == 0, p, P - 1 - p)
    return full + gl.where(last < n_items, 1, 0)


@gluon.jit
def _head_sum(x, w, t):
    """[BLOCK_KV, BLOCK_Q * H] (wgmma accumulator layout) -> [BLOCK_KV, BLOCK_Q]: sum over heads of x * w (x the
    relu'd scores, w the weights broadcast to x's shape).

    Query-major columns (n = q * H + h): a row's heads lie in the 4 lanes of a quad (quad_head_sum: an in-thread
    chain, then two shuffle rounds). With Q_IN_LANES, column n holds query row (n // 2) % BLOCK_Q and head
    2 (n // (2 BLOCK_Q)) + n % 2: lane t of a quad holds every head of query rows t, t + 4, ..., so the sum is
    in-thread only (lane_head_sum), as CHAINS independent chains added at the end."""
    if t.Q_IN_LANES:
        # [kv, j, rq, lane in quad, e] -> [kv, rq, lane, j, e]: the H in-thread values of a logit on the last axis
        xs = gl.reshape(gl.permute(gl.reshape(x, [t.BLOCK_KV, t.H // 2, t.BLOCK_Q // 4, 4, 2]), (0, 2, 3, 1, 4)),
                        [t.BLOCK_KV, t.BLOCK_Q, t.H])
        ws = gl.reshape(gl.permute(gl.reshape(w, [t.BLOCK_KV, t.H // 2, t.BLOCK_Q // 4, 4, 2]), (0, 2, 3, 1, 4)),
                        [t.BLOCK_KV, t.BLOCK_Q, t.H])
        if t.CHAINS > 1:  # CHAINS chains of H / CHAINS FMAs per logit, then their sum
            xs = gl.reshape(xs, [t.BLOCK_KV, t.BLOCK_Q, t.CHAINS, t.H // t.CHAINS])
            ws = gl.reshape(ws, [t.BLOCK_KV, t.BLOCK_Q, t.CHAINS, t.H // t.CHAINS])
            return gl.sum(lane_head_sum(xs, ws, t.H // t.CHAINS), axis=2)
        else:  # (an else: the JIT compiles the code after a taken static if's return too)
            return lane_head_sum(xs, ws, t.H)
    else:
        return quad_head_sum(x, w, t.BLOCK_KV, t.BLOCK_Q, t.H)


TURN_BAR = gl.constexpr(14)  # PINGPONG 2: named barriers 14, 15


@gluon.jit
def _turn_wait(WG: gl.constexpr):
    """PINGPONG 2: wait until the other math warpgroup has issued its wgmma (its 128 threads arrive)."""
    gl.inline_asm_elementwise("{ bar.sync $1, 256; mov.b32 $0, 0; }", "=r,r", [TURN_BAR + WG], dtype=gl.int32,
                              is_pure=False, pack=1)


@gluon.jit
def _turn_pass(OTHER: gl.constexpr):
    """PINGPONG 2: let math warpgroup OTHER issue its wgmma (arrive at its turn barrier, no wait)."""
    gl.inline_asm_elementwise("{ bar.arrive $1, 256; mov.b32 $0, 0; }", "=r,r", [TURN_BAR + OTHER],
                              dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _math_partition(p, t, kv, q, osm, out_desc, WG: gl.constexpr):
    """One math warpgroup: for each work item, its BLOCK_Q query rows (query group WG % Q_GROUPS) against its
    BLOCK_KV rows (kv group WG // Q_GROUPS) of the item's kv tiles."""
    BLOCK_Q: gl.constexpr = t.BLOCK_Q
    BLOCK_KV: gl.constexpr = t.BLOCK_KV
    BQH: gl.constexpr = BLOCK_Q * t.H
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, BQH, 32])
    acc = gl.zeros([BLOCK_KV, BQH], gl.float32, layout=mma_layout)
    red_layout: gl.constexpr = _head_sum(acc, acc, t).type.layout
    cols = gl.arange(0, BQH, layout=gl.SliceLayout(0, mma_layout))
    offs_q = gl.arange(0, BLOCK_Q, layout=gl.SliceLayout(0, red_layout))
    offs_kv = gl.arange(0, BLOCK_KV, layout=gl.SliceLayout(1, red_layout))

    c = 0  # kv tiles consumed so far: ring slot c % STAGES, use c // STAGES
    i = 0  # work items done: q slot i % 2, use i // 2
    if t.PINGPONG == 2:
        if WG == 1:
            _turn_pass(0)  # the first turn is warpgroup 0's
    for j in range(0, _my_rounds(p.n_items)):
        c, i = _math_item(p, t, kv, q, osm, out_desc, WG, _item(p, t, j, 4), acc, cols, offs_q, offs_kv, c, i)
    if t.TMA_STORE:
        tma.store_wait(0)  # the last tiles' copies have read their shared memory before the partition ends


@gluon.jit
def _math_item(p, t, kv, q, osm, out_desc, WG: gl.constexpr, it, acc, cols, offs_q, offs_kv, c, i):
    """One work item of a math warpgroup: c kv tiles and i items consumed so far in; returned advanced."""
    H: gl.constexpr = t.H
    BLOCK_Q: gl.constexpr = t.BLOCK_Q
    BLOCK_KV: gl.constexpr = t.BLOCK_KV
    STAGES: gl.constexpr = t.STAGES
    QG: gl.constexpr = WG % t.Q_GROUPS
    KG: gl.constexpr = WG // t.Q_GROUPS
    my0 = it.q0 + QG * BLOCK_Q

    if t.Q_IN_LANES:  # column n: query row (n // 2) % BLOCK_Q, head 2 (n // (2 BLOCK_Q)) + n % 2
        c_row = my0 + (cols // 2) % BLOCK_Q
        c_head = 2 * (cols // (2 * BLOCK_Q)) + cols % 2
    else:
        c_row = my0 + cols // H
        c_head = cols % H
    # The weights' addresses per element in 64 bits (as _load_rows)
    w_ptrs = p.w_ptr + (c_row.to(gl.int64) * p.stride_w_s + c_head)
    w2 = gl.expand_dims(gl.load(w_ptrs, mask=c_row < p.S, other=0.0), 0)
    qr = my0 + offs_q
    q_ok = qr < p.S
    # Rows of this warpgroup's block: a 64-bit scalar base and int32 offsets from it (few registers).
    out_base = _row(p.out_ptr, my0, p.stride_out_s)
    out_offs = gl.expand_dims(offs_q * p.stride_out_s, 0)
    lo2 = out_offs  # (placeholders where the form has no window: the epilogue's masks are compiled out)
    hi2 = out_offs
    in_lo = 0
    in_hi = 0
    if t.COMPRESSED:
        # Each row's live kv rows [ks, hi), hi = min(ke, N, ks + max_seqlen_k): column = kv row - ks.
        ks_q = _load_rows(p.ks_ptr, my0, offs_q, p.stride_ks, q_ok, 0)
        ke_q = _load_rows(p.ke_ptr, my0, offs_q, p.stride_ke, q_ok, 0)
        hi_q = ks_q + gl.minimum(gl.minimum(ke_q, p.N) - ks_q, p.max_seqlen_k)
        lo2 = gl.expand_dims(ks_q, 0)
        hi2 = gl.expand_dims(hi_q, 0)
    elif t.CLEAN:
        # Tiles inside [max ks, min ke) of the warpgroup's valid rows need no -inf mask.
        ks_q = _load_rows(p.ks_ptr, my0, offs_q, p.stride_ks, q_ok, 0)
        ke_q = _load_rows(p.ke_ptr, my0, offs_q, p.stride_ke, q_ok, INT32_MAX)
        in_lo = gl.max(ks_q, axis=0)
        in_hi = gl.min(ke_q, axis=0)
        lo2 = gl.expand_dims(ks_q, 0)
        hi2 = gl.expand_dims(ke_q, 0)
    rs = RowState(my0, w2, q_ok, out_base, out_offs, lo2, hi2, in_lo, in_hi)

    qs, qph = slot_phase(i, 2)
    mbarrier.wait(q.full.index(qs), qph)  # q slot qs: wait for this item's fill
    q_t = q.smem.index(qs).reshape([BLOCK_Q * H, t.D]).permute((1, 0))  # [D, BQH], K-major B operand

    for tt in range(it.count):
        s, ph = slot_phase(c, STAGES)
        start = (it.lo + tt) * t.KV_TILE + KG * BLOCK_KV
        scale = _tile_scales(p, start, offs_kv)
        wait_slot(kv, s, ph, t.PTX_SLOTS, t.FULL_AT)  # kv slot s: wait for this tile's fill
        if t.PINGPONG == 2:
            _turn_wait(WG)
        # ring stage s holds the tile's KV_GROUPS blocks of BLOCK_KV rows in slots s*KV_GROUPS + g
        tok = warpgroup_mma(kv.smem.index(s * t.KV_GROUPS + KG), q_t, acc, use_acc=False, is_async=True)
        if t.PINGPONG == 2:
            _turn_pass(1 - WG)
        done = warpgroup_mma_wait(num_outstanding=0, deps=(tok, ))
        # Release slot s: the last of the math warpgroups' arrivals completes its empty phase.
        release_slot(kv, s, t.PTX_SLOTS, t.EMPTY_AT)
        _tile_out(p, t, done, start, scale, c, offs_kv, rs, osm, out_desc, WG)
        c += 1

    # Release q slot qs (count KV_GROUPS: the warpgroups of this query group read it).
    mbarrier.arrive(q.empty.index(qs), count=1)
    i += 1
    return c, i


@aggregate
class RowState:
    """What a math warpgroup's tile epilogue needs of its query rows (one work item): first row, weights, which rows
    exist, output row addresses, and the rows' windows (lo2 / hi2: ks / ke with CLEAN, ks / its end compressed)."""

    my0: gl.tensor
    w2: gl.tensor
    q_ok: gl.tensor
    out_base: gl.tensor
    out_offs: gl.tensor
    lo2: gl.tensor
    hi2: gl.tensor
    in_lo: gl.tensor | gl.constexpr
    in_hi: gl.tensor | gl.constexpr

    @gluon.constexpr_function
    def __init__(self, my0, w2, q_ok, out_base, out_offs, lo2, hi2, in_lo, in_hi):
        self.my0 = my0
        self.w2 = w2
        self.q_ok = q_ok
        self.out_base = out_base
        self.out_offs = out_offs
        self.lo2 = lo2
        self.hi2 = hi2
        self.in_lo = scalar(in_lo)
        self.in_hi = scalar(in_hi)


@gluon.jit
def _tile_scales(p, start, offs_kv):
    """kv_scales of the tile's rows [start, start + BLOCK_KV) (0 past N)."""
    return gl.load(_row(p.kv_scale_ptr, start, p.stride_scale) + offs_kv * p.stride_scale,
                   mask=start + offs_kv < p.N, other=0.0)


@gluon.jit
def _tile_out(p, t, acc, start, scale, tile, offs_kv, rs, osm, out_desc, WG: gl.constexpr):
    """The fp32 epilogue of one tile: relu, x weight, head sum, x kv scale, the -inf mask on a boundary tile, and the
    store (per thread, or through shared memory and TMA: buffer `tile` % 2 of the warpgroup)."""
    out_ty: gl.constexpr = p.out_ptr.dtype.element_ty
    x, w = gl.broadcast(gl.maximum(acc, 0.0), rs.w2)
    logits = _head_sum(x, w, t)  # [BLOCK_KV, BLOCK_Q]
    logits = logits * gl.expand_dims(scale, 1)
    rows2 = gl.expand_dims(start + offs_kv, 1)
    if t.COMPRESSED:
        live = (rows2 >= rs.lo2) & (rows2 < rs.hi2)
        gl.store(rs.out_base + (rs.out_offs + (rows2 - rs.lo2)), logits.to(out_ty), mask=live)
    else:
        if t.CLEAN:
            if (start < rs.in_lo) | (start + t.BLOCK_KV > rs.in_hi):
                logits = gl.where((rows2 >= rs.lo2) & (rows2 < rs.hi2), logits, float("-inf"))
        if t.TMA_STORE:
            _tma_store_tile(logits.to(out_ty), osm.index(2 * WG + tile % 2), out_desc, rs.my0, start)
        else:
            st_ok = gl.expand_dims(rs.q_ok, 0)
            if t.KV_GROUPS > 1:  # a tile's later rows may lie past N, and past the row-padded stride
                st_ok = st_ok & (start < p.N)
            if t.TILE_PTR:
                # the tile's base pointer (a scalar) plus the item's loop-invariant int32 offsets
                gl.store((rs.out_base + start) + (rs.out_offs + gl.expand_dims(offs_kv, 1)), logits.to(out_ty),
                         mask=st_ok)
            else:
                gl.store(rs.out_base + (rs.out_offs + rows2), logits.to(out_ty), mask=st_ok)


@gluon.jit
def _tma_store_tile(logits, buf, out_desc, row0, col0):
    """A warpgroup's [BLOCK_KV, BLOCK_Q] logits tile to out[row0:, col0:] through `buf` (one of its two shared
    [BLOCK_Q, BLOCK_KV] buffers, used every other tile) and a TMA store, which clips rows past S and columns past
    N. Only the issuing thread can wait for its copies: it waits until at most one (the other buffer's) is in
    flight, and the warpgroup's barrier tells the rest that this buffer is free; a second barrier puts every
    thread's part of the tile in shared memory before the copy is issued."""
    tma.store_wait(1)
    compat.barrier()
    buf.store(gl.permute(logits, (1, 0)))
    fence_async_shared()
    compat.barrier()
    compat.async_store(out_desc, [row0, col0], buf)


@gluon.jit
def _q_coord(q0, t):
    """TMA coordinates of the q block of query rows [q0, q0 + BLOCK_Q): rows q0*H.. of the [S*H, D] view, or,
    with Q_IN_LANES, the [H/2, S, 2, D] view (head pair j, query row, head parity, dim) the host describes."""
    if t.Q_IN_LANES:
        return [0, q0, 0, 0]
    else:
        return [q0 * t.H, 0]


@gluon.jit
def _load_partition(p, t, kv, q0_ring, q1_ring, q_desc, kv_desc):
    """TMA producer (1 warp): per work item its Q_GROUPS q blocks, then its live kv tiles through the ring."""
    c = 0  # kv tiles issued so far: slot c % STAGES, use c // STAGES
    i = 0  # work items issued: q slot i % 2, use i // 2
    for j in range(0, _my_rounds(p.n_items)):
        c, i = _load_item(p, t, kv, q0_ring, q1_ring, q_desc, kv_desc, _item(p, t, j, 1), c, i)


@gluon.jit
def _load_item(p, t, kv, q0_ring, q1_ring, q_desc, kv_desc, it, c, i):
    """The producer's share of one work item: its q blocks, then its kv tiles; (c, i) advanced."""
    BLOCK_Q: gl.constexpr = t.BLOCK_Q
    BLOCK_KV: gl.constexpr = t.BLOCK_KV
    STAGES: gl.constexpr = t.STAGES
    q0 = it.q0
    qs, qph = slot_phase(i, 2)
    qph = qph ^ 1  # before a fill of q slot qs, wait for the release of the one before (the first passes at once)
    mbarrier.wait(q0_ring.empty.index(qs), qph)
    mbarrier.expect(q0_ring.full.index(qs), q_desc.block_type.nbytes)
    compat.async_load(q_desc, _q_coord(q0, t), q0_ring.full.index(qs), q0_ring.smem.index(qs))
    if t.Q_GROUPS == 2:
        mbarrier.wait(q1_ring.empty.index(qs), qph)
        mbarrier.expect(q1_ring.full.index(qs), q_desc.block_type.nbytes)
        compat.async_load(q_desc, _q_coord(q0 + BLOCK_Q, t), q1_ring.full.index(qs),
                                        q1_ring.smem.index(qs))
    for tt in range(it.count):
        s, ph = slot_phase(c, STAGES)
        mbarrier.wait(kv.empty.index(s), ph ^ 1)  # every math warpgroup released the slot's use before
        mbarrier.expect(kv.full.index(s), t.KV_GROUPS * kv_desc.block_type.nbytes)
        for g in gl.static_range(t.KV_GROUPS):  # a block past N reads as zeros (its logits are not stored)
            compat.async_load(kv_desc, [(it.lo + tt) * t.KV_TILE + g * BLOCK_KV, 0], kv.full.index(s),
                                            kv.smem.index(s * t.KV_GROUPS + g))
        c += 1
    i += 1
    return c, i


@gluon.jit
def _fill_partition(p, t):
    """-inf over the dead columns of each work item's rows (CLEAN only; plain stores, no barrier: the math
    warpgroups never write these columns).

    Full form: [0, first live tile) and [last live tile, N) of the item. Compressed form: each row's tail
    [min(ke, N, ks + max_seqlen_k) - ks, max_seqlen_k)."""
    if t.CLEAN:
        out_ty: gl.constexpr = p.out_ptr.dtype.element_ty
        VEC: gl.constexpr = 128 // out_ty.primitive_bitwidth  # 16-byte stores
        layout: gl.constexpr = gl.BlockedLayout([VEC], [32], [1], [0])
        offs = gl.arange(0, NEG_INF_FILL, layout=layout)
        neg = gl.full([NEG_INF_FILL], float("-inf"), out_ty, layout=layout)
        for j in range(0, _my_rounds(p.n_items)):
            it = _item(p, t, j, 1)
            q0 = it.q0
            # the first share of a query block fills its rows (an empty row range does nothing)
            r_end = gl.where(it.part == 0, gl.minimum(q0 + t.ROWS, p.S), q0)
            if t.COMPRESSED:
                for r in range(q0, r_end):
                    row = _row(p.out_ptr, r, p.stride_out_s)
                    ks = gl.load(_row(p.ks_ptr, r, p.stride_ks))
                    ke = gl.load(_row(p.ke_ptr, r, p.stride_ke))
                    length = gl.maximum(gl.minimum(gl.minimum(ke, p.N) - ks, p.max_seqlen_k), 0)
                    # From the 16-element boundary below `length`, so the stores stay 16-byte aligned.
                    for col in range((length // 16) * 16, p.max_seqlen_k, NEG_INF_FILL):
                        cc = col + offs
                        gl.store(row + cc, neg, mask=(cc >= length) & (cc < p.max_seqlen_k))
            else:
                live_lo = gl.minimum(it.t_lo * t.KV_TILE, p.N)
                live_hi = gl.minimum((it.t_lo + it.n_tiles) * t.KV_TILE, p.N)
                if it.n_tiles == 0:
                    live_lo = p.N
                    live_hi = p.N
                for r in range(q0, r_end):
                    row = _row(p.out_ptr, r, p.stride_out_s)
                    for col in range(0, live_lo, NEG_INF_FILL):
                        cc = col + offs
                        gl.store(row + cc, neg, mask=cc < live_lo)
                    for col in range(live_hi, p.N, NEG_INF_FILL):
                        cc = col + offs
                        gl.store(row + cc, neg, mask=cc < p.N)


@gluon.jit(repr=make_kernel_repr("mqa_logits_gluon_ws_sm90", KEYS))
def mqa_logits_gluon_ws_sm90(
    q_desc,  # TMA descriptor: fp8 e4m3 q viewed [S*H, D] (dim contiguous), block [BLOCK_Q*H, D]; with Q_IN_LANES
    # viewed [H/2, S, 2, D] (strides 2D, q row stride, D, 1), block [H/2, BLOCK_Q, 2, D]
    kv_desc,  # TMA descriptor: fp8 e4m3 kv [N, D] (dim contiguous, any 16-byte row stride), block [BLOCK_KV, D]
    kv_scale_ptr,  # fp32 [N], any stride
    w_ptr,  # fp32 [S, H], heads contiguous
    ks_ptr,  # int32 [S], any stride: first live kv row of each query row
    ke_ptr,  # int32 [S], any stride: one past the last live kv row
    out_ptr,  # fp32 or bf16 [S, stride_out_s]; full form: stride_out_s >= ceil(N / BLOCK_KV) * BLOCK_KV
    S,  # query rows
    N,  # kv rows
    max_seqlen_k,  # COMPRESSED: output columns per row (unused in the full form)
    stride_scale,  # kv_scales stride (elements)
    stride_w_s,  # weights row stride (elements)
    stride_ks,  # ks stride (elements)
    stride_ke,  # ke stride (elements)
    stride_out_s,  # logits row stride (elements)
    n_items,  # work items = ceil(S / (Q_GROUPS * BLOCK_Q)) * kv_splits; the grid is persistent over them
    kv_splits,  # work items per query block, each an equal share of its live kv tiles
    out_desc,  # TMA_STORE: TMA descriptor of the logits [S, N] (row stride stride_out_s), block [BLOCK_Q, BLOCK_KV]; else None
    H: gl.constexpr,
    D: gl.constexpr,
    BLOCK_Q: gl.constexpr,  # query rows per math warpgroup; BLOCK_Q * H = the wgmma's N (128 or 256)
    BLOCK_KV: gl.constexpr,  # kv rows per tile = the wgmma's M (64, one warpgroup)
    STAGES: gl.constexpr,  # kv ring depth
    CLEAN: gl.constexpr,  # -inf outside [ks, ke) (full) / past each row's length (compressed)
    COMPRESSED: gl.constexpr,  # column = kv row - ks of the row, max_seqlen_k columns
    BF16: gl.constexpr,  # out_ptr is bf16 (the store casts; -inf stays exact)
    MATH_REGS: gl.constexpr,  # registers per thread of the worker math warpgroups (setmaxnreg; math 0 gets the rest)
    SMALL_REGS: gl.constexpr,  # registers per thread of the producer and filler warps
    Q_GROUPS: gl.constexpr = 2,  # query blocks per work item (2: each of two math warpgroups has its own)
    KV_GROUPS: gl.constexpr = 1,  # math warpgroups splitting each kv tile (3: three share one query block)
    Q_IN_LANES: gl.constexpr = False,  # q tile in (head pair, query row, head parity) order: see _head_sum
    TMA_STORE: gl.constexpr = False,  # logits tiles through shared memory and a TMA store (not COMPRESSED)
    CHAINS: gl.constexpr = 1,  # Q_IN_LANES: the head sum as CHAINS independent FMA chains per logit, then added
    TILE_PTR: gl.constexpr = False,  # per-thread stores: the tile's base pointer + the item's held int32 offsets
    PTX_SLOTS: gl.constexpr = False,  # kv ring slots waited for and released in PTX: no warpgroup barrier per tile
    FULL_AT: gl.constexpr = -1,  # PTX_SLOTS: offset of the kv full barriers (mqa_cli.launch.barrier_offsets resolves it)
    EMPTY_AT: gl.constexpr = -1,  # PTX_SLOTS: and of the empty barriers
    PINGPONG: gl.constexpr = 0,  # 2: math warpgroups take turns issuing their wgmma (named barriers 14, 15)
):
    gl.static_assert(gl.num_warps() == 4, "the default partition is one math warpgroup")
    gl.static_assert(BLOCK_KV == 64, "a warpgroup's share of a kv tile = its 64 MMA rows")
    MATH_WG: gl.constexpr = Q_GROUPS * KV_GROUPS
    gl.static_assert((MATH_WG == 2) | (MATH_WG == 3), "two or three math warpgroups")
    gl.static_assert((Q_GROUPS == 1) | (Q_GROUPS == 2), "one or two query blocks per work item")
    gl.static_assert((BLOCK_Q % 4 == 0) | (not Q_IN_LANES), "Q_IN_LANES spreads query rows over the 4 lanes of a quad")
    gl.static_assert((out_ptr.dtype.element_ty == gl.bfloat16) == BF16, "BF16 must match the output dtype")

    p = Problem(kv_scale_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, S, N, max_seqlen_k, stride_scale, stride_w_s,
                stride_ks, stride_ke, stride_out_s, n_items, kv_splits)
    gl.static_assert(not (TMA_STORE and COMPRESSED), "compressed rows start at each row's ks: no rectangular tile")
    gl.static_assert((CHAINS == 1) | (Q_IN_LANES and (H % (2 * CHAINS) == 0)), "CHAINS splits a lane's H heads")
    gl.static_assert(not (TILE_PTR and (TMA_STORE or COMPRESSED)), "TILE_PTR addresses the per-thread full store")
    gl.static_assert((not PTX_SLOTS) | ((FULL_AT >= 0) & (EMPTY_AT >= 0)), "PTX_SLOTS needs FULL_AT and EMPTY_AT")
    t = Tiling(H, D, BLOCK_Q, BLOCK_KV, STAGES, CLEAN, COMPRESSED, Q_GROUPS, KV_GROUPS, Q_IN_LANES, TMA_STORE,
               CHAINS, TILE_PTR, PTX_SLOTS, FULL_AT, EMPTY_AT, PINGPONG)
    # q slots per query group: 2 x [BQH, D], released by the group's KV_GROUPS warpgroups.
    q0_ring = ring(gl.allocate_shared_memory(q_desc.dtype, [2] + q_desc.block_type.shape, q_desc.layout), KV_GROUPS)
    if Q_GROUPS == 2:
        q1_ring = ring(gl.allocate_shared_memory(q_desc.dtype, [2] + q_desc.block_type.shape, q_desc.layout),
                        KV_GROUPS)
    else:
        q1_ring = q0_ring
    # kv ring: STAGES stages of KV_GROUPS x [BLOCK_KV, D] blocks (one kv tile), a full/empty barrier pair per stage;
    # a stage is released by every math warpgroup (empty count MATH_WG; PTX_SLOTS: by each of their threads).
    kv_full = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for st in gl.static_range(STAGES):
        mbarrier.init(kv_full.index(st), count=1)
        mbarrier.init(kv_empty.index(st), count=MATH_WG * (128 if PTX_SLOTS else 1))
    kv = Ring(gl.allocate_shared_memory(kv_desc.dtype, [STAGES * KV_GROUPS, BLOCK_KV, D], kv_desc.layout), kv_full,
              kv_empty)
    if TMA_STORE:  # two [BLOCK_Q, BLOCK_KV] logits buffers per math warpgroup
        osm = gl.allocate_shared_memory(out_desc.dtype, [2 * MATH_WG] + out_desc.block_type.shape, out_desc.layout)
    else:
        osm = kv.smem  # (not used)
    fence_async_shared()

    if MATH_WG == 2:  # warpgroup g: query group g % Q_GROUPS, kv group g // Q_GROUPS
        gl.warp_specialize([
            (_math_partition, (p, t, kv, q0_ring, osm, out_desc, 0)),
            (_math_partition, (p, t, kv, q1_ring, osm, out_desc, 1)),  # (q1_ring is q0_ring at Q_GROUPS 1)
            (_load_partition, (p, t, kv, q0_ring, q1_ring, q_desc, kv_desc)),
            (_fill_partition, (p, t)),
        ], [4, 1, 1], [MATH_REGS, SMALL_REGS, SMALL_REGS])
    else:  # three warpgroups sharing one query block (Q_GROUPS 1)
        gl.warp_specialize([
            (_math_partition, (p, t, kv, q0_ring, osm, out_desc, 0)),
            (_math_partition, (p, t, kv, q0_ring, osm, out_desc, 1)),
            (_math_partition, (p, t, kv, q0_ring, osm, out_desc, 2)),
            (_load_partition, (p, t, kv, q0_ring, q1_ring, q_desc, kv_desc)),
            (_fill_partition, (p, t)),
        ], [4, 4, 1, 1], [MATH_REGS, MATH_REGS, SMALL_REGS, SMALL_REGS])
