"""Config of the portable prefill kernel (no triton import: dispatch and `explain` stay cheap).

On CUDA a (heads, dim) listed in tuned.py takes its swept config (tools/tune/sweep_heads.py --write-table, checked
and timed on the H200); any other shape, and every other backend, takes the rule below.
"""
from __future__ import annotations

from ...common.config import KernelConfig, backend_options, cdiv, pow2_ceil
from ...common.tuned_by_triton import table
from . import KEYS
from .tuned import CUDA_TUNED
from .tuned_by_triton import BY_RELEASE

# What a table entry (or a sweep's override) may set: query rows per block, column order, pipeline depth, and
# SPLIT_TILES, the most kv tiles one program walks (the kv axis is split over grid axis 1 into such spans).
OVERRIDE_KEYS = ("BLOCK_Q", "HEAD_MAJOR", "num_stages", "SPLIT_TILES")
BLOCK_KV = 64  # kv rows per tile = the MMA's M per warpgroup (4 warps)
MAX_DOT_N = 256  # columns of one wgmma: BLOCK_Q x heads


def _load():
    from .kernel import mqa_logits_tiled

    return mqa_logits_tiled


def check_override(heads: int, override: dict) -> None:
    """ValueError unless every key is known and the values make a kernel this code can compile."""
    unknown = sorted(set(override) - set(OVERRIDE_KEYS))
    if unknown:
        raise ValueError(f"unknown tiled config key(s) {', '.join(unknown)}; choose from {', '.join(OVERRIDE_KEYS)}")
    bq = override.get("BLOCK_Q")
    if bq is not None and not (isinstance(bq, int) and bq >= 1 and bq & (bq - 1) == 0 and 16 <= bq * heads <= MAX_DOT_N):
        raise ValueError(f"BLOCK_Q must be a power of two with 16 <= BLOCK_Q x heads <= {MAX_DOT_N}, got {bq} at H {heads}")
    if not isinstance(override.get("HEAD_MAJOR", False), bool):
        raise ValueError(f"HEAD_MAJOR must be True or False, got {override['HEAD_MAJOR']!r}")
    if override.get("num_stages", 3) not in range(1, 7):
        raise ValueError(f"num_stages must be in 1..6, got {override['num_stages']}")
    split = override.get("SPLIT_TILES")
    if split is not None and not (isinstance(split, int) and split >= 1):
        raise ValueError(f"SPLIT_TILES must be a positive int or None, got {split!r}")


def tiled_config(*, heads: int, dim: int, S: int, N: int, clean: bool, compressed: bool = False, bf16: bool = False,
                 backend: str, units: int | None, override: dict | None = None, use_table: bool = True) -> KernelConfig:
    """The rule: BLOCK_Q query rows x heads = the MMA's N (256 when it fits), kv tile = M, row-major columns;
    the kv axis is split over grid axis 1 only when query blocks alone cannot fill the device.

    A tuned.py entry (CUDA, unless use_table is False) and then `override` (sweeps) replace any of OVERRIDE_KEYS;
    BLOCK_Q still shrinks to a short problem's rows, and SPLIT_TILES only ever splits further than the rule."""
    tuned = table(BY_RELEASE, CUDA_TUNED).get((heads, dim), {}) if (backend == "cuda" and use_table) else {}
    choice = {**tuned, **(override or {})}
    check_override(heads, choice)
    block_q = max(1, min(choice.get("BLOCK_Q", 256 // heads), pow2_ceil(S)))
    block_q = max(block_q, pow2_ceil(max(1, 16 // heads)))  # tl.dot needs N >= 16
    block_kv = BLOCK_KV
    options = backend_options(backend, cuda={"num_warps": 4, "num_stages": 3})
    if backend == "cuda" and "num_stages" in choice:
        options["num_stages"] = choice["num_stages"]
    q_blocks = cdiv(S, block_q)
    kv_tiles = cdiv(N, block_kv)
    want = 2 * (units or 1)
    splits = 1 if q_blocks >= want else min(kv_tiles, cdiv(want, q_blocks))
    per_split = cdiv(kv_tiles, max(1, splits))
    if choice.get("SPLIT_TILES"):
        per_split = min(per_split, choice["SPLIT_TILES"])
    constexprs = {"H": heads, "D": dim, "BLOCK_Q": block_q, "BLOCK_KV": block_kv, "CLEAN": bool(clean),
                  "COMPRESSED": bool(compressed), "BF16": bool(bf16), "HEAD_MAJOR": choice.get("HEAD_MAJOR", False)}
    grid = (q_blocks, cdiv(kv_tiles, per_split))
    source = "override" if override else ("tuned.py" if tuned else "rule")
    schedule = {"args": {"tiles_per_split": per_split}, "q_blocks": q_blocks, "kv_splits": grid[1], "config": source}
    return KernelConfig("tiled", "mqa_logits_tiled", KEYS, constexprs, options, grid, schedule,
                        launcher="pointer", load=_load)
