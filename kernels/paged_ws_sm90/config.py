"""Config of the warp-specialised Gluon paged decode kernel (no triton import: dispatch stays import-light).

Per cache block the kernel reads BS*(D+4) bytes (8.25 KiB at BS 64, D 128) and does one wgmma of
2*BS*D*NP*H FLOP (2.1 MFLOP at next_n 2, H 64: ~0.22 µs of one SM's fp8 rate, against ~0.26 µs for the
block's bytes at the SM's share of 4.3 TB/s). So at next_n >= 2 one program's serial wgmma + epilogue per
block cannot keep up with the memory system: several math warpgroups per SM interleave, as MATH_WG
warpgroups per program and SUBS programs per SM. Shared memory per program: 2 q slots of NP*H*D bytes +
MATH_WG x STAGES x (BS*D + 4*BS) bytes; SUBS of them must fit an SM (227 KiB). Registers: 64K per SM over
SUBS x (MATH_WG + 1) warpgroups at entry, moved by setmaxnreg from the producer to the math warpgroups; a wgmma
of N 256 needs more than 128 per thread (so one program per SM there).
"""
from __future__ import annotations

from ..config import KernelConfig, cdiv, pow2_ceil
from . import KEYS
from .tuned import CUDA_TUNED

MAX_DOT_N = 256  # columns of one wgmma
SMEM_PER_SM = 227 * 1024
SMALL_REGS = 40  # producer warp (setmaxnreg); the math warpgroup keeps the rest


def _load():
    from .kernel import paged_mqa_logits_ws_sm90

    return paged_mqa_logits_ws_sm90


def padded_rows(next_n: int, heads: int) -> int:
    """NP: draft rows per wgmma, next_n rounded up to a power of two with NP * heads >= 16."""
    return max(pow2_ceil(next_n), pow2_ceil(max(1, 16 // heads)))


def fits(next_n: int, heads: int) -> bool:
    """One wgmma covers all draft rows x heads."""
    return padded_rows(next_n, heads) * heads <= MAX_DOT_N


def smem_bytes(np_heads: int, dim: int, block_size: int, stages: int) -> int:
    """Shared memory of one program: 2 q slots and the ring (its depth is shared by the math warpgroups)."""
    return 2 * np_heads * dim + stages * (block_size * dim + 4 * block_size) + 1024  # + barriers, alignment


LARGE_BLOCKS = 16384  # cache blocks (batch x max_context_len / 64) from which a shape counts as "large" (~124 per SM)


def regime(batch: int, max_context_len: int, block_size: int = 64) -> str:
    """The size class the tuned table is kept by: "large" shapes are throughput-bound (many blocks per SM), "small"
    ones latency-bound, and the sweep found different choices best for each."""
    return "large" if batch * cdiv(max(1, max_context_len), block_size) >= LARGE_BLOCKS else "small"


def default_choice(np_heads: int) -> dict:
    """(STAGES, SUBS) by the wgmma's N, before any sweep: two programs per SM with the deepest ring that fits, up
    to N 128; at N 256 one program (its 128 accumulator registers need an entry budget above 64K / 512 = 128)."""
    if np_heads > 128:
        return {"STAGES": 8, "SUBS": 1}
    return {"STAGES": 6 if np_heads <= 64 else 5, "SUBS": 2}


OVERRIDE_KEYS = ("STAGES", "SUBS", "PIPE", "MATH_WG", "maxnreg", "Q_IN_LANES", "HALVES")  # what `override` may set


def paged_ws_sm90_config(*, heads: int, dim: int, next_n: int, block_size: int, batch: int, max_context_len: int,
                         clean: bool, bf16: bool = False, units: int | None, override: dict | None = None
                         ) -> KernelConfig:
    """Config for one paged decode shape on Hopper. `units` = SM count (the schedule's range count P);
    `override` (sweeps) may set STAGES, SUBS, PIPE, MATH_WG (math warpgroups per program), maxnreg and Q_IN_LANES
    (the q block loaded so that each lane of a quad holds the heads of one draft row at 4 padded rows, of half a
    row at 2: fewer shuffles in the head sum, fewer repeated stores; as the prefill kernel does; off unless the
    table says so, NP 2 and 4 only)."""
    if not fits(next_n, heads):
        raise ValueError(f"next_n {next_n} x heads {heads} does not fit one wgmma of N <= {MAX_DOT_N}")
    if block_size != 64 or dim not in (64, 128):
        raise ValueError(f"needs block_size 64 and dim 64 or 128, got block_size={block_size}, dim={dim}")
    np_ = padded_rows(next_n, heads)
    override = dict(override or {})
    if override.get("MATH_WG", 1) > 1:
        override.setdefault("PIPE", False)  # an override's warpgroups replace the table's PIPE, not add to it
    if override.get("PIPE"):
        override.setdefault("MATH_WG", 1)  # and an override's PIPE the table's warpgroups
    tuned = CUDA_TUNED.get(np_ * heads, {}).get(regime(batch, max_context_len, block_size), {})
    choice = {**default_choice(np_ * heads), **tuned, **override}
    stages, subs = int(choice["STAGES"]), int(choice["SUBS"])
    programs = units or 132
    # Registers: SUBS programs of (G math warpgroups + the producer's warpgroup) share the SM's 64K, so each thread
    # starts at 64K / (SUBS * (G + 1) * 128); setmaxnreg moves the producer's share (SMALL_REGS) to the math ones.
    g = int(choice.get("MATH_WG", 1))
    if g > 1 and choice.get("PIPE"):
        raise ValueError("PIPE (two accumulators) runs with one math warpgroup per program")
    need = smem_bytes(np_ * heads, dim, block_size, stages * g)
    if need * subs > SMEM_PER_SM:
        raise ValueError(f"{subs} programs of {need} bytes of shared memory do not fit one SM")
    threads = subs * (g + 1) * 128
    maxnreg = int(choice.get("maxnreg", min(256, (65536 // threads) // 8 * 8)))
    math_regs = min(256, ((maxnreg * (g + 1) * 128 - 128 * SMALL_REGS) // (g * 128)) // 8 * 8)
    constexprs = {"NEXT_N": next_n, "H": heads, "D": dim, "BS": block_size, "NP": np_, "STAGES": stages,
                  "SUBS": subs, "CLEAN": bool(clean), "SELF_SCHEDULE": True,
                  "PIPE": bool(choice.get("PIPE", False)), "MATH_WG": g, "MATH_REGS": math_regs,
                  "SMALL_REGS": SMALL_REGS, "Q_IN_LANES": bool(choice.get("Q_IN_LANES", False)) and np_ in (2, 4)}
    # HALVES: each block's wgmma as two over half the draft rows (np_ >= 2; not with PIPE or Q_IN_LANES)
    constexprs["HALVES"] = bool(choice.get("HALVES", False)) and np_ >= 2 and not constexprs["PIPE"] \
        and not constexprs["Q_IN_LANES"]
    schedule = {"programs": programs, "subs": subs, "meta_block_kv": block_size,
                "blocks_max": cdiv(max(1, max_context_len), block_size), "batch": batch, "bf16": bool(bf16),
                "smem_per_program": need, "size_class": regime(batch, max_context_len, block_size),
                "math_warpgroups": g,
                "split": "each program computes its share; with schedule_meta given: SELF_SCHEDULE=0, read from it"}
    return KernelConfig("paged_ws_sm90", "paged_mqa_logits_ws_sm90", KEYS, constexprs, {"num_warps": 4, "maxnreg": maxnreg},
                        (programs * subs,), schedule, launcher="paged_ws", load=_load)
