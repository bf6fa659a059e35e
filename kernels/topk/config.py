"""Config of the top-k selection kernels (no triton or torch import: `explain` stays cheap).

What bounds the time (H200: 132 SMs, 64K registers and 228 KiB shared memory per SM, ~4 TB/s): bytes per row of L
live columns (k = 2048, CAP = 4096) are 4 L read once; for L > CAP also the sample (SAMPLE gathers: whole 32-byte
sectors, ~min(L, 8 SAMPLE) x 4 B, L2 hits for the pass after it) and the candidates (~1.2-1.6 k keys + columns,
8 B each, written and read back through L1/L2); 4 k bytes of indices written (+ 4 k of values only for sorted
output or return_logits). One pass (plus the sample) in every path but the rare exact fallback. Yet the rows are
bound by instruction issue and dependent latency, not by bytes: a row's k-th key is found by rounds of counts.

This design: programs of 4 (rows) or 8 (split) warps holding only keys in registers (one [CAP] block: 32 a thread
at 4 warps) while searching, several programs an SM, then streaming the picks out tile by tile; ~5 search rounds a
row, each counting 8 thresholds in one reduction, the 8 counts packed two per int32 and the search in int32 with
the midpoint as the only fallback probe. Decode (fewer than 2 rows per SM, rows longer than CAP) spreads each row
over `parts` programs and merges in the last (topk_split), so 64 rows still fill the GPU. The sweep measures
num_warps, tile, programs per SM, maxnreg and narrow per shape and writes tuned.py.

Narrowed search ("narrow" N, a power of two; DEFAULTS keep 0): after the first round or two the bracket holds a few
hundred of the 4096 keys, yet every round scanned all of them; with narrow N the rounds go on on the bracket's keys
compacted into N scratch words. What each step measured (instructions, registers, µs): docs/DESIGN-NOTES.md.
"""
from __future__ import annotations

from ..common.config import KernelConfig, cdiv, pow2_ceil
from . import KEYS, RADIX_WS

MIN_CAP = 1024  # rows up to this many live entries are selected in registers
MARGIN = 4.0  # sample-rank standard deviations kept above topk (simulated: a 32K row misses k in ~3e-4)
PMAX = 64  # most programs per row in topk_split (kernel.py holds the same bound)
RADIX_CAND = 8192  # candidate slots a row of the radix select (the d1 bin of the k-th key: hundreds on smooth rows;
# more, and it reads the row itself)
FEW_ROWS_PER_UNIT = 2  # fewer rows than this per SM, rows longer than cap: split each row over programs

# Defaults where tuned.py has no entry (the sweep's picks for most buckets; docs/DESIGN-NOTES.md): 8 programs per
# SM for prefill rows (oversubscribed: rows differ in length), 8 warps and 2 programs per SM for long decode rows;
# SAMPLE, the entries a long row's threshold is ranked on, by regime.
DEFAULTS = {
    "rows": {"num_warps": 4, "tile": 1024, "programs_per_unit": 8, "sample": 1024},
    "split": {"num_warps": 8, "tile": 1024, "programs_per_unit": 2, "sample": 2048},
}
TUNABLE = ("kind", "num_warps", "tile", "programs_per_unit", "parts", "maxnreg", "reduce8", "narrow", "cand")
# ("parts" and "reduce8" are test hooks: the interpreter's rows take the split kernel and the GPU's packed
# reduction only when told.)
# "narrow": N > 0 (a power of two >= 16) runs the k-th key search on the whole block only until its bracket holds at
# most N keys, then compacts those into N int32 of scratch and finishes there (kernel.py, _kth); 0: whole block.
NARROW_MIN = 16


def _loader(name: str):
    """A loader of kernel.py's kernel `name`, imported on first use (one loader a kernel: the jitted-kernel cache
    keys on it)."""
    def load():
        from . import kernel

        return getattr(kernel, name)
    return load


_LOADERS = {n: _loader(n) for n in ("topk_rows", "topk_split", "topk_radix_hist", "topk_radix_cand",
                                    "topk_radix_kth", "topk_radix_emit")}


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
    """The measured config for this regime and row length (tuned.py, or this triton release's tuned_by_triton.py),
    over DEFAULTS; CUDA only."""
    out = dict(DEFAULTS[kind])
    if backend == "cuda":
        from ..common.tuned_by_triton import table
        from .tuned import CUDA_TUNED
        from .tuned_by_triton import BY_RELEASE

        out.update(_bucket_entry(table(BY_RELEASE, CUDA_TUNED).get(kind, {}), cols) or {})
    return out


def table_source(regime: str, backend: str) -> str:
    """Where a regime's entries come from (for explain): this release's tuned_by_triton.py, tuned.py, or DEFAULTS."""
    from ..common.tuned_by_triton import source
    from .tuned import CUDA_TUNED
    from .tuned_by_triton import BY_RELEASE

    if backend != "cuda":
        return "config.py DEFAULTS"
    where = source(BY_RELEASE, regime, "kernels/topk")
    return where if where != "kernels/topk/tuned.py" or regime in CUDA_TUNED else "config.py DEFAULTS"


def workspace_bytes(cols: int, backend: str, default: int) -> int:
    """Bytes of logits fp8_mqa_topk holds at once for rows of `cols` columns (tuned.py; else `default`)."""
    if backend != "cuda":
        return default
    from .tuned import WORKSPACE

    return _bucket_entry(WORKSPACE, cols) or default


def _parts(p: dict, units: int, rows: int, cols: int, tile: int) -> int:
    """Programs a row where rows are split: the given count, else the programs per SM over the rows, at most PMAX
    and at least a tile of columns each."""
    return int(p.get("parts") or min(PMAX, max(1, cdiv(int(p["programs_per_unit"]) * units, rows)),
                                     max(1, cdiv(cols, tile))))


def _radix_config(rows: int, cols: int, p: dict, units: int, constexprs: dict, options: dict) -> KernelConfig:
    """The radix select's four launches (kernel.py), `parts` programs a row as topk_split spreads them; the
    emitting launch is the config, the schedule lists all four in order. Workspace: RADIX_WS zeroed int32 a row
    ('arrive') and 2 CAND candidate slots a row ('scratch')."""
    tile, cand = constexprs["TILE"], int(p.get("cand") or RADIX_CAND)
    parts = _parts(p, units, rows, cols, tile)
    if not 1 <= parts <= PMAX:
        raise ValueError(f"parts must be in [1, {PMAX}], got {parts}")
    cx = {k: constexprs[k] for k in ("TILE", "NW", "WINDOW", "COMPRESSED", "PAGED", "VALUES")}
    cx["CAND"] = cand
    schedule = {"kind": "radix", "parts": parts, "scratch_elems": rows * 2 * cand, "arrive": True,
                "arrive_words": RADIX_WS, "cols": cols}
    schedule["scratch_bytes"] = 4 * (schedule["scratch_elems"] + rows * RADIX_WS)
    phases = [KernelConfig("topk", name, KEYS, cx, options, grid, schedule, launcher="topk",
                           load=_LOADERS[name])
              for name, grid in (("topk_radix_hist", (rows, parts)), ("topk_radix_cand", (rows, parts)),
                                 ("topk_radix_kth", (rows,)), ("topk_radix_emit", (rows, parts)))]
    schedule["phases"] = tuple(phases)
    return phases[-1]


def topk_kind(rows: int, cols: int, cap: int, units: int, backend: str) -> str:
    """'split' for a few rows longer than cap (decode), else 'rows'."""
    few = rows < FEW_ROWS_PER_UNIT * max(1, units) and backend != "interpreter"
    return "split" if few and cols > cap else "rows"


def topk_config(*, rows: int, cols: int, topk: int, backend: str, units: int | None, window: bool = True,
                compressed: bool = False, paged: bool = False, values: bool = True, stats: bool = False,
                cap: int | None = None, **tuning) -> KernelConfig:
    """Grid and sizes for an [rows, cols] matrix. tuning (sweeps, tests): kind ('rows', 'split', 'torch'),
    num_warps, tile, programs_per_unit, parts, maxnreg, reduce8, narrow override the table and the defaults."""
    bad = set(tuning) - set(TUNABLE)
    if bad:
        raise ValueError(f"unknown top-k tuning keys {sorted(bad)}; known: {', '.join(TUNABLE)}")
    tuning = {a: b for a, b in tuning.items() if b is not None}
    cap = topk_cap(topk, cap)
    units = max(1, units or 1)
    regime = "split" if tuning.get("parts") else topk_kind(rows, cols, cap, units, backend)
    entry = tuned(regime, cols, backend)  # the table may route a regime to another kind (e.g. 'torch')
    kind = tuning.get("kind") or entry.get("kind") or regime
    if kind not in ("rows", "split", "torch", "radix"):
        raise ValueError(f"kind must be rows, split, torch or radix, got {kind!r}")
    if tuning.get("kind") and kind != regime:  # an override: that kind's own defaults and table
        entry = tuned("rows" if kind in ("rows", "torch") else "split", cols, backend)
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
    constexprs = {"CAP": cap, "SAMPLE": sample, "TILE": tile, "NW": nw, "MARGIN": MARGIN,
                  "WINDOW": bool(window), "COMPRESSED": bool(compressed), "PAGED": bool(paged),
                  "VALUES": bool(values), "STATS": bool(stats),
                  # one packed 8-way reduction per search round (GPU); the interpreter runs a custom combine per
                  # element in Python, so there a vector of thresholds ("reduce8": True forces the GPU form: tests)
                  "R8": bool(p.get("reduce8", backend != "interpreter")), "NARROW": narrow}
    rows1 = max(rows, 1)
    if kind == "radix":
        return _radix_config(rows1, cols, p, units, constexprs, options)
    if kind == "split":
        parts = _parts(p, units, rows1, cols, tile)
        if not 1 <= parts <= min(PMAX, 2 * cap):
            raise ValueError(f"parts must be in [1, {min(PMAX, 2 * cap)}], got {parts}")
        grid = (rows1 * parts,)
        schedule = {"kind": kind, "parts": parts, "scratch_elems": rows1 * (4 * cap + PMAX + narrow), "arrive": True,
                    "slots_per_part": (2 * cap) // parts}
        name = "topk_split"
    else:
        programs = min(rows1, 3) if backend == "interpreter" else min(rows1, int(p["programs_per_unit"]) * units)
        parts = 1
        grid = (max(1, programs),)
        long_rows = cols >= cap  # some window may not fit one [cap] block (the kernel makes the same test)
        per_program = narrow + (2 * cap + PMAX if long_rows else 0)
        schedule = {"kind": kind, "parts": 1, "scratch_elems": grid[0] * per_program,
                    "arrive": False, "rows_per_program": cdiv(rows1, grid[0])}
        name = "topk_rows"
    schedule.update({"register_rows_up_to": cap, "cols": cols, "scratch_bytes": 4 * schedule["scratch_elems"],
                     "regime": regime})
    return KernelConfig("topk", name, KEYS, constexprs, options, grid, schedule, launcher="topk", load=_LOADERS[name])
