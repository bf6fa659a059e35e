"""Config of the top-k selection kernels (no triton or torch import: `explain` stays cheap).

What bounds the time (METHOD, H200: 132 SMs, 64K registers and 228 KiB shared memory per SM, ~4 TB/s):

  The first kernel ran 16 warps per program at 128 registers: the whole register file, so ONE program (one
  row) per SM. Each count probe of its key search was a 512-thread reduction (shared memory, two barriers) and a
  row took 20-40 probes (interpolating in key space: near 0 the int keys of the floats are far from linear)
  plus a 512-thread cumsum to emit. 1x4096 causal: 4096 rows / 132 SMs = 31 rows per SM x ~11 µs = 340 µs
  measured, against a bandwidth floor of 8 µs for reading its rows (4096 x 2048 avg x 4 B = 34 MB): latency of
  dependent reductions with one row in flight per SM, not bandwidth.

  Bytes per row of L live columns (k = 2048, CAP = 4096): read 4 L once; for L > CAP also the sample (SAMPLE
  gathers: whole 32-byte sectors, ~min(L, 8 SAMPLE) x 4 B, L2 hits for the pass after it) and the candidates
  (~1.2-1.6 k keys + columns, 8 B each, written and read back through L1/L2); write 4 k indices (+ 4 k values
  only for sorted output or return_logits). One pass (plus the sample) in every path but the rare exact
  fallback. Floors at 4 TB/s: 1x4096 ~17 µs, 1x8192 ~50 µs, 1x32768 causal ~0.6 ms (2.1 GB), decode 64 x 64K ~5 µs.

  This design: programs of 4 (rows) or 8 (split) warps holding only keys in registers (one [CAP] block: 32 a
  thread at 4 warps) while searching, then streaming the picks out tile by tile; ~5 search rounds a row, each
  counting 8 thresholds in one reduction. Measured on the H200 (2026-11-30, scripts/sweep_topk.py, before the
  packed counts below): selection alone 1x4096 340 -> 162 µs, 1x8192 964 -> 640, ratio 4 1611 -> 238, 1x32768
  7881 -> 4142. Those rates (1x32768: ~1.6 warp-instructions per cycle per SM, 0.5 TB/s) say the rows are bound
  by instruction issue and dependent latency at ~3 programs per SM, not by bytes. Since then the 8 counts of a
  round are packed two per int32 (half the selects, adds and shuffles) and the search runs in int32 with the
  midpoint as the only fallback probe: a search round on the [4096] block went from 1381 to 963 SASS
  instructions a thread (sm90, 4 warps), the rows kernel from 168 to 128 registers (4 programs per SM). Decode
  (fewer than 2 rows per SM, rows longer than CAP) spreads each row over `parts` programs and merges in the last
  (topk_split), so 64 rows still fill the GPU. The sweep measures num_warps, tile, programs per SM, sample,
  maxnreg and parts per shape and writes tuned.py.

  Narrowed search ("narrow", NOT timed on a GPU yet, DEFAULTS keep 0): after the first round or two the bracket holds
  ~100-1000 of the 4096 keys, yet every round scanned all of them. With narrow N the rounds go on on the bracket's
  keys compacted into N scratch words (sm90, 4 warps: a round on [4096] 990 SASS instructions a thread, on [256]
  256, on [1024] 393; the compaction ~370 once). A numpy model of the rounds on Gaussian rows: ~4.3-4.5 rounds a
  row, the bracket holds ~600-1060 keys after round 1 and ~75-130 after round 2, so the search goes from ~4400 to
  ~2800-3000 instructions a thread per row (~0.65x). Registers: rows kernel tile 512 150 -> 164 (3 programs per SM
  either way), maxnreg 96 a few more spill moves; split 8 warps tile 2048 maxnreg 128: 0 -> ~38 spill moves, none
  in the loops.
"""
from __future__ import annotations

from ..config import KernelConfig, cdiv, pow2_ceil
from . import KEYS

MIN_CAP = 1024  # rows up to this many live entries are selected in registers
MARGIN = 4.0  # sample-rank standard deviations kept above topk (simulated: a 32K row misses k in ~3e-4)
PMAX = 64  # most programs per row in topk_split (kernel.py holds the same bound)
FEW_ROWS_PER_UNIT = 2  # fewer rows than this per SM, rows longer than cap: split each row over programs
VEC = 16  # columns per aligned read when the buffer holds the rounded-up row end (the launcher checks)
# Vectorised reads are opt-in ("vec": 16): their 4-wide layout differs from the scattered stores' 1-wide one, and
# the layout conversions cost registers (sm90 ptxas, 4 warps, tile 2048: 255 registers against 168 at vec 1).

# Defaults where tuned.py has no entry. The H200 sweep of 2026-11-30 picked sample 1024 and 8 programs per SM
# (oversubscribed: rows differ in length) for most prefill buckets, and 8 warps / tile 2048 / 2 programs per SM
# for long decode rows. sm90 ptxas (cross-compiled, k 2048, counts packed two per int32, int32 search): rows
# kernel 128 registers at 4 warps / tile 1024 (4 programs per SM; its few spills lie outside the loops), 115 at 8
# warps; split kernel 128 at 8 warps / tile 1024 but 170 at tile 2048 (one program per SM: the sweep also
# tries it pinned to 128 with maxnreg).
DEFAULTS = {
    "rows": {"num_warps": 4, "tile": 1024, "programs_per_unit": 8, "sample": 1024},
    "split": {"num_warps": 8, "tile": 1024, "programs_per_unit": 2, "sample": 2048},
}
TUNABLE = ("kind", "num_warps", "tile", "programs_per_unit", "sample", "parts", "maxnreg", "reduce8", "vec", "narrow")
# "narrow": N > 0 (a power of two >= 16) runs the k-th key search on the whole block only until its bracket holds at
# most N keys, then compacts those into N int32 of scratch and finishes there (kernel.py, _kth); 0: whole block.
NARROW_MIN = 16


def _load_rows():
    from .kernel import topk_rows

    return topk_rows


def _load_split():
    from .kernel import topk_split

    return topk_split


def topk_cap(topk: int, cap: int | None = None) -> int:
    """Candidate capacity per row: a power of two >= 2 * topk (the sampled threshold keeps < 2 topk)."""
    need = pow2_ceil(2 * max(1, topk))
    if cap is None:
        return max(MIN_CAP, need)
    if cap < need or cap & (cap - 1):
        raise ValueError(f"cap must be a power of two >= 2 * topk = {2 * topk}, got {cap}")
    return cap


def _bucket_entry(table: dict, cols: int):
    """The entry of the nearest power-of-two column bucket (ties: the smaller)."""
    if not table:
        return None
    b = pow2_ceil(max(1, cols)).bit_length()
    return table[min(table, key=lambda x: (abs(int(x).bit_length() - b), x))]


def tuned(kind: str, cols: int, backend: str) -> dict:
    """The measured config for this regime and row length (tuned.py), over DEFAULTS; CUDA only."""
    out = dict(DEFAULTS[kind])
    if backend == "cuda":
        from ..tuned_by_triton import table
        from .tuned import CUDA_TUNED

        out.update(_bucket_entry(table("topk", CUDA_TUNED).get(kind, {}), cols) or {})
    return out


def workspace_bytes(cols: int, backend: str, default: int) -> int:
    """Bytes of logits fp8_mqa_topk holds at once for rows of `cols` columns (tuned.py; else `default`)."""
    if backend != "cuda":
        return default
    from .tuned import WORKSPACE

    return _bucket_entry(WORKSPACE, cols) or default


def topk_kind(rows: int, cols: int, cap: int, units: int, backend: str) -> str:
    """'split' for a few rows longer than cap (decode), else 'rows'."""
    few = rows < FEW_ROWS_PER_UNIT * max(1, units) and backend != "interpreter"
    return "split" if few and cols > cap else "rows"


def topk_config(*, rows: int, cols: int, topk: int, backend: str, units: int | None, window: bool = True,
                compressed: bool = False, paged: bool = False, values: bool = True, stats: bool = False,
                cap: int | None = None, vec_ok: bool = False, **tuning) -> KernelConfig:
    """Grid and sizes for an [rows, cols] matrix. vec_ok: the buffer may be read to each row's end rounded up
    to VEC columns. tuning (sweeps, tests): kind ('rows', 'split', 'torch'), num_warps, tile,
    programs_per_unit, sample, parts, maxnreg, reduce8, vec, narrow override the table and the defaults."""
    bad = set(tuning) - set(TUNABLE)
    if bad:
        raise ValueError(f"unknown top-k tuning keys {sorted(bad)}; known: {', '.join(TUNABLE)}")
    tuning = {a: b for a, b in tuning.items() if b is not None}
    cap = topk_cap(topk, cap)
    units = max(1, units or 1)
    regime = "split" if tuning.get("parts") else topk_kind(rows, cols, cap, units, backend)
    entry = tuned(regime, cols, backend)  # the table may route a regime to another kind (e.g. 'torch')
    kind = tuning.get("kind") or entry.get("kind") or regime
    if kind not in ("rows", "split", "torch"):
        raise ValueError(f"kind must be rows, split or torch, got {kind!r}")
    if tuning.get("kind") and kind != regime:  # an override: that kind's own defaults and table
        entry = tuned("split" if kind == "split" else "rows", cols, backend)
    p = {**entry, **tuning}
    p.pop("kind", None)
    if backend == "interpreter":
        p.update(tile=tuning.get("tile", 128), num_warps=4)  # several tiles per row on small test matrices
    nw, tile = int(p["num_warps"]), int(p["tile"])
    sample = min(int(p["sample"]), cap // 2)
    if tile < 64 or tile & (tile - 1) or sample < 2 or nw & (nw - 1):
        raise ValueError(f"tile {tile} must be a power of two >= 64, sample {sample} >= 2, num_warps {nw} a power "
                         "of two")
    narrow = int(p.get("narrow") or 0)
    if narrow and (narrow < NARROW_MIN or narrow & (narrow - 1)):
        raise ValueError(f"narrow must be 0 or a power of two >= {NARROW_MIN}, got {narrow}")
    options = {"num_warps": nw, "num_stages": 1}
    if p.get("maxnreg") and backend == "cuda":
        options["maxnreg"] = int(p["maxnreg"])
    vec = VEC if vec_ok and int(p.get("vec", 1)) == VEC else 1
    constexprs = {"CAP": cap, "SAMPLE": sample, "TILE": tile, "VEC": vec, "NW": nw, "MARGIN": MARGIN,
                  "WINDOW": bool(window), "COMPRESSED": bool(compressed), "PAGED": bool(paged),
                  "VALUES": bool(values), "STATS": bool(stats),
                  # one packed 8-way reduction per search round (GPU); the interpreter runs a custom combine per
                  # element in Python, so there a vector of thresholds ("reduce8": True forces the GPU form: tests)
                  "R8": bool(p.get("reduce8", backend != "interpreter")), "NARROW": narrow}
    rows1 = max(rows, 1)
    if kind == "split":
        parts = int(p.get("parts") or min(PMAX, max(1, cdiv(int(p["programs_per_unit"]) * units, rows1)),
                                          max(1, cdiv(cols, tile))))
        if not 1 <= parts <= min(PMAX, 2 * cap):
            raise ValueError(f"parts must be in [1, {min(PMAX, 2 * cap)}], got {parts}")
        grid = (rows1 * parts,)
        schedule = {"kind": kind, "parts": parts, "scratch_elems": rows1 * (4 * cap + PMAX + narrow), "arrive": True,
                    "slots_per_part": (2 * cap) // parts}
        load, name = _load_split, "topk_split"
    else:
        programs = min(rows1, 3) if backend == "interpreter" else min(rows1, int(p["programs_per_unit"]) * units)
        parts = 1
        grid = (max(1, programs),)
        long_rows = cols + vec > cap  # some window may not fit one [cap] block (the kernel makes the same test)
        per_program = narrow + (2 * cap + PMAX if long_rows else 0)
        schedule = {"kind": kind, "parts": 1, "scratch_elems": grid[0] * per_program,
                    "arrive": False, "rows_per_program": cdiv(rows1, grid[0])}
        load, name = _load_rows, "topk_rows"
    schedule.update({"register_rows_up_to": cap, "cols": cols, "scratch_bytes": 4 * schedule["scratch_elems"]})
    return KernelConfig("topk", name, KEYS, constexprs, options, grid, schedule, launcher="topk", load=load)
