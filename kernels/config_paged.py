"""Config of the paged decode kernel (no triton import, so dispatch and `explain` stay cheap).

The kernel folds the draft rows x heads into the MMA's N axis: ROWS rows x H heads per dot
(at most 256 columns, at least 16 as tl.dot needs), and CHUNKS (1 or 2) such dots per kv tile,
so every kv tile is read from memory once for all next_n rows. The grid is (batch, context
splits); the split size depends only on sizes known on the host (batch, max_context_len), never
on context_lens, so a launch needs no host sync and can be captured in a CUDA graph.
"""
from __future__ import annotations

from .configs import KernelConfig, _pow2_ceil

PAGED_KEYS = ("NEXT_N", "H", "D", "BS", "BLOCK_KV", "ROWS", "CHUNKS", "CLEAN")

MAX_DOT_N = 256  # columns of one dot: ROWS * H (N = 256 beat 128 for the prefill kernel on Hopper)


def paged_rows(next_n: int, heads: int) -> tuple[int, int]:
    """(ROWS, CHUNKS): draft rows per dot and dots per kv tile; ROWS * CHUNKS >= next_n, pow2."""
    padded = max(_pow2_ceil(next_n), _pow2_ceil(max(1, 16 // heads)))  # ROWS * H >= 16
    rows = min(padded, max(1, MAX_DOT_N // heads))
    return rows, padded // rows


def paged_splits(batch: int, max_context_len: int, block_kv: int, units: int | None, backend: str,
                 programs_per_unit: int = 8) -> int:
    """kv tiles per program of grid axis 1: enough programs to fill the device even at batch 1."""
    tiles = max(1, -(-max_context_len // block_kv))
    if backend == "interpreter":
        want, min_tiles = 4, 1  # a few splits, so the split logic runs on the CPU too
    else:
        want, min_tiles = programs_per_unit * (units or 1), 2  # >= 2 tiles amortise the q load
    splits = max(1, min(tiles, -(-want // max(1, batch))))
    return max(min_tiles, -(-tiles // splits))


def paged_config(*, heads: int, dim: int, next_n: int, block_size: int, batch: int, max_context_len: int,
                 clean: bool, backend: str, units: int | None) -> KernelConfig:
    rows, chunks = paged_rows(next_n, heads)
    block_kv = 64  # one wgmma M; a whole number of cache blocks for block_size 16/32/64
    programs_per_unit = 8
    if backend == "hip":
        options = {"num_warps": 4, "num_stages": 2, "waves_per_eu": 2, "matrix_instr_nonkdim": 16}
    elif backend == "cuda":
        # H200 sweep (scripts/sweep_paged.py, docs/PERFORMANCE.md): 128-token tiles (twice the bytes per
        # stage) and deeper pipelining for several draft rows or small batches; at next_n 1 half as many
        # programs, each twice as long. B64 C64K: n1 193 -> 186 µs, n2 360 -> 256; B8 C64K n1 26.6 -> 23.7.
        block_kv = 128
        options = {"num_warps": 4, "num_stages": 5 if next_n >= 2 or batch <= 8 else 3}
        programs_per_unit = 4 if next_n == 1 else 8
        if next_n == 1 and batch > 8 and max_context_len >= 32768:
            # Wide sweep (every config checked against the reference on the GPU): 256-token tiles, 8 warps,
            # 5 stages, 2 programs per SM. B64 C64K 180.2 -> 171.1 µs, B128 C64K 375.9 -> 349.4 (77 % of the
            # copy rate). Not better at B 8 or next_n 2; small contexts not measured, so not used there.
            block_kv = 256
            options = {"num_warps": 8, "num_stages": 5}
            programs_per_unit = 2
    else:
        options = {"num_warps": 4, "num_stages": 1}
    per_split = paged_splits(batch, max_context_len, block_kv, units, backend, programs_per_unit)
    constexprs = {"NEXT_N": next_n, "H": heads, "D": dim, "BS": block_size, "BLOCK_KV": block_kv,
                  "ROWS": rows, "CHUNKS": chunks, "CLEAN": bool(clean)}
    n_tiles = max(1, -(-max_context_len // block_kv))
    return KernelConfig("paged_mqa_logits", "paged_decode", PAGED_KEYS, constexprs, options,
                        {"tiles_per_split": per_split, "context_splits": -(-n_tiles // per_split)})
