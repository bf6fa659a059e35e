"""Config of the top-k selection kernel (no triton or torch import: `explain` stays cheap).

One program walks rows (persistent grid, rows pid, pid + grid, ...). A row whose live window fits in
CAP entries is selected in registers. A longer row is sampled (SAMPLE evenly spread entries) to pick a
threshold that keeps about 1.3-1.5 x topk entries, streamed once in [NW, TILE/NW] tiles, each warp
compacting its segments' candidates into its own region (CAP/NW keys + columns) of the program's scratch,
and selected there. A row whose
candidates miss topk or overflow a region (rare: adversarial values, heavy ties) takes an exact path: 16 thresholds
counted per pass over the row until the k-th key is known, then one emitting pass.
"""
from __future__ import annotations

from ..config import KernelConfig, cdiv, pow2_ceil
from . import KEYS


MIN_CAP = 1024  # rows up to this many live entries are selected in registers
MARGIN = 2.5  # standard deviations of the sample's rank error kept above topk (fewer rows miss topk)
PROGRAMS_PER_UNIT = 4


def _load():
    from .kernel import topk_rows

    return topk_rows


def topk_cap(topk: int, cap: int | None = None) -> int:
    """Candidate capacity per row: a power of two >= 2 * topk (the sampled threshold keeps < 2 topk)."""
    need = pow2_ceil(2 * max(1, topk))
    if cap is None:
        return max(MIN_CAP, need)
    if cap < need or cap & (cap - 1):
        raise ValueError(f"cap must be a power of two >= 2 * topk = {2 * topk}, got {cap}")
    return cap


def topk_config(*, rows: int, cols: int, topk: int, backend: str, units: int | None, window: bool = True,
                compressed: bool = False, values: bool = True, stats: bool = False, cap: int | None = None,
                num_warps: int | None = None, tile: int | None = None,
                programs_per_unit: int | None = None) -> KernelConfig:
    """Grid (persistent: a few programs per SM, each walking rows) and tile sizes for an [rows, cols] matrix.
    num_warps / tile / programs_per_unit override the defaults (for sweeps on the GPU)."""
    cap = topk_cap(topk, cap)
    sample = min(2048, cap // 2)
    tile_override = tile
    if backend == "interpreter":
        tile = 128  # several tiles per row on small test matrices
        programs = min(rows, 3)  # > 1 row per program, so the persistent loop runs on the CPU too
        options = {"num_warps": 4, "num_stages": 1}
    else:
        tile = 1024
        programs = min(rows, (programs_per_unit or PROGRAMS_PER_UNIT) * (units or 1))
        # sm90 cross-compile (ptxas): at cap 4096, 8 warps need 255 registers, 16 warps 128 (no real spill)
        options = {"num_warps": 16 if cap >= 4096 else (8 if cap >= 2048 else 4), "num_stages": 1}
    if num_warps:
        options["num_warps"] = num_warps
    if tile_override:
        tile = tile_override
    if tile < options["num_warps"] or cap < options["num_warps"] or sample < options["num_warps"]:
        raise ValueError(f"tile {tile}, cap {cap} and sample {sample} must each be >= num_warps {options['num_warps']}")
    constexprs = {"CAP": cap, "SAMPLE": sample, "TILE": tile, "NW": options["num_warps"], "MARGIN": MARGIN,
                  "WINDOW": bool(window), "COMPRESSED": bool(compressed), "VALUES": bool(values), "STATS": bool(stats)}
    programs = max(1, programs)
    return KernelConfig("topk", "topk_rows", KEYS, constexprs, options, (programs,),
                        {"scratch_elems": programs * 2 * cap, "rows_per_program": cdiv(max(rows, 1), programs),
                         "register_rows_up_to": cap, "cols": cols},
                        launcher="topk", load=_load)
