"""Config of the warp-specialised Gluon Hopper prefill kernel (no triton import: dispatch stays import-light)."""
from __future__ import annotations

from ...common.config import KernelConfig, cdiv
from . import KEYS


# Registers a thread by math warpgroups: maxnreg at entry, setmaxnreg's share for each worker math warpgroup and for
# the producer and filler warps (SMALL_REGS); math warpgroup 0 gets the rest (docs/DESIGN-NOTES.md has the sums).
# Three math warpgroups: 160 each and 32 for the small warps (512 a warpgroup-thread): the 1-warp arms hold the
# thread-index values LLVM carries through warp_specialize's worker loop (what 24 cost: docs/DESIGN-NOTES.md).
REGS = {2: {"maxnreg": 168, "MATH_REGS": 240, "SMALL_REGS": 24}, 3: {"maxnreg": 128, "MATH_REGS": 160, "SMALL_REGS": 32}}
DEFAULT_UNITS = 132  # H200 / H100 SXM SM count, when the caller does not say
GROUPS = ((2, 1), (1, 3))  # the (Q_GROUPS, KV_GROUPS) the kernel runs
SMEM_LIMIT = 227 * 1024


def _load():
    from .kernel import mqa_logits_gluon_ws_sm90

    return mqa_logits_gluon_ws_sm90


# the keys a caller may override (`run --kernel gluon_ws_sm90:KEY=V`), mapped onto the table entry's fields
OVERRIDE_KEYS = ("BLOCK_Q", "STAGES", "Q_IN_LANES", "TMA_STORE", "CHAINS", "Q_GROUPS", "KV_GROUPS", "kv_splits",
                 "PTX_SLOTS", "PINGPONG")
HEADS = (8, 16, 32, 64, 128)  # H/2 head pairs per TMA box row, N = BLOCK_Q * H of 128 or 256
DIMS = (64, 128, 256)


def tuned_entry(heads: int, dim: int) -> dict | None:
    """The sweep's entry for (heads, dim) (tuned.py, or the installed triton's in this folder's tuned_by_triton.py), None where no
    sweep chose this kernel for the shape."""
    from ...common.tuned_by_triton import table
    from .tuned import CUDA_TUNED
    from .tuned_by_triton import BY_RELEASE

    return table(BY_RELEASE, CUDA_TUNED).get((heads, dim))


def tuned_shapes() -> list[tuple[int, int]]:
    """The (heads, dim) shapes the sweeps measured this kernel ahead on: the shapes dispatch gives it."""
    from ...common.tuned_by_triton import table
    from .tuned import CUDA_TUNED
    from .tuned_by_triton import BY_RELEASE

    return sorted(table(BY_RELEASE, CUDA_TUNED))


def _overridden(entry: dict, override: dict, heads: int) -> dict:
    """The table entry with OVERRIDE_KEYS (constexpr names, as `run --kernel` spells them) applied."""
    unknown = sorted(set(override) - set(OVERRIDE_KEYS))
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(unknown)}; choose from {', '.join(OVERRIDE_KEYS)}")
    fields = {"STAGES": "stages", "Q_IN_LANES": "q_in_lanes", "TMA_STORE": "tma_store", "CHAINS": "chains",
              "kv_splits": "splits", "PTX_SLOTS": "ptx_slots", "PINGPONG": "pingpong"}
    entry.update({fields[k]: v for k, v in override.items() if k in fields})
    if "BLOCK_Q" in override:
        entry["n"] = int(override["BLOCK_Q"]) * heads
    if "Q_GROUPS" in override or "KV_GROUPS" in override:
        q_groups, kv_groups = entry.get("groups", (2, 1))
        entry["groups"] = (override.get("Q_GROUPS", q_groups), override.get("KV_GROUPS", kv_groups))
    return entry


def gluon_ws_sm90_config(*, heads: int, dim: int, S: int, N: int, clean: bool, compressed: bool = False,
                         bf16: bool = False, units: int | None = None, groups: tuple[int, int] | None = None,
                         stages: int | None = None, q_in_lanes: bool | None = None,
                         n: int | None = None, splits: int | None = None,
                         tma_store: bool | None = None, chains: int | None = None,
                         override: dict | None = None) -> KernelConfig:
    """Math warpgroups (a wgmma each: M = 64 kv rows x N = BLOCK_Q*heads) fed by a TMA producer warp. Each knob
    defaults to tuned.py's entry for (heads, dim), else to the rule named; what each measured is in
    docs/DESIGN-NOTES.md.

    groups = (Q_GROUPS, KV_GROUPS) (else (2, 1)), stages (else 4) and n, the wgmma's N (else 256 at H >= 64 with two
    warpgroups, 128 otherwise): a work item is Q_GROUPS query blocks of BLOCK_Q = n / heads rows against every live
    kv tile of KV_GROUPS * 64 rows; its Q_GROUPS * KV_GROUPS math warpgroups each take one query block and 64 rows
    of each tile. (2, 1): two warpgroups, each its own query rows, sharing each kv tile; (1, 3): three sharing a
    query block (N 128, 160 registers each).

    q_in_lanes (else: whenever BLOCK_Q is a multiple of 4): the q tile is loaded head-pair-major ([H/2, S, 2, D]
    view) so that each lane of a quad holds every head of its query rows: the head sum is one in-thread FMA chain,
    no shuffle, and each logit is stored once.

    tma_store (else off; never with compressed logits): each logits tile [BLOCK_Q, 64] leaves through a
    shared-memory buffer (two per math warpgroup) and one TMA store of whole rows, instead of 4-byte stores of 8
    consecutive columns per quad row (32-byte pieces).

    chains (else 1; q_in_lanes only): a lane's head sum for one logit as `chains` independent FMA chains, then
    added, instead of one chain of H dependent FMAs.

    splits (else 1): work items per query block, each an equal share of the block's live kv tiles, so a causal
    triangle's long rows spread over more programs.

    TILE_PTR (the rule: per-thread stores, BLOCK_Q <= 16, KV_GROUPS == 1): a store's address is the tile's base
    pointer (a scalar) plus the work item's loop-invariant int32 offsets, two instructions where (offsets + start)
    and its 64-bit extension take three; at BLOCK_Q 32 the held offsets spill.

    PINGPONG (the rule: compressed logits with two math warpgroups at H >= 64 and D >= 128; or the override key,
    0 or 2): the two math warpgroups issue their wgmmas in turn through named barriers. In the compressed form
    (each row's columns shifted by its ks) the warpgroups otherwise fall into step, both waiting on the tensor
    cores, then both in the epilogue (the A/B behind the rule: docs/DESIGN-NOTES.md).

    PTX_SLOTS (the table's "ptx_slots", or the override key): the math warpgroups wait for a kv tile and release
    it by PTX at the ring barriers' offsets (FULL_AT, EMPTY_AT: mqa_cli.launch.barrier_offsets reads them from a first
    build when it compiles), every thread arriving, so the tile loop has no 128-thread warpgroup barrier.

    Shared memory: 2 q slots of BLOCK_Q*H*D per query group + STAGES kv tiles of KV_GROUPS*64*D (160 KiB at
    (2, 1), STAGES 4, N 256, D 128): one program per SM, persistent over the work items.
    """
    if heads not in HEADS or dim not in DIMS:
        raise ValueError(f"gluon ws sm90 kernel needs heads in {HEADS} and dim in {DIMS}, got heads={heads}, dim={dim}")
    entry = (tuned_entry(heads, dim) or {}) if groups is None else {}  # a caller's layout is taken as given
    if override:
        entry = _overridden(dict(entry), override, heads)
    groups = tuple(groups or entry.get("groups", (2, 1)))
    stages = stages or entry.get("stages")
    q_in_lanes = entry.get("q_in_lanes") if q_in_lanes is None else q_in_lanes
    n = n or entry.get("n")
    splits = splits or entry.get("splits", 1)
    tma_store = bool(entry.get("tma_store", False) if tma_store is None else tma_store) and not compressed
    chains = int(chains or entry.get("chains", 1))
    ptx_slots = bool(int(entry.get("ptx_slots", False)))
    pingpong = entry.get("pingpong")
    q_groups, kv_groups = groups
    if (q_groups, kv_groups) not in GROUPS:
        raise ValueError(f"groups must be one of {GROUPS}, got {(q_groups, kv_groups)}")
    math_wg = q_groups * kv_groups
    if pingpong is None:  # the rule (docstring): compressed logits, two math warpgroups, H >= 64, D >= 128
        pingpong = 2 if compressed and math_wg == 2 and heads >= 64 and dim >= 128 else 0
    pingpong = int(pingpong)
    if pingpong not in (0, 2) or (pingpong and math_wg != 2):
        raise ValueError(f"PINGPONG is 0 or 2 (named-barrier turns between two math warpgroups), got {pingpong}")
    # N = 256 for H = 64 with two warpgroups; N = 128 below (H = 32 at N = 256 in query-major order spills: 8
    # query rows of per-row state) and with three (their 160 registers hold a 64 x 128 accumulator).
    n = n or (256 if heads >= 64 and math_wg == 2 else 128)
    if n not in (128, 256) or n < heads or (n == 256 and math_wg != 2):
        raise ValueError(f"wgmma N must be 128 or 256 (256 only with two math warpgroups) and >= heads, got {n}")
    block_q = n // heads
    block_kv = 64
    stages = stages or 4
    bqh = block_q * heads
    smem = q_groups * 2 * bqh * dim + stages * kv_groups * block_kv * dim
    smem += 2 * math_wg * block_q * block_kv * (2 if bf16 else 4) if tma_store else 0
    if smem > SMEM_LIMIT:
        raise ValueError(f"{stages} stages of {kv_groups * block_kv}-row kv tiles and q blocks of {bqh} x {dim} "
                         f"need {smem} bytes of shared memory")
    q_in_lanes = block_q % 4 == 0 if q_in_lanes is None else bool(q_in_lanes)
    per_thread = not (tma_store or compressed)  # the only store TILE_PTR changes
    tile_ptr = per_thread and block_q <= 16 and kv_groups == 1
    if chains > 1 and not (q_in_lanes and heads % (2 * chains) == 0):
        raise ValueError(f"chains {chains} needs q_in_lanes and an even number of heads per chain (H {heads})")
    if q_in_lanes and block_q % 4:
        raise ValueError(f"q_in_lanes spreads query rows over the 4 lanes of a quad: BLOCK_Q {block_q} is not a "
                         "multiple of 4")
    if splits < 1:
        raise ValueError(f"kv splits must be >= 1, got {splits}")
    items = cdiv(S, q_groups * block_q) * splits
    programs = max(1, min(items, units or DEFAULT_UNITS))
    constexprs = {"H": heads, "D": dim, "BLOCK_Q": block_q, "BLOCK_KV": block_kv, "STAGES": stages,
                  "CLEAN": bool(clean), "COMPRESSED": bool(compressed), "BF16": bool(bf16),
                  "MATH_REGS": REGS[math_wg]["MATH_REGS"], "SMALL_REGS": REGS[math_wg]["SMALL_REGS"], "Q_GROUPS": q_groups,
                  "KV_GROUPS": kv_groups, "Q_IN_LANES": q_in_lanes, "TMA_STORE": tma_store,
                  "CHAINS": chains, "TILE_PTR": tile_ptr, "PTX_SLOTS": ptx_slots, "PINGPONG": pingpong,
                  "FULL_AT": -1, "EMPTY_AT": -1}
    options = {"num_warps": 4, "maxnreg": REGS[math_wg]["maxnreg"]}
    # "args": the kernel's trailing runtime scalars, in order (the launcher appends them).
    schedule = {"args": {"n_items": items, "kv_splits": splits}, "items": items, "rows_per_item": q_groups * block_q,
                "programs_per_sm": 1, "units": units, "kv_tile": kv_groups * block_kv}
    return KernelConfig("gluon_ws_sm90", "mqa_logits_gluon_ws_sm90", KEYS, constexprs, options, (programs,),
                        schedule, launcher="gluon_ws_sm90", load=_load)
