"""Per-row top-k of a logits matrix by threshold selection on order-preserving integer keys.

Keys: an fp32 value's bits with the low 31 bits flipped when negative compare as int32 exactly like the
floats; -inf, NaN and positions outside the row's window get DEAD (INT32_MIN) and are never selected.
The k-th largest key T is found by interpolation search on counts (a compare and a sum per entry per
step, cheaper in Triton than a histogram). Output per row: every key > T and the first (k - count(> T))
keys == T in block order, padded with -1 (and -inf values) to k. Block order is position order for rows
selected in registers or by the exact path; for sampled rows it is warp region by warp region (each
region in position order). So the output is a set in a deterministic order, and ties at the k-th value
are broken deterministically. Row bases are 64-bit.
"""
import triton
import triton.language as tl

from ..naming import make_kernel_repr
from . import KEYS


@triton.jit
def _to_key(x, valid):
    """int32 key ordered as the fp32 values; DEAD (INT32_MIN) where not valid, -inf or NaN."""
    b = x.to(tl.int32, bitcast=True)
    key = b ^ ((b >> 31) & 0x7FFFFFFF)
    return tl.where(valid & (x > float("-inf")), key, -2147483648)


@triton.jit
def _count_ge(key, thr):
    return tl.sum((key >= thr).to(tl.int32), axis=0)


@triton.jit
def _kth(key, lo, cnt_lo, hi, cnt_hi, need, slack):
    """The largest T in [lo, hi) with count(key >= T) >= need, for a 1-D key block.

    Holds count(key >= lo) = cnt_lo >= need > cnt_hi = count(key >= hi). Each step probes where a linear
    count between the bracket ends reaches `need` (interpolation: a few steps on smooth data) and bisects
    after a step that did not halve the bracket (so at most ~64 steps on any data). Stops when a
    threshold keeps at most need + slack keys (slack 0: exact, or the bracket is one key wide).
    Returns (T, count(key >= T))."""
    lo = lo.to(tl.int64)
    hi = hi.to(tl.int64)
    cnt_hi = cnt_lo * 0 + cnt_hi
    bisect = cnt_lo < 0
    while (hi - lo > 1) & (cnt_lo - need > slack):
        width = hi - lo
        f = (cnt_lo - need + 0.5) / (cnt_lo - cnt_hi).to(tl.float32)
        step = tl.where(bisect, width // 2, (width.to(tl.float32) * f).to(tl.int64))
        step = tl.minimum(tl.maximum(step, 1), width - 1)
        mid = lo + step
        c = _count_ge(key, mid.to(tl.int32))
        ge = c >= need
        bisect = tl.where(ge, hi - mid, step) * 2 > width
        lo = tl.where(ge, mid, lo)
        cnt_lo = tl.where(ge, c, cnt_lo)
        hi = tl.where(ge, hi, mid)
        cnt_hi = tl.where(ge, cnt_hi, c)
    return lo.to(tl.int32), cnt_lo


@triton.jit
def _emit(key, col, T, need, run_sel, run_eq, irow, vrow, VALUES: tl.constexpr):
    """Write the selected entries of a 1-D block at their output slots (block order); returns the
    running counts (selected, ties seen)."""
    gt = key > T
    eq = key == T
    ei = eq.to(tl.int32)
    sel = gt | (eq & (run_eq + tl.cumsum(ei, axis=0) <= need))
    si = sel.to(tl.int32)
    pos = run_sel + tl.cumsum(si, axis=0) - 1
    tl.store(irow + pos, col, mask=sel)
    if VALUES:
        b = key ^ ((key >> 31) & 0x7FFFFFFF)
        tl.store(vrow + pos, b.to(tl.float32, bitcast=True), mask=sel)
    return run_sel + tl.sum(si, axis=0), run_eq + tl.sum(ei, axis=0)


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
def _tile_keys(lrow, t0, c1, NW: tl.constexpr, TW: tl.constexpr):
    """Keys and columns of the [NW, TW] tile at columns [t0, t0 + NW * TW): row w is warp w's segment."""
    cols = t0 + tl.arange(0, NW)[:, None] * TW + tl.arange(0, TW)[None, :]
    m = cols < c1
    x = tl.load(lrow + cols, mask=m, other=float("-inf")).to(tl.float32)
    return _to_key(x, m), cols


@triton.jit
def _select_block(key, col, lo, cnt_lo, k, irow, vrow, VALUES: tl.constexpr):
    """Top-k of a 1-D key block holding every entry >= lo (count cnt_lo >= k, or all live entries
    when fewer): the k-th key by interpolation search, then the emit and the -1 padding."""
    kmax = tl.max(key, axis=0)
    few = cnt_lo <= k  # every live entry is selected: T = lo
    hi0 = tl.where(few, lo.to(tl.int64), kmax.to(tl.int64) + 1)
    T, _c = _kth(key, lo, cnt_lo, hi0, 0, k, 0)
    n_gt = tl.sum((key > T).to(tl.int32), axis=0)
    zero = tl.full([], 0, tl.int32)
    n_sel, _e = _emit(key, col, T, k - n_gt, zero, zero, irow, vrow, VALUES)
    _pad(irow, vrow, n_sel, k, 256, VALUES)


@triton.jit(repr=make_kernel_repr("topk_rows", KEYS))
def topk_rows(
    logits_ptr,  # fp32 or bf16 [R, stride_l]
    ks_ptr,  # int32 [R] (any stride, 0 allowed): window start (WINDOW)
    ke_ptr,  # int32 [R] (any stride): window end (WINDOW)
    idx_ptr,  # int32 [R, stride_idx]: output positions
    val_ptr,  # [R, stride_val] (VALUES): output values, in its own dtype
    scratch_ptr,  # int32 [grid, 2, CAP]: each program's candidate keys and columns, NW regions of CAP / NW
    stats_ptr,  # int32 [R] (STATS): 0 registers, 1 sampled candidates, 2 exact passes
    R,
    ncols,
    k,
    stride_l,
    stride_ks,
    stride_ke,
    stride_idx,
    stride_val,
    CAP: tl.constexpr,
    SAMPLE: tl.constexpr,
    TILE: tl.constexpr,
    NW: tl.constexpr,  # = num_warps: blocks are [NW, width], one warp per block row
    MARGIN: tl.constexpr,
    WINDOW: tl.constexpr,
    COMPRESSED: tl.constexpr,  # column c of row i holds position ks[i] + c; the row has ke - ks columns
    VALUES: tl.constexpr,
    STATS: tl.constexpr,
):
    CAPW: tl.constexpr = CAP // NW
    TW: tl.constexpr = TILE // NW
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    scr_key = scratch_ptr + pid.to(tl.int64) * (2 * CAP)
    scr_col = scr_key + CAP
    wrow = tl.arange(0, NW)
    zero = tl.full([], 0, tl.int32)
    for row in range(pid, R, nprog):
        r64 = tl.cast(row, tl.int64)  # (the loop variable is a plain int in the interpreter)
        lrow = logits_ptr + r64 * stride_l
        irow = idx_ptr + r64 * stride_idx
        vrow = val_ptr + r64 * stride_val
        if WINDOW:
            s = tl.load(ks_ptr + r64 * stride_ks)
            e = tl.load(ke_ptr + r64 * stride_ke)
        else:
            s = zero
            e = zero + ncols
        if COMPRESSED:
            c0 = zero
            c1 = tl.minimum(e - s, ncols)
            off = s
        else:
            c0 = tl.maximum(s, 0)
            c1 = tl.minimum(e, ncols)
            off = zero
        c1 = tl.maximum(c1, c0)
        L = c1 - c0
        if L <= CAP:
            # ---- the whole window in registers, as NW contiguous segments
            col = c0 + tl.arange(0, CAP)
            cm = col < c1
            key = _to_key(tl.load(lrow + col, mask=cm, other=float("-inf")).to(tl.float32), cm)
            live = key != -2147483648
            nlive = tl.sum(live.to(tl.int32), axis=0)
            kmin = tl.min(tl.where(live, key, 2147483647), axis=0)
            lo = tl.where(nlive <= k, -2147483647, kmin)
            _select_block(key, col + off, lo, nlive, k, irow, vrow, VALUES)
            if STATS:
                tl.store(stats_ptr + row, 0)
        else:
            tl.debug_barrier()  # the previous row's scratch reads are done before this row writes it
            # ---- a threshold from an evenly spread sample: its rank keeps ~k + MARGIN sigma entries
            so = tl.arange(0, SAMPLE)
            spos = c0 + ((so.to(tl.int64) * L) // SAMPLE).to(tl.int32)
            skey = _to_key(tl.load(lrow + spos).to(tl.float32), so >= 0)
            slive = skey != -2147483648
            ns = tl.sum(slive.to(tl.int32), axis=0)
            p = (k + 0.0) / L.to(tl.float32)
            mean = SAMPLE * p
            r = (mean + MARGIN * tl.sqrt(mean * (1.0 - p))).to(tl.int32) + 2
            r = tl.minimum(r, ns)
            skmin = tl.min(tl.where(slive, skey, 2147483647), axis=0)
            skmax = tl.max(skey, axis=0)
            none = r < 1
            lo0 = tl.where(none, -2147483647, skmin)
            hi0 = tl.where(none, -2147483647, skmax.to(tl.int64) + 1)
            t, _c = _kth(skey, lo0, ns, hi0, 0, r, r // 8 + 1)  # a rank within 1/8: a threshold, not T
            # ---- one pass: count entries >= t; each warp compacts its segments into its own region
            cnt = tl.zeros([NW], tl.int32)
            for t0 in range(c0, c1, TILE):
                tkey, tcol = _tile_keys(lrow, t0, c1, NW, TW)
                cand = tkey >= t
                ci = cand.to(tl.int32)
                pos = cnt[:, None] + tl.cumsum(ci, axis=1) - 1
                ok = cand & (pos < CAPW)
                dst = wrow[:, None] * CAPW + pos
                tl.store(scr_key + dst, tkey, mask=ok)
                tl.store(scr_col + dst, tcol, mask=ok)
                cnt += tl.sum(ci, axis=1)
            total = tl.sum(cnt, axis=0)
            tl.debug_barrier()  # scratch writes visible to the whole program
            if (total >= k) & (tl.max(cnt, axis=0) <= CAPW):
                slot = tl.arange(0, CAPW)[None, :]
                cm = slot < cnt[:, None]
                src = wrow[:, None] * CAPW + slot
                ckey = tl.reshape(tl.load(scr_key + src, mask=cm, other=-2147483648), [CAP])
                ccol = tl.reshape(tl.load(scr_col + src, mask=cm, other=0), [CAP])
                _select_block(ckey, ccol + off, t, total, k, irow, vrow, VALUES)
                if STATS:
                    tl.store(stats_ptr + row, 1)
            else:
                # ---- exact: 16 thresholds counted per pass narrow [lo, hi) 16-fold until T is known
                FB: tl.constexpr = TILE // 4
                over = total >= k  # t kept too many for a region: T >= t; else too few: T < t
                lo = tl.where(over, t, -2147483647).to(tl.int64)
                hi = tl.where(over, 2147483648, t.to(tl.int64))
                cnt_lo = tl.where(over, total, -1)
                jj = tl.arange(0, 16)
                while (hi - lo > 1) & (cnt_lo != k):
                    step = (hi - lo + 15) // 16
                    th = lo + jj.to(tl.int64) * step
                    th32 = tl.minimum(th, 2147483647).to(tl.int32)  # no key reaches INT32_MAX
                    cvec = tl.zeros([16], tl.int32)
                    for t0 in range(c0, c1, FB):
                        fcols = t0 + tl.arange(0, FB)
                        fm = fcols < c1
                        fkey = _to_key(tl.load(lrow + fcols, mask=fm, other=float("-inf")).to(tl.float32), fm)
                        cvec += tl.sum((fkey[:, None] >= th32[None, :]).to(tl.int32), axis=0)
                    nge = tl.sum(((cvec >= k) & (th < hi)).to(tl.int32), axis=0)
                    few = nge == 0  # only when lo was unverified: fewer than k live entries
                    j = tl.maximum(nge - 1, 0)
                    new_lo = tl.sum(tl.where(jj == j, th, 0), axis=0)
                    new_cnt = tl.sum(tl.where(jj == j, cvec, 0), axis=0)
                    nxt = tl.sum(tl.where(jj == j + 1, th, 0), axis=0)
                    new_hi = tl.where((j + 1 < 16) & (nxt < hi) & (nxt > new_lo), nxt, hi)
                    lo = tl.where(few, lo, new_lo)
                    hi = tl.where(few, lo + 1, new_hi)
                    cnt_lo = tl.where(few, k, new_cnt)
                T = lo.to(tl.int32)
                n_gt = zero
                for t0 in range(c0, c1, TILE):
                    tkey, tcol = _tile_keys(lrow, t0, c1, 1, TILE)
                    n_gt += tl.sum(tl.sum((tkey > T).to(tl.int32), axis=1), axis=0)
                run_sel = zero
                run_eq = zero
                for t0 in range(c0, c1, TILE):
                    tkey, tcol = _tile_keys(lrow, t0, c1, 1, TILE)
                    tkey = tl.reshape(tkey, [TILE])
                    tcol = tl.reshape(tcol, [TILE])
                    run_sel, run_eq = _emit(tkey, tcol + off, T, k - n_gt, run_sel, run_eq, irow, vrow, VALUES)
                _pad(irow, vrow, run_sel, k, 256, VALUES)
                if STATS:
                    tl.store(stats_ptr + row, 2)
