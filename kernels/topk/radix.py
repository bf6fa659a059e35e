"""Per-row top-k by radix select: four launches, each spread over `parts` programs a row, so few long rows (decode)
use the whole GPU and no step waits on one program's chain of reductions.

Keys are kernel.py's order-preserving int32 (DEAD for dead entries). A key's digits: d1 = its top 12 bits (4096
bins), d2 the next 12, d3 the low 8. Per row, in an int32 workspace zeroed before the first launch: the d1
histogram, the candidate count, T and the ties taken at T, and per program: entries above the d1 bin of the k-th
key, and entries of that bin above T and equal to T.

  hist   every program: the d1 histogram of its chunk, added into the row's (one atomic per non-empty bin);
  cand   every program: b1, the d1 bin holding the k-th key (suffix sums of the histogram); counts its entries above
         b1 and appends its entries in b1 (the candidates, any order) to the row's candidate slots;
  kth    one program a row: the k-th key T among the candidates, by the d2 then d3 histograms, and the ties at T
         to take; then each program's candidates above and at T. When the candidates overflow their CAND slots
         the same steps read the row itself (exact, slower; adversarial data).
  emit   every program: its offset (the programs before it: entries above b1, above T, ties taken in position
         order) and its selected entries in position order; program 0 pads -1 (and -inf) to k.

The set, its order and the tie-break are those of topk_rows / topk_split (ascending positions, ties at the k-th
value to the lowest positions). Row bases are 64-bit.
"""
import triton
import triton.language as tl

from ..common.naming import make_kernel_repr
from . import KEYS
from .config import RADIX_WS
from .kernel import PMAX, _bounds, _emit_tile, _pad, _tile

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
    """Grid (parts, R): the d1 histogram of this program's chunk, added into the row's."""
    part = tl.program_id(0)
    lrow, wrow, c0, c1, _off = _row(tl.program_id(1), logits_ptr, ks_ptr, ke_ptr, ctx_ptr, ws_ptr, ncols, stride_l,
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
    """Grid (parts, R): this program's entries above b1 (counted) and in b1 (appended to the candidate slots)."""
    part = tl.program_id(0)
    row = tl.program_id(1)
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
    """Grid (parts, R): this program's selected entries at its offset, in position order; program 0 pads."""
    part = tl.program_id(0)
    row = tl.program_id(1)
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
