"""Config of the paged decode kernel (no triton import: dispatch and `explain` stay cheap).

The grid is persistent: P programs (one per SM) each walk a length-balanced range of (sequence,
cache block) work from the schedule metadata, and SUBS programs share each range (tile i of a
sequence segment goes to sub-program i % SUBS), so several programs per SM keep enough cache bytes
in flight. A kv tile is the MMA's M operand; ROWS draft rows x H heads form N (CHUNKS dots when
next_n x H passes 256), so each tile is read once for all next_n rows.
"""
from __future__ import annotations

from dataclasses import replace

from ...common.config import KernelConfig, backend_options, cdiv, pow2_ceil
from . import KEYS
from .tuned import CUDA_TUNED


MAX_DOT_N = 256  # columns of one wgmma
FILL = 1024  # columns per -inf fill item (CLEAN): the dead tail is spread over all programs in such pieces


def _load():
    from .kernel import paged_mqa_logits

    return paged_mqa_logits


def paged_rows(next_n: int, heads: int) -> tuple[int, int]:
    """(ROWS, CHUNKS): draft rows per dot and dots per kv tile; ROWS * CHUNKS >= next_n, ROWS * H >= 16."""
    padded = max(pow2_ceil(next_n), pow2_ceil(max(1, 16 // heads)))
    rows = min(padded, max(1, MAX_DOT_N // heads))
    return rows, padded // rows


# H200 (sm90) configs by the dot's N (= next_n x H), in tuned.py: written by tools/tune/paged_experiment.py
# --write-table from checked, timed sweeps. SUBS stays within the CTAs one SM holds, and num_stages >= 5 keeps a
# second tile in flight through the block-table indirection (what the sweeps showed: docs/DESIGN-NOTES.md).
FALLBACK = {"BLOCK_KV": 64, "num_stages": 5, "SUBS": 2}  # when a tuned ROWS does not fit


def cuda_choice(rows: int, chunks: int, heads: int) -> dict:
    n = rows * chunks * heads
    tuned = dict(CUDA_TUNED[min([k for k in CUDA_TUNED if k >= n] or [max(CUDA_TUNED)])])
    if "ROWS" in tuned and (tuned["ROWS"] * heads < 16 or (rows * chunks) // tuned["ROWS"] > 2):
        tuned = dict(FALLBACK)
    return tuned


OVERRIDE_KEYS = ("ROWS", "BLOCK_KV", "SUBS", "num_stages", "maxnreg")  # what `override` may set


def _pow2(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1 and x & (x - 1) == 0


def check_override(override: dict) -> None:
    """ValueError unless every key is known and its value makes a kernel this code can compile and run (as the
    tiled row's check_override: a SUBS of 0 would launch no program, a BLOCK_KV of 7 no dot)."""
    unknown = sorted(set(override) - set(OVERRIDE_KEYS))
    if unknown:
        raise ValueError(f"unknown paged config key(s) {', '.join(unknown)}; choose from {', '.join(OVERRIDE_KEYS)}")
    rules = {"ROWS": (_pow2, "a power of two >= 1"),
             "BLOCK_KV": (lambda v: _pow2(v) and 16 <= v <= 256, "a power of two from 16 to 256 (the dot's M)"),
             "SUBS": (lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 16, "in 1..16"),
             "num_stages": (lambda v: isinstance(v, int) and 1 <= v <= 8, "in 1..8"),
             "maxnreg": (lambda v: isinstance(v, int) and 24 <= v <= 256 and v % 8 == 0,
                         "a multiple of 8 from 24 to 256")}
    for key, (ok, what) in rules.items():
        if key in override and not ok(override[key]):
            raise ValueError(f"{key} must be {what}, got {override[key]!r}")


def paged_config(*, heads: int, dim: int, next_n: int, block_size: int, batch: int, max_context_len: int,
                 clean: bool, bf16: bool = False, backend: str, units: int | None,
                 override: dict | None = None) -> KernelConfig:
    """Config for one paged decode shape. `units` = SM count (the schedule's program count P);
    `override` (sweeps) may set ROWS, BLOCK_KV, SUBS, num_stages, maxnreg (4 warps: the MMA's M of 64 rows)."""
    rows, chunks = paged_rows(next_n, heads)
    block_kv, warps, stages, subs = 64, 4, 2, 2
    tuned = {}
    if backend == "cuda":
        tuned = cuda_choice(rows, chunks, heads)
    elif backend == "interpreter":
        block_kv = 32  # small tiles, so sequence and range boundaries fall inside tiles on the CPU too
    options = backend_options(backend, cuda={"num_warps": warps, "num_stages": stages},
                              hip={"num_warps": warps, "num_stages": stages, "matrix_instr_nonkdim": 16})
    check_override(override or {})
    override = {**tuned, **(override or {})}
    if override:
        if "ROWS" in override:  # fewer rows per dot: more, narrower dots (fewer accumulator registers)
            padded = rows * chunks
            rows = max(override["ROWS"], pow2_ceil(max(1, 16 // heads)))
            chunks = padded // rows
            if chunks > 2:
                raise ValueError(f"ROWS {override['ROWS']} needs {chunks} dots per tile; the kernel does 1 or 2")
            if chunks < 1 or rows * heads > MAX_DOT_N:
                raise ValueError(f"ROWS {override['ROWS']}: at most the {padded} draft rows a tile holds, and ROWS x "
                                 f"heads {heads} at most {MAX_DOT_N}")
        block_kv = override.get("BLOCK_KV", block_kv)
        subs = override.get("SUBS", subs)
        for k in ("num_stages", "maxnreg"):
            if k in override:
                options[k] = override[k]
    programs = units if units else 4
    constexprs = {"NEXT_N": next_n, "H": heads, "D": dim, "BS": block_size, "BLOCK_KV": block_kv,
                  "ROWS": rows, "CHUNKS": chunks, "SUBS": subs, "CLEAN": bool(clean), "FILL": FILL,
                  "SELF_SCHEDULE": True, "KV_SHUFFLED": False}
    schedule = {"programs": programs, "subs": subs, "meta_block_kv": block_size,
                "kv_tiles_max": cdiv(max(1, max_context_len), block_kv), "batch": batch, "bf16": bool(bf16),
                "split": "each program computes its share; with schedule_meta given: SELF_SCHEDULE=0, read from it"}
    return KernelConfig("paged", "paged_mqa_logits", KEYS, constexprs, options, (programs * subs,), schedule,
                        launcher="paged", load=_load)


def with_kv_shuffled(cfg: KernelConfig) -> KernelConfig:
    """The config's twin that reads a cache whose fp8 rows are in aiter's pre-shuffled order (kernel.py's
    KV_SHUFFLED): same tiles, schedule and options, only the addresses of the fp8 bytes differ. Its name ends in
    _KV_SHUFFLED_1 (as the kernel's repr names it); the plain layout's configs keep their names."""
    if cfg.constexprs.get("KV_SHUFFLED"):
        return cfg
    return replace(cfg, keys=cfg.keys + ("KV_SHUFFLED",), constexprs={**cfg.constexprs, "KV_SHUFFLED": True})
