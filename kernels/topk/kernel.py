"""Per-row top-k of a logits matrix by threshold selection on order-preserving integer keys (and, at the end, the
opt-in radix select).

Keys: an fp32 value's bits with the low 31 bits flipped when negative compare as int32 exactly like the
floats; -inf, NaN and positions outside the row's window get DEAD (INT32_MIN) and are never selected.
The k-th largest key T is found by counting: each round counts 8 thresholds spread evenly in *value*
over the current bracket (logits are smooth) plus the key-space midpoint (bounded on any data), in one
8-way reduction: ~5 rounds a row, each one reduction's latency (numpy simulation on Gaussian and skewed
rows of 300-65536 entries: 4-5 rounds mean, 7 worst; one interpolated probe a round took 9-22 rounds).
With NARROW > 0 (a compile-time option) the rounds run on the whole block only until the bracket holds at most
NARROW keys (~1-2 rounds), which are then compacted into a few scratch words and searched there (same
thresholds, same counts, same T; a round on [256] costs ~1/4 of one on [4096]: the reduction and the probes
stay). Only keys are held in registers during the search; the selected entries are then streamed out tile by tile
(re-reading the row or the candidates from L1/L2), so the registers a program needs stay those of one
[CAP] key block and more rows are in flight per SM.

Output per row: every key > T and the lowest-position (k - count(> T)) keys == T, in ascending position
order, then -1 (and -inf values) up to k. Every path keeps position order (candidates are compacted in
position order), so the set, its order and the tie-break are the same whichever path a row takes.

Paths per row (config.py has the cost model): the whole window in registers (<= CAP columns; fewer than k
live: every live entry, streamed); a longer row is sampled for a threshold keeping ~k + MARGIN sigma
entries, streamed once compacting those candidates into scratch, and selected there; a row whose
candidates miss k or overflow (adversarial data) takes exact passes (16 thresholds counted per pass).
topk_split spreads a long row over `parts` programs (decode: few rows) and the last one to finish merges.
Row bases are 64-bit.
"""
import triton
import triton.language as tl

from ..common.naming import make_kernel_repr
from . import KEYS, RADIX_WS

PMAX = tl.constexpr(64)  # most programs per row in topk_split (config.py holds the same bound)


@triton.jit
def _raw_key(x):
    b = x.to(tl.int32, bitcast=True)
    return b ^ ((b >> 31) & 0x7FFFFFFF)


@triton.jit
def _to_key(x, valid):
    """int32 key ordered as the fp32 values; DEAD (INT32_MIN) where not valid, -inf or NaN."""
    return tl.where(valid & (x > float("-inf")), _raw_key(x), -2147483648)


@triton.jit
def _key_value(key):
    """The fp32 value of a key (the inverse of _raw_key)."""
    b = key ^ ((key >> 31) & 0x7FFFFFFF)
    return b.to(tl.float32, bitcast=True)


@triton.jit
def _add8(a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, b4, b5, b6, b7):
    return a0 + b0, a1 + b1, a2 + b2, a3 + b3, a4 + b4, a5 + b5, a6 + b6, a7 + b7


@triton.jit
def _live_min_max(n0, lo0, hi0, n1, lo1, hi1):
    return n0 + n1, tl.minimum(lo0, lo1), tl.maximum(hi0, hi1)


@triton.jit
def _mid(lo, hi):
    """lo + (hi - lo) // 2 for int32 lo < hi whose difference may pass INT32_MAX (taken as unsigned)."""
    return lo + ((hi - lo).to(tl.uint32, bitcast=True) >> 1).to(tl.int32, bitcast=True)


@triton.jit
def _probe(lo, hi, mid, vlo, vhi, j: tl.constexpr):
    """Threshold j of 8 inside (lo, hi) (int32, lo + 1 < hi): evenly spread in value (logits are smooth); the
    key-space midpoint for probe 4 and wherever the value's key is not strictly inside, so each round at least
    halves the bracket."""
    if j == 4:
        th = mid
    else:
        v = vlo + (vhi - vlo) * ((j + 1) / 9.0)
        g = _raw_key(v)
        th = tl.where((v != v) | (g <= lo) | (g >= hi), mid, g)
    return th


@triton.jit
def _ge(key, th):
    return (key >= th.to(tl.int32)).to(tl.int32)


@triton.jit
def _ge2(key, ta, tb):
    """count(key >= ta) in the low 16 bits, count(key >= tb) in the high 16 (blocks < 65536 entries)."""
    return tl.where(key >= ta.to(tl.int32), 1, 0) + tl.where(key >= tb.to(tl.int32), 65536, 0)


@triton.jit
def _add4(a0, a1, a2, a3, b0, b1, b2, b3):
    return a0 + b0, a1 + b1, a2 + b2, a3 + b3


@triton.jit
def _round8(key, lo, cnt_lo, hi, cnt_hi, need):
    """One search round (GPU): 8 thresholds inside (lo, hi) counted in one reduction; the tightest bracket."""
    vlo = _key_value(lo)
    vhi = _key_value(hi)
    mid = _mid(lo, hi)
    t0 = _probe(lo, hi, mid, vlo, vhi, 0)
    t1 = _probe(lo, hi, mid, vlo, vhi, 1)
    t2 = _probe(lo, hi, mid, vlo, vhi, 2)
    t3 = _probe(lo, hi, mid, vlo, vhi, 3)
    t4 = _probe(lo, hi, mid, vlo, vhi, 4)
    t5 = _probe(lo, hi, mid, vlo, vhi, 5)
    t6 = _probe(lo, hi, mid, vlo, vhi, 6)
    t7 = _probe(lo, hi, mid, vlo, vhi, 7)
    if key.shape[0] < 65536:  # two counts per int32: half the selects, adds and shuffles
        p01, p23, p45, p67 = tl.reduce((_ge2(key, t0, t1), _ge2(key, t2, t3), _ge2(key, t4, t5),
                                        _ge2(key, t6, t7)), 0, _add4)
        c0, c1, c2, c3 = p01 & 65535, p01 >> 16, p23 & 65535, p23 >> 16
        c4, c5, c6, c7 = p45 & 65535, p45 >> 16, p67 & 65535, p67 >> 16
    else:
        c0, c1, c2, c3, c4, c5, c6, c7 = tl.reduce(
            (_ge(key, t0), _ge(key, t1), _ge(key, t2), _ge(key, t3), _ge(key, t4), _ge(key, t5),
             _ge(key, t6), _ge(key, t7)), 0, _add8)
    nlo, nclo, nhi, nchi = _narrow(t0, c0, need, lo, cnt_lo, hi, cnt_hi)
    nlo, nclo, nhi, nchi = _narrow(t1, c1, need, nlo, nclo, nhi, nchi)
    nlo, nclo, nhi, nchi = _narrow(t2, c2, need, nlo, nclo, nhi, nchi)
    nlo, nclo, nhi, nchi = _narrow(t3, c3, need, nlo, nclo, nhi, nchi)
    nlo, nclo, nhi, nchi = _narrow(t4, c4, need, nlo, nclo, nhi, nchi)
    nlo, nclo, nhi, nchi = _narrow(t5, c5, need, nlo, nclo, nhi, nchi)
    nlo, nclo, nhi, nchi = _narrow(t6, c6, need, nlo, nclo, nhi, nchi)
    return _narrow(t7, c7, need, nlo, nclo, nhi, nchi)


@triton.jit
def _round32(key, lo, cnt_lo, hi, cnt_hi, need):
    """One search round (the interpreter: whole-array steps, its custom combine runs per element): 32
    thresholds (int64 lo, hi)."""
    jj = tl.arange(0, 32)
    vlo = _key_value(lo.to(tl.int32))
    vhi = _key_value(hi.to(tl.int32))
    width = hi - lo
    v = vlo + (vhi - vlo) * ((jj + 1).to(tl.float32) / 33.0)
    g = _raw_key(v).to(tl.int64)
    th = tl.where((v != v) | (g <= lo) | (g >= hi) | (jj == 16), lo + width // 2, g)
    cnt = tl.sum((key[:, None] >= th.to(tl.int32)[None, :]).to(tl.int32), axis=0)
    ge = cnt >= need
    return (tl.max(tl.where(ge, th, lo), axis=0), tl.min(tl.where(ge, cnt, cnt_lo), axis=0),
            tl.min(tl.where(ge, hi, th), axis=0), tl.max(tl.where(ge, cnt_hi, cnt), axis=0))


@triton.jit
def _rounds(key, lo, cnt_lo, hi, cnt_hi, need, slack, BIG: tl.constexpr, R8: tl.constexpr):
    """Search rounds on key while the bracket is open (lo + 1 < hi and count(>= lo) > need + slack) and, with
    BIG > 0, holds more than BIG keys (cnt_lo - cnt_hi of them: no count needed). Returns the bracket."""
    if BIG > 0:
        while (lo + 1 < hi) & (cnt_lo - need > slack) & (cnt_lo - cnt_hi > BIG):
            if R8:
                lo, cnt_lo, hi, cnt_hi = _round8(key, lo, cnt_lo, hi, cnt_hi, need)
            else:
                lo, cnt_lo, hi, cnt_hi = _round32(key, lo, cnt_lo, hi, cnt_hi, need)
    else:
        while (lo + 1 < hi) & (cnt_lo - need > slack):
            if R8:
                lo, cnt_lo, hi, cnt_hi = _round8(key, lo, cnt_lo, hi, cnt_hi, need)
            else:
                lo, cnt_lo, hi, cnt_hi = _round32(key, lo, cnt_lo, hi, cnt_hi, need)
    return lo, cnt_lo, hi, cnt_hi


@triton.jit
def _compact_keys(key, lo, hi, nscr, E: tl.constexpr, NT: tl.constexpr):
    """The keys lo <= key < hi into nscr[0, n), in any order, without a scan over the whole block: the [E, NT]
    view of a block whose thread t holds entries t, t + NT, ... (a 1-D block of NT threads: the view is free and
    column t is thread t's registers), each column's count, an exclusive scan of those (one entry per thread)
    and each column's running count (in registers). Any layout gives the same set; this one costs ~11
    instructions a key (sm90)."""
    k2 = tl.reshape(key, [E, NT])
    in2 = ((k2 >= lo) & (k2 < hi)).to(tl.int32)
    per = tl.sum(in2, axis=0)
    base = tl.cumsum(per, axis=0) - per - 1
    # each column's running count starts from its base: computed after the threads' scan, one key at a time with
    # its store (not all 32 counts held across the scan's barriers)
    pos = tl.cumsum(in2 + tl.where(tl.arange(0, E)[:, None] == 0, base[None, :], 0), axis=0)
    # stored as the 1-D block (a 2-D store would be given another layout: a shared-memory round trip)
    tl.store(nscr + tl.reshape(pos, [E * NT]), key, mask=tl.reshape(in2, [E * NT]) != 0)


@triton.jit
def _kth(key, lo, cnt_lo, hi, cnt_hi, need, slack, nscr, NARROW: tl.constexpr, NT: tl.constexpr,
         R8: tl.constexpr):
    """The largest T in [lo, hi) with count(key >= T) >= need, for a 1-D key block.

    Holds count(key >= lo) = cnt_lo (>= need, or the loop does not run) and count(key >= hi) = cnt_hi < need;
    lo >= INT32_MIN + 1 and hi <= a live key + 1 (so both fit int32). Each round counts 8 thresholds at once
    (one reduction: the rounds, not the compares, cost latency) and keeps the tightest bracket; ~5 rounds on
    smooth data, at most 32 on any. Stops when a threshold keeps at most need + slack keys (slack 0: exact)
    or the bracket is one key wide. Returns (T, count(key >= T)).

    NARROW > 0 (a power of two below the block's size): rounds on the whole block only while the bracket
    holds more than NARROW keys; then those keys (lo <= key < hi: cnt_lo - cnt_hi of them) are compacted into
    nscr (NARROW int32 of this program's scratch, in any order; NT: the program's threads) and the rounds go on
    on that [NARROW] block with the counts taken relative to it (count(>= th) - cnt_hi for th inside the
    bracket): the same thresholds, the same counts, the same T, at a fraction of a round's instructions. A
    bracket that never gets that small (ties) is searched on the whole block to the end, as with NARROW 0."""
    cnt_hi = cnt_lo * 0 + cnt_hi
    if R8:
        lo = lo.to(tl.int32)
        hi = hi.to(tl.int32)
    else:
        lo = lo.to(tl.int64)
        hi = hi.to(tl.int64)
    if NARROW > 0 and NARROW < key.shape[0]:
        lo, cnt_lo, hi, cnt_hi = _rounds(key, lo, cnt_lo, hi, cnt_hi, need, slack, NARROW, R8)
        if (lo + 1 < hi) & (cnt_lo - need > slack):  # open, at most NARROW keys inside
            tl.debug_barrier()  # every read of nscr before this (a previous row's search) is done
            if NT < key.shape[0]:
                _compact_keys(key, lo, hi, nscr, key.shape[0] // NT, NT)
            else:
                _compact_keys(key, lo, hi, nscr, 1, key.shape[0])
            tl.debug_barrier()  # the compacted keys visible to the whole program
            s = tl.arange(0, NARROW)
            small = tl.load(nscr + s, mask=s < cnt_lo - cnt_hi, other=-2147483648)
            slo, scnt, _shi, _sch = _rounds(small, lo, cnt_lo - cnt_hi, hi, cnt_hi * 0, need - cnt_hi, slack, 0,
                                            R8)
            lo = slo
            cnt_lo = scnt + cnt_hi
    else:
        lo, cnt_lo, hi, cnt_hi = _rounds(key, lo, cnt_lo, hi, cnt_hi, need, slack, 0, R8)
    return lo.to(tl.int32), cnt_lo


@triton.jit
def _narrow(th, c, need, lo, cnt_lo, hi, cnt_hi):
    """The bracket after learning count(key >= th) = c (counts fall as thresholds rise)."""
    ge = c >= need
    up = ge & (th > lo)
    down = (c < need) & (th < hi)
    return (tl.where(up, th, lo), tl.where(up, c, cnt_lo), tl.where(down, th, hi), tl.where(down, c, cnt_hi))


@triton.jit
def _emit_tile(key, col, T, take_eq, run, run_eq, irow, vrow, TIES: tl.constexpr, VALUES: tl.constexpr):
    """Append a tile's selected entries at output slots run, run + 1, ...: key > T, and the keys == T while the
    row's running count of them is <= take_eq (TIES), or every key >= T (no ties to break). Returns the running
    (selected, ties seen)."""
    if TIES:
        eq = (key == T).to(tl.int32)
        sel = (key > T) | ((eq != 0) & (run_eq + tl.cumsum(eq, axis=0) <= take_eq))
        run_eq += tl.sum(eq, axis=0)
    else:
        sel = key >= T
    si = sel.to(tl.int32)
    pos = run + tl.cumsum(si, axis=0) - 1
    tl.store(irow + pos, col, mask=sel)
    if VALUES:
        tl.store(vrow + pos, _key_value(key), mask=sel)
    return run + tl.sum(si, axis=0), run_eq


@triton.jit
def _emit_row(lrow, c0, c1, off, T, take_eq, irow, vrow, TILE: tl.constexpr, TIES: tl.constexpr,
              VALUES: tl.constexpr):
    """The selected entries of the row's window [c0, c1), in position order, streamed in tiles (the search
    held only the keys; re-reading the row from L1/L2 here keeps registers for more rows in flight)."""
    run = tl.full([], 0, tl.int32)
    run_eq = tl.full([], 0, tl.int32)
    x = _load(lrow, c0, c1, TILE)
    for t0 in range(c0, c1, TILE):
        x_next = _load(lrow, t0 + TILE, c1, TILE)  # in flight while this tile is emitted
        key, cols = _keys(x, t0, c0, c1, TILE)
        run, run_eq = _emit_tile(key, cols + off, T, take_eq, run, run_eq, irow, vrow, TIES, VALUES)
        x = x_next
    return run


@triton.jit
def _slots(key_ptr, cnt_ptr, s, capp, parts, SPLIT: tl.constexpr):
    """Which of the candidate slots s hold a candidate: slot s is entry s % capp of part s // capp. SPLIT: the
    number of slots where capp is a runtime value (topk_split), 0 where it is a constant (topk_rows: CAP, 1 part).
    What the two steps below did to the merge's code: docs/DESIGN-NOTES.md (Top-k)."""
    if SPLIT > 0:
        if SPLIT <= 65536:
            # s // capp as the high word of s * m, m = 2^32 / capp rounded up (capp >= 2): s * m / 2^32 = s / capp +
            # s * e / (capp 2^32), e = m capp - 2^32 < capp, so exact while s * e < 2^32 (s, capp <= SPLIT); no
            # call of a division routine a slot
            part = tl.umulhi(s.to(tl.uint32), 0xFFFFFFFF // capp.to(tl.uint32) + 1).to(tl.int32)
        else:
            part = s // capp
        # the part clamped to a written count, not the load masked (part < parts masks the slot): a masked load's
        # predicate and zeroed register would stay live a slot until it lands
        n = tl.load(cnt_ptr + tl.minimum(part, parts - 1), cache_modifier=".cg")
        ok = (part < parts) & (s - part * capp < n)
    else:
        part = s // capp
        ok = (part < parts) & (s - part * capp < tl.load(cnt_ptr + part, mask=part < parts, other=0,
                                                           cache_modifier=".cg"))
    return ok


@triton.jit
def _emit_slots(key_ptr, col_ptr, cnt_ptr, capp, parts, nslots, off, T, take_eq, irow, vrow, TILE: tl.constexpr,
                TIES: tl.constexpr, VALUES: tl.constexpr, SPLIT: tl.constexpr):
    """The selected candidates of the scratch slots [0, nslots), in slot order (= position order), in tiles."""
    run = tl.full([], 0, tl.int32)
    run_eq = tl.full([], 0, tl.int32)
    for s0 in range(0, nslots, TILE):
        s = s0 + tl.arange(0, TILE)
        ok = _slots(key_ptr, cnt_ptr, s, capp, parts, SPLIT)
        key = tl.load(key_ptr + s, mask=ok, other=-2147483648, cache_modifier=".cg")
        col = tl.load(col_ptr + s, mask=ok, other=0, cache_modifier=".cg")
        run, run_eq = _emit_tile(key, col + off, T, take_eq, run, run_eq, irow, vrow, TIES, VALUES)
    return run


@triton.jit
def _select_slots(key_ptr, col_ptr, cnt_ptr, capp, parts, t, total, off, k, irow, vrow, nscr, SL: tl.constexpr,
                  TILE: tl.constexpr, VALUES: tl.constexpr, NARROW: tl.constexpr, NT: tl.constexpr,
                  R8: tl.constexpr, SPLIT: tl.constexpr):
    """Top-k of the candidates (every live key >= t, total of them, k <= total <= SL) in the scratch slots
    (one part: slots [0, total); several: parts of capp slots each). nscr: NARROW int32 of scratch (_kth)."""
    nslots = tl.where(parts == 1, total, SL)  # one part: emit only its filled slots
    s = tl.arange(0, SL)
    ckey = tl.load(key_ptr + s, mask=_slots(key_ptr, cnt_ptr, s, capp, parts, SPLIT), other=-2147483648,
                   cache_modifier=".cg")
    T, n_ge = _kth(ckey, t, total, tl.max(ckey, axis=0).to(tl.int64) + 1, 0, k, 0, nscr, NARROW, NT, R8)
    if n_ge <= k:
        n = _emit_slots(key_ptr, col_ptr, cnt_ptr, capp, parts, nslots, off, T, 0, irow, vrow, TILE, False, VALUES,
                        SPLIT)
    else:  # ties at T: the lowest positions
        n_gt = tl.sum((ckey > T).to(tl.int32), axis=0)
        n = _emit_slots(key_ptr, col_ptr, cnt_ptr, capp, parts, nslots, off, T, k - n_gt, irow, vrow, TILE, True,
                        VALUES, SPLIT)
    return n


@triton.jit
def _pad(irow, vrow, n_sel, k, PAD: tl.constexpr, VALUES: tl.constexpr):
    """-1 (and -inf) in the slots [n_sel, k) a short row leaves."""
    offs = tl.arange(0, PAD)
    for p0 in range(n_sel, k, PAD):
        p = p0 + offs
        m = p < k
        tl.store(irow + p, tl.full([PAD], -1, tl.int32), mask=m)
        if VALUES:
            tl.store(vrow + p, tl.full([PAD], float("-inf"), tl.float32), mask=m)


@triton.jit
def _bounds(row, ks_ptr, ke_ptr, ctx_ptr, ncols, stride_ks, stride_ke, stride_ctx_b, stride_ctx_t, next_n, max_ctx,
            ctx_shift, WINDOW: tl.constexpr, COMPRESSED: tl.constexpr, PAGED: tl.constexpr):
    """(c0, c1, off): the row's live columns [c0, c1) and what to add to a column to get its position."""
    zero = tl.full([], 0, tl.int32)
    r64 = tl.cast(row, tl.int64)
    if PAGED:  # decode row b * next_n + t ends at ctx[b] - next_n + 1 + t (1-D lens) or ctx[b, t] (2-D)
        b = r64 // next_n
        t = r64 - b * next_n
        v = tl.load(ctx_ptr + b * stride_ctx_b + t * stride_ctx_t)
        e = tl.minimum(tl.maximum(v + (ctx_shift * (t + 1 - next_n)).to(tl.int32), 0), max_ctx)
        s = zero
    elif WINDOW:
        s = tl.load(ks_ptr + r64 * stride_ks)
        e = tl.load(ke_ptr + r64 * stride_ke)
    else:
        s = zero
        e = zero + ncols
    if COMPRESSED:  # column c holds position ks + c; the row has ke - ks columns
        c0 = zero
        c1 = tl.minimum(e - s, ncols)
        off = s
    else:
        c0 = tl.maximum(s, 0)
        c1 = tl.minimum(e, ncols)
        off = zero
    return c0, tl.maximum(c1, c0), off


@triton.jit
def _load(lrow, t0, a1, TILE: tl.constexpr):
    """The raw tile at t0, up to a1. Nothing is read for a tile wholly past a1 (the prefetch of the tile after the
    last)."""
    cols = t0 + tl.arange(0, TILE)
    return tl.load(lrow + cols, mask=cols < a1, other=float("-inf")).to(tl.float32)


@triton.jit
def _keys(x, t0, a0, a1, TILE: tl.constexpr):
    """Keys and columns of a loaded tile, live in [a0, a1)."""
    cols = t0 + tl.arange(0, TILE)
    return _to_key(x, (cols >= a0) & (cols < a1)), cols


@triton.jit
def _tile(lrow, t0, a0, a1, TILE: tl.constexpr):
    """Keys and columns of the tile at t0, live in [a0, a1)."""
    return _keys(_load(lrow, t0, a1, TILE), t0, a0, a1, TILE)


@triton.jit
def _short_row(lrow, c0, c1, off, k, irow, vrow, nscr, CAP: tl.constexpr, TILE: tl.constexpr, VALUES: tl.constexpr,
               NARROW: tl.constexpr, NT: tl.constexpr, R8: tl.constexpr):
    """A window of at most k live columns: every live entry, streamed; else one that fits a [CAP] block:
    its keys searched in registers, then the selected entries streamed. nscr: NARROW int32 of scratch (_kth)."""
    if c1 - c0 <= k:
        n = _emit_row(lrow, c0, c1, off, -2147483647, 0, irow, vrow, TILE, False, VALUES)
    else:
        key, _cols = _tile(lrow, c0, c0, c1, CAP)
        live = key != -2147483648
        if R8:  # one reduction, not three (the interpreter runs a custom combine per element: three there)
            nlive, kmin, kmax = tl.reduce((live.to(tl.int32), tl.where(live, key, 2147483647), key), 0,
                                          _live_min_max)
        else:
            nlive = tl.sum(live.to(tl.int32), axis=0)
            kmin = tl.min(tl.where(live, key, 2147483647), axis=0)
            kmax = tl.max(key, axis=0)
        lo = tl.where(nlive <= k, -2147483647, kmin)
        T, n_ge = _kth(key, lo, nlive, kmax.to(tl.int64) + 1, 0, k, 0, nscr, NARROW, NT, R8)
        if n_ge <= k:
            n = _emit_row(lrow, c0, c1, off, T, 0, irow, vrow, TILE, False, VALUES)
        else:  # ties at T: the lowest positions
            n_gt = tl.sum((key > T).to(tl.int32), axis=0)
            n = _emit_row(lrow, c0, c1, off, T, k - n_gt, irow, vrow, TILE, True, VALUES)
    return n


@triton.jit
def _sample_threshold(lrow, c0, c1, k, room: tl.constexpr, SAMPLE: tl.constexpr, MARGIN: tl.constexpr,
                      R8: tl.constexpr):
    """A threshold keeping ~k + MARGIN sigma of the window's entries: a rank of SAMPLE evenly spread ones. On
    very long rows the margin shrinks (not below one sigma) so the kept count expects at most 3/4 of room."""
    L = c1 - c0
    so = tl.arange(0, SAMPLE)
    spos = c0 + ((so.to(tl.int64) * L) // SAMPLE).to(tl.int32)
    skey = _to_key(tl.load(lrow + spos).to(tl.float32), so >= 0)
    slive = skey != -2147483648
    ns = tl.sum(slive.to(tl.int32), axis=0)
    p = (k + 0.0) / L.to(tl.float32)
    mean = SAMPLE * p
    sd = tl.sqrt(mean * (1.0 - p))
    fit = (0.75 * SAMPLE * room) / L.to(tl.float32)
    r = tl.minimum(mean + MARGIN * sd, tl.maximum(fit, mean + sd)).to(tl.int32) + 2
    r = tl.minimum(r, ns)
    none = r < 1
    lo0 = tl.where(none, -2147483647, tl.min(tl.where(slive, skey, 2147483647), axis=0))
    hi0 = tl.where(none, -2147483647, tl.max(skey, axis=0).to(tl.int64) + 1)
    t, _c = _kth(skey, lo0, ns, hi0, 0, r, r // 16 + 1, lrow, 0, 1, R8)  # a rank within 1/16: a threshold, not T
    return t


@triton.jit
def _compact(lrow, a0, a1, t, dst_key, dst_col, cap, TILE: tl.constexpr):
    """Keys >= t of columns [a0, a1) and their columns into dst (position order, the first `cap` kept).
    Returns how many there are (also past cap)."""
    run = tl.full([], 0, tl.int32)
    x = _load(lrow, a0, a1, TILE)
    for t0 in range(a0, a1, TILE):
        x_next = _load(lrow, t0 + TILE, a1, TILE)  # two tiles in flight per program (the pass is latency-bound)
        key, cols = _keys(x, t0, a0, a1, TILE)
        x = x_next
        ci = (key >= t).to(tl.int32)
        pos = run + tl.cumsum(ci, axis=0) - 1
        ok = (ci != 0) & (pos < cap)
        tl.store(dst_key + pos, key, mask=ok)
        tl.store(dst_col + pos, cols, mask=ok)
        run += tl.sum(ci, axis=0)
    return run


@triton.jit
def _exact_row(lrow, c0, c1, off, k, t, total, irow, vrow, TILE: tl.constexpr, VALUES: tl.constexpr):
    """The rare fallback (count(>= t) = total missed k or overflowed the candidates): 16 thresholds counted
    per pass over the row narrow [lo, hi) 16-fold until T is known, then one emitting pass. Returns the
    number written."""
    FB: tl.constexpr = TILE // 4
    over = total >= k  # T >= t; else T < t
    lo = tl.where(over, t, -2147483647).to(tl.int64)
    hi = tl.where(over, 2147483648, t.to(tl.int64))
    cnt_lo = tl.where(over, total, -1)  # -1: count(>= lo) not known yet
    jj = tl.arange(0, 16)
    while (hi - lo > 1) & (cnt_lo != k):
        step = (hi - lo + 15) // 16
        th = lo + jj.to(tl.int64) * step
        th32 = tl.minimum(th, 2147483647).to(tl.int32)  # no key reaches INT32_MAX
        cvec = tl.zeros([16], tl.int32)
        for t0 in range(c0, c1, FB):
            fkey, _fc = _tile(lrow, t0, c0, c1, FB)
            cvec += tl.sum((fkey[:, None] >= th32[None, :]).to(tl.int32), axis=0)
        nge = tl.sum(((cvec >= k) & (th < hi)).to(tl.int32), axis=0)
        few = nge == 0  # only when lo was unverified: fewer than k live entries
        j = tl.maximum(nge - 1, 0)
        new_lo = tl.sum(tl.where(jj == j, th, 0), axis=0)
        new_cnt = tl.sum(tl.where(jj == j, cvec, 0), axis=0)
        nxt = tl.sum(tl.where(jj == j + 1, th, 0), axis=0)
        new_hi = tl.where((j + 1 < 16) & (nxt < hi) & (nxt > new_lo), nxt, hi)
        hi = tl.where(few, lo + 1, new_hi)
        lo = tl.where(few, lo, new_lo)
        cnt_lo = tl.where(few, k, new_cnt)
    T = lo.to(tl.int32)
    n_gt = tl.full([], 0, tl.int32)
    for t0 in range(c0, c1, TILE):
        key, _cols = _tile(lrow, t0, c0, c1, TILE)
        n_gt += tl.sum((key > T).to(tl.int32), axis=0)
    return _emit_row(lrow, c0, c1, off, T, k - n_gt, irow, vrow, TILE, True, VALUES)


@triton.jit(repr=make_kernel_repr("topk_rows", KEYS))
def topk_rows(
    logits_ptr,  # fp32 or bf16 [R, stride_l]
    ks_ptr,  # int32 [R] (any stride, 0 allowed): window start (WINDOW)
    ke_ptr,  # int32 [R] (any stride): window end (WINDOW)
    ctx_ptr,  # int32 context lens [B] or [B, next_n] (PAGED): row b * next_n + t
    idx_ptr,  # int32 [R, stride_idx]: output positions
    val_ptr,  # [R, stride_val] (VALUES): output values, in its own dtype
    scratch_ptr,  # int32 [grid, NARROW (+ 2 CAP + PMAX when ncols >= CAP)]: each program's narrowed search
    # keys (NARROW > 0), candidate keys, columns, count
    arrive_ptr,  # (topk_split only)
    stats_ptr,  # int32 [R] (STATS): 0 registers, 1 sampled candidates, 2 exact passes, 3 split + merge
    R, ncols, k, parts, stride_l, stride_ks, stride_ke, stride_ctx_b, stride_ctx_t, next_n, max_ctx, ctx_shift,
    stride_idx, stride_val,
    CAP: tl.constexpr, SAMPLE: tl.constexpr, TILE: tl.constexpr,
    NW: tl.constexpr,  # = num_warps (names the variant)
    MARGIN: tl.constexpr, WINDOW: tl.constexpr, COMPRESSED: tl.constexpr, PAGED: tl.constexpr,
    VALUES: tl.constexpr, STATS: tl.constexpr,
    R8: tl.constexpr,  # one 8-way reduction per search round (GPU), else a vector of thresholds (the interpreter)
    NARROW: tl.constexpr,  # > 0: the k-th key search goes on on a compacted [NARROW] block once its bracket fits
):
    """Persistent: program pid selects rows pid, pid + grid, ... one at a time (many rows: prefill)."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    # per program: NARROW search keys, then (rows longer than CAP: config.py's long_rows, the same test)
    # candidate keys [CAP], columns [CAP], count
    if NARROW > 0:
        scr_base = scratch_ptr + pid.to(tl.int64) * (NARROW + tl.where(ncols >= CAP, 2 * CAP + PMAX, 0))
    else:
        scr_base = scratch_ptr + pid.to(tl.int64) * (2 * CAP + PMAX)
    for row in range(pid, R, nprog):
        r64 = tl.cast(row, tl.int64)  # (the loop variable is a plain int in the interpreter)
        lrow = logits_ptr + r64 * stride_l
        irow = idx_ptr + r64 * stride_idx
        vrow = val_ptr + r64 * stride_val
        c0, c1, off = _bounds(row, ks_ptr, ke_ptr, ctx_ptr, ncols, stride_ks, stride_ke, stride_ctx_b, stride_ctx_t,
                              next_n, max_ctx, ctx_shift, WINDOW, COMPRESSED, PAGED)
        nscr = scr_base  # NARROW keys; _kth's barriers order its reuse
        if c1 - c0 <= CAP:
            n = _short_row(lrow, c0, c1, off, k, irow, vrow, nscr, CAP, TILE, VALUES, NARROW, 32 * NW, R8)
            path = tl.full([], 0, tl.int32)
        else:
            t = _sample_threshold(lrow, c0, c1, k, CAP, SAMPLE, MARGIN, R8)
            # (row // R == 0, unknown to the compiler: the scratch addresses are not hoisted out of the row loop
            # and held in registers through every row)
            scr_key = scr_base + (r64 // R) + NARROW
            scr_col = scr_key + CAP
            tl.debug_barrier()  # the previous row's scratch reads are done before this row writes it
            total = _compact(lrow, c0, c1, t, scr_key, scr_col, CAP, TILE)
            tl.store(scr_col + CAP, total)
            tl.debug_barrier()  # scratch writes visible to the whole program
            if (total >= k) & (total <= CAP):
                n = _select_slots(scr_key, scr_col, scr_col + CAP, CAP, 1, t, total, off, k, irow, vrow, nscr, CAP,
                                  TILE, VALUES, NARROW, 32 * NW, R8, 0)
                path = tl.full([], 1, tl.int32)
            else:
                n = _exact_row(lrow, c0, c1, off, k, t, total, irow, vrow, TILE, VALUES)
                path = tl.full([], 2, tl.int32)
        _pad(irow, vrow, n, k, TILE, VALUES)
        if STATS:
            tl.store(stats_ptr + r64, path)


@triton.jit(repr=make_kernel_repr("topk_split", KEYS))
def topk_split(
    logits_ptr, ks_ptr, ke_ptr, ctx_ptr, idx_ptr, val_ptr,
    scratch_ptr,  # int32 [R, 4 CAP + PMAX + NARROW]: candidate keys [2 CAP], columns [2 CAP], per-part counts,
    # the narrowed search's keys
    arrive_ptr,  # int32 [R], zeroed: programs of the row done so far
    stats_ptr,
    R, ncols, k, parts, stride_l, stride_ks, stride_ke, stride_ctx_b, stride_ctx_t, next_n, max_ctx, ctx_shift,
    stride_idx, stride_val,
    CAP: tl.constexpr, SAMPLE: tl.constexpr, TILE: tl.constexpr, NW: tl.constexpr,
    MARGIN: tl.constexpr, WINDOW: tl.constexpr, COMPRESSED: tl.constexpr, PAGED: tl.constexpr,
    VALUES: tl.constexpr, STATS: tl.constexpr, R8: tl.constexpr, NARROW: tl.constexpr,
):
    """`parts` programs per row (grid R * parts; few long rows: decode). Each computes the same sampled
    threshold, compacts the candidates of its 1/parts of the window into its own 2 CAP / parts slots, and
    counts in; the last to count in selects from all slots (position order: part by part). A row that fits
    in registers is done by its part 0 alone."""
    pid = tl.program_id(0)
    row = pid // parts
    part = pid - row * parts
    r64 = row.to(tl.int64)
    lrow = logits_ptr + r64 * stride_l
    irow = idx_ptr + r64 * stride_idx
    vrow = val_ptr + r64 * stride_val
    c0, c1, off = _bounds(row, ks_ptr, ke_ptr, ctx_ptr, ncols, stride_ks, stride_ke, stride_ctx_b, stride_ctx_t,
                          next_n, max_ctx, ctx_shift, WINDOW, COMPRESSED, PAGED)
    MC: tl.constexpr = 2 * CAP
    key_ptr = scratch_ptr + r64 * (2 * MC + PMAX + NARROW)
    nscr = key_ptr + 2 * MC + PMAX  # the row's NARROW search keys (one program of the row searches)
    if c1 - c0 <= CAP:
        if part == 0:
            n = _short_row(lrow, c0, c1, off, k, irow, vrow, nscr, CAP, TILE, VALUES, NARROW, 32 * NW, R8)
            _pad(irow, vrow, n, k, TILE, VALUES)
            if STATS:
                tl.store(stats_ptr + r64, 0)
    else:
        col_ptr = key_ptr + MC
        cnt_ptr = col_ptr + MC
        capp = MC // parts
        t = _sample_threshold(lrow, c0, c1, k, MC, SAMPLE, MARGIN, R8)
        L = (c1 - c0).to(tl.int64)
        a0 = c0 + ((part * L) // parts).to(tl.int32)
        a1 = c0 + (((part + 1) * L) // parts).to(tl.int32)
        n_part = _compact(lrow, a0, a1, t, key_ptr + part * capp, col_ptr + part * capp, capp, TILE)
        tl.store(cnt_ptr + part, n_part)
        tl.debug_barrier()  # every thread's candidates written before the count-in (release, below)
        done = tl.atomic_add(arrive_ptr + r64, 1, sem="acq_rel", scope="gpu")
        if done == parts - 1:  # the last of the row: every part's slots are written (acquire, above)
            pp = tl.arange(0, PMAX)
            cnts = tl.load(cnt_ptr + pp, mask=pp < parts, other=0, cache_modifier=".cg")
            total = tl.sum(cnts, axis=0)
            if (total >= k) & (tl.max(cnts, axis=0) <= capp):
                n = _select_slots(key_ptr, col_ptr, cnt_ptr, capp, parts, t, total, off, k, irow, vrow, nscr, MC,
                                  TILE, VALUES, NARROW, 32 * NW, R8, MC)
                path = tl.full([], 3, tl.int32)
            else:
                n = _exact_row(lrow, c0, c1, off, k, t, total, irow, vrow, TILE, VALUES)
                path = tl.full([], 2, tl.int32)
            _pad(irow, vrow, n, k, TILE, VALUES)
            if STATS:
                tl.store(stats_ptr + r64, path)


# ---------------------------------------------------------------- radix select (kind 'radix')
# Per-row top-k by radix select: four launches, each spread over `parts` programs a row, so few long rows (decode)
# use the whole GPU and no step waits on one program's chain of reductions.
#
# Keys are the order-preserving int32 above (DEAD for dead entries). A key's digits: d1 = its top 12 bits (4096
# bins), d2 the next 12, d3 the low 8. Per row, in an int32 workspace zeroed before the first launch: the d1
# histogram, the candidate count, T and the ties taken at T, and per program: entries above the d1 bin of the k-th
# key, and entries of that bin above T and equal to T.
#
#   hist   every program: the d1 histogram of its chunk, added into the row's (one atomic per non-empty bin);
#   cand   every program: b1, the d1 bin holding the k-th key (suffix sums of the histogram); counts its entries above
#          b1 and appends its entries in b1 (the candidates, any order) to the row's candidate slots;
#   kth    one program a row: the k-th key T among the candidates, by the d2 then d3 histograms, and the ties at T
#          to take; then each program's candidates above and at T. When the candidates overflow their CAND slots
#          the same steps read the row itself (exact, slower; adversarial data).
#   emit   every program: its offset (the programs before it: entries above b1, above T, ties taken in position
#          order) and its selected entries in position order; program 0 pads -1 (and -inf) to k.
#
# The set, its order and the tie-break are those of topk_rows / topk_split (ascending positions, ties at the k-th
# value to the lowest positions). Row bases are 64-bit.

BINS = tl.constexpr(4096)  # d1 and d2 bins
LOW = tl.constexpr(256)  # d3 bins
NCAND = tl.constexpr(4096)  # workspace words after the histogram: candidate count, T, ties taken at T
T_AT = tl.constexpr(4097)
TIES_AT = tl.constexpr(4098)
ABOVE = tl.constexpr(4100)  # [PMAX]: each program's entries above b1
GT = tl.constexpr(4100 + 64)  # [PMAX]: each program's candidates above T
EQ = tl.constexpr(4100 + 128)  # [PMAX]: each program's candidates equal to T
WS = tl.constexpr(RADIX_WS)  # workspace words a row: 4100 + 3 PMAX


@triton.jit
def _d1(key):
    """The top 12 bits of a key as a bin in [0, 4096), in key order."""
    return (key >> 20) + 2048


@triton.jit
def _chunk(c0, c1, part, parts):
    """Program `part`'s columns [a0, a1) of the row's [c0, c1), and the chunk length (the owner of column c is
    (c - c0) // chunk)."""
    ch = tl.maximum((c1 - c0 + parts - 1) // parts, 1)
    a0 = tl.minimum(c0 + part * ch, c1)
    return a0, tl.minimum(a0 + ch, c1), ch


@triton.jit
def _bin_of_kth(h, need, NB: tl.constexpr):
    """(b, above): the highest bin b whose suffix count reaches need, and the count above it; b = -1 when the
    whole histogram holds fewer than need (then above is that whole count)."""
    bins = tl.arange(0, NB)
    suffix = tl.cumsum(h, 0, reverse=True)
    b = tl.max(tl.where(suffix >= need, bins, -1), 0)
    above = tl.sum(tl.where(bins > b, h, 0), 0)
    return b, above


@triton.jit
def _row(pid_row, logits_ptr, ks_ptr, ke_ptr, ctx_ptr, ws_ptr, ncols, stride_l, stride_ks, stride_ke, stride_ctx_b,
         stride_ctx_t, next_n, max_ctx, ctx_shift, WINDOW: tl.constexpr, COMPRESSED: tl.constexpr,
         PAGED: tl.constexpr):
    """The row's logits, workspace, live columns [c0, c1) and position offset."""
    r64 = pid_row.to(tl.int64)
    c0, c1, off = _bounds(pid_row, ks_ptr, ke_ptr, ctx_ptr, ncols, stride_ks, stride_ke, stride_ctx_b, stride_ctx_t,
                          next_n, max_ctx, ctx_shift, WINDOW, COMPRESSED, PAGED)
    return logits_ptr + r64 * stride_l, ws_ptr + r64 * WS, c0, c1, off


@triton.jit(repr=make_kernel_repr("topk_radix_hist", KEYS))
def topk_radix_hist(logits_ptr, ks_ptr, ke_ptr, ctx_ptr, idx_ptr, val_ptr, cand_ptr, ws_ptr, stats_ptr,
                    R, ncols, k, parts, stride_l, stride_ks, stride_ke, stride_ctx_b, stride_ctx_t, next_n, max_ctx,
                    ctx_shift, stride_idx, stride_val,
                    CAND: tl.constexpr, TILE: tl.constexpr, NW: tl.constexpr, WINDOW: tl.constexpr,
                    COMPRESSED: tl.constexpr, PAGED: tl.constexpr, VALUES: tl.constexpr):
    """Grid (R, parts): the d1 histogram of this program's chunk, added into the row's."""
    part = tl.program_id(1)
    lrow, wrow, c0, c1, _off = _row(tl.program_id(0), logits_ptr, ks_ptr, ke_ptr, ctx_ptr, ws_ptr, ncols, stride_l,
                                    stride_ks, stride_ke, stride_ctx_b, stride_ctx_t, next_n, max_ctx, ctx_shift,
                                    WINDOW, COMPRESSED, PAGED)
    a0, a1, _ch = _chunk(c0, c1, part, parts)
    h = tl.zeros([BINS], tl.int32)
    for t0 in range(a0, a1, TILE):
        key, _cols = _tile(lrow, t0, a0, a1, TILE)
        h += tl.histogram(_d1(key), BINS, mask=key != -2147483648)
    tl.atomic_add(wrow + tl.arange(0, BINS), h, mask=h > 0, sem="relaxed")


@triton.jit(repr=make_kernel_repr("topk_radix_cand", KEYS))
def topk_radix_cand(logits_ptr, ks_ptr, ke_ptr, ctx_ptr, idx_ptr, val_ptr, cand_ptr, ws_ptr, stats_ptr,
                    R, ncols, k, parts, stride_l, stride_ks, stride_ke, stride_ctx_b, stride_ctx_t, next_n, max_ctx,
                    ctx_shift, stride_idx, stride_val,
                    CAND: tl.constexpr, TILE: tl.constexpr, NW: tl.constexpr, WINDOW: tl.constexpr,
                    COMPRESSED: tl.constexpr, PAGED: tl.constexpr, VALUES: tl.constexpr):
    """Grid (R, parts): this program's entries above b1 (counted) and in b1 (appended to the candidate slots)."""
    part = tl.program_id(1)
    row = tl.program_id(0)
    lrow, wrow, c0, c1, _off = _row(row, logits_ptr, ks_ptr, ke_ptr, ctx_ptr, ws_ptr, ncols, stride_l, stride_ks,
                                    stride_ke, stride_ctx_b, stride_ctx_t, next_n, max_ctx, ctx_shift, WINDOW,
                                    COMPRESSED, PAGED)
    b1, _above = _bin_of_kth(tl.load(wrow + tl.arange(0, BINS)), k, BINS)
    ckey = cand_ptr + row.to(tl.int64) * (2 * CAND)
    a0, a1, _ch = _chunk(c0, c1, part, parts)
    n_above = tl.full([], 0, tl.int32)
    for t0 in range(a0, a1, TILE):
        key, cols = _tile(lrow, t0, a0, a1, TILE)
        d = _d1(key)
        live = key != -2147483648
        n_above += tl.sum((live & (d > b1)).to(tl.int32), 0)
        inb = (live & (d == b1)).to(tl.int32)
        n_in = tl.sum(inb, 0)
        if n_in > 0:
            slot = tl.atomic_add(wrow + NCAND, n_in, sem="relaxed") + tl.cumsum(inb, 0) - 1
            ok = (inb != 0) & (slot < CAND)
            tl.store(ckey + slot, key, mask=ok)
            tl.store(ckey + CAND + slot, cols, mask=ok)
    tl.store(wrow + ABOVE + part, n_above)


@triton.jit
def _cands(lrow, ckey, t0, n, b1, from_row, c0, c1, CAND: tl.constexpr, TILE: tl.constexpr):
    """A tile of the d1 == b1 entries: the candidate slots [t0, t0 + TILE) of n, or (from_row) the row's columns
    [t0, t0 + TILE) of [c0, c1). Returns keys (DEAD where none) and positions (columns)."""
    if from_row:
        key, pos = _tile(lrow, t0, c0, c1, TILE)
        key = tl.where(_d1(key) == b1, key, -2147483648)
    else:
        i = t0 + tl.arange(0, TILE)
        key = tl.load(ckey + i, mask=i < n, other=-2147483648)
        pos = tl.load(ckey + CAND + i, mask=i < n, other=0)
    return key, pos


@triton.jit(repr=make_kernel_repr("topk_radix_kth", KEYS))
def topk_radix_kth(logits_ptr, ks_ptr, ke_ptr, ctx_ptr, idx_ptr, val_ptr, cand_ptr, ws_ptr, stats_ptr,
                   R, ncols, k, parts, stride_l, stride_ks, stride_ke, stride_ctx_b, stride_ctx_t, next_n, max_ctx,
                   ctx_shift, stride_idx, stride_val,
                   CAND: tl.constexpr, TILE: tl.constexpr, NW: tl.constexpr, WINDOW: tl.constexpr,
                   COMPRESSED: tl.constexpr, PAGED: tl.constexpr, VALUES: tl.constexpr):
    """Grid (R,): T, the ties taken at T, and each program's candidates above and at T."""
    row = tl.program_id(0)
    lrow, wrow, c0, c1, _off = _row(row, logits_ptr, ks_ptr, ke_ptr, ctx_ptr, ws_ptr, ncols, stride_l, stride_ks,
                                    stride_ke, stride_ctx_b, stride_ctx_t, next_n, max_ctx, ctx_shift, WINDOW,
                                    COMPRESSED, PAGED)
    b1, above = _bin_of_kth(tl.load(wrow + tl.arange(0, BINS)), k, BINS)
    if b1 < 0:  # at most k live entries: all taken (every live key is above DEAD; no ties)
        tl.store(wrow + T_AT, -2147483648)
    else:
        ckey = cand_ptr + row.to(tl.int64) * (2 * CAND)
        n = tl.load(wrow + NCAND)
        from_row = n > CAND  # the slots overflowed: read the row itself
        lo = tl.where(from_row, c0, 0)
        hi = tl.where(from_row, c1, n)
        need = k - above
        h2 = tl.zeros([BINS], tl.int32)
        for t0 in range(lo, hi, TILE):
            key, _pos = _cands(lrow, ckey, t0, n, b1, from_row, c0, c1, CAND, TILE)
            h2 += tl.histogram((key >> 8) & 4095, BINS, mask=key != -2147483648)
        b2, above2 = _bin_of_kth(h2, need, BINS)
        h3 = tl.zeros([LOW], tl.int32)
        for t0 in range(lo, hi, TILE):
            key, _pos = _cands(lrow, ckey, t0, n, b1, from_row, c0, c1, CAND, TILE)
            h3 += tl.histogram(key & 255, LOW, mask=(key != -2147483648) & (((key >> 8) & 4095) == b2))
        b3, above3 = _bin_of_kth(h3, need - above2, LOW)
        T = ((b1 - 2048) << 20) | (b2 << 8) | b3
        _a0, _a1, ch = _chunk(c0, c1, 0, parts)
        gt = tl.zeros([PMAX], tl.int32)
        eq = tl.zeros([PMAX], tl.int32)
        for t0 in range(lo, hi, TILE):
            key, pos = _cands(lrow, ckey, t0, n, b1, from_row, c0, c1, CAND, TILE)
            owner = (pos - c0) // ch
            gt += tl.histogram(owner, PMAX, mask=(key > T) & (key != -2147483648))
            eq += tl.histogram(owner, PMAX, mask=key == T)
        p = tl.arange(0, PMAX)
        tl.store(wrow + GT + p, gt)
        tl.store(wrow + EQ + p, eq)
        tl.store(wrow + T_AT, T)
        tl.store(wrow + TIES_AT, need - above2 - above3)


@triton.jit(repr=make_kernel_repr("topk_radix_emit", KEYS))
def topk_radix_emit(logits_ptr, ks_ptr, ke_ptr, ctx_ptr, idx_ptr, val_ptr, cand_ptr, ws_ptr, stats_ptr,
                    R, ncols, k, parts, stride_l, stride_ks, stride_ke, stride_ctx_b, stride_ctx_t, next_n, max_ctx,
                    ctx_shift, stride_idx, stride_val,
                    CAND: tl.constexpr, TILE: tl.constexpr, NW: tl.constexpr, WINDOW: tl.constexpr,
                    COMPRESSED: tl.constexpr, PAGED: tl.constexpr, VALUES: tl.constexpr):
    """Grid (R, parts): this program's selected entries at its offset, in position order; program 0 pads."""
    part = tl.program_id(1)
    row = tl.program_id(0)
    lrow, wrow, c0, c1, off = _row(row, logits_ptr, ks_ptr, ke_ptr, ctx_ptr, ws_ptr, ncols, stride_l, stride_ks,
                                   stride_ke, stride_ctx_b, stride_ctx_t, next_n, max_ctx, ctx_shift, WINDOW,
                                   COMPRESSED, PAGED)
    r64 = row.to(tl.int64)
    irow = idx_ptr + r64 * stride_idx
    vrow = val_ptr + r64 * stride_val
    T = tl.load(wrow + T_AT)
    p = tl.arange(0, PMAX)
    mine = p < parts
    eq = tl.load(wrow + EQ + p, mask=mine, other=0)
    ties = tl.minimum(tl.maximum(tl.load(wrow + TIES_AT) - (tl.cumsum(eq, 0) - eq), 0), eq)  # in position order
    sel = tl.load(wrow + ABOVE + p, mask=mine, other=0) + tl.load(wrow + GT + p, mask=mine, other=0) + ties
    run = tl.sum(tl.where(p < part, sel, 0), 0)
    take_eq = tl.sum(tl.where(p == part, ties, 0), 0)
    a0, a1, _ch = _chunk(c0, c1, part, parts)
    run_eq = tl.full([], 0, tl.int32)
    for t0 in range(a0, a1, TILE):
        key, cols = _tile(lrow, t0, a0, a1, TILE)
        run, run_eq = _emit_tile(key, cols + off, T, take_eq, run, run_eq, irow, vrow, True, VALUES)
    if part == 0:
        _pad(irow, vrow, tl.sum(sel, 0), k, TILE, VALUES)
