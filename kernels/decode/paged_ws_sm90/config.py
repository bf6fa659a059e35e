"""Config of the warp-specialised Gluon paged decode kernel (no triton import: dispatch stays import-light).

Per cache block the kernel reads BS*(D+4) bytes (8.25 KiB at BS 64, D 128) and does one wgmma of
2*BS*D*NP*H FLOP (2.1 MFLOP at next_n 2, H 64: ~0.22 µs of one SM's fp8 rate, against ~0.26 µs for the
block's bytes at the SM's share of 4.3 TB/s). So at next_n >= 2 one program's serial wgmma + epilogue per
block cannot keep up with the memory system: several math warpgroups per SM interleave, as MATH_WG
warpgroups per program and SUBS programs per SM. Shared memory per program: 2 q slots of NP*H*D bytes +
MATH_WG x STAGES x (BS*D + 4*BS) bytes; SUBS of them must fit an SM (227 KiB). Registers: 64K per SM over
SUBS x (MATH_WG + 1) warpgroups at entry, moved by setmaxnreg from the producer to the math warpgroups; a wgmma
of N 256 needs more than 128 per thread (so one program per SM there). MMA_N splits a block's draft rows into
parts of MMA_N / H rows, one wgmma each (two accumulators of MMA_N columns in flight): so next_n 5-8 at H 64
(NP x H = 512, past one wgmma) run here, and next_n 3 computes 3 rows, not 4.
"""
from __future__ import annotations

from ...common.config import KernelConfig, cdiv, pow2_ceil, split_constexprs
from ...common.tuned_by_triton import source, table
from . import KEYS
from .tuned import CUDA_TUNED
from .tuned_by_triton import BY_RELEASE

MAX_DOT_N = 256  # columns of one wgmma
MAX_ROWS_N = 512  # draft rows x heads one program holds (q slots of 2 x 512 x D bytes): past 256, in parts (MMA_N)
MAX_MMA_N = 128  # columns of a part's wgmma: two accumulators of 64 registers a thread in flight
SMEM_PER_SM = 227 * 1024
_DIR = "kernels/decode/paged_ws_sm90"  # (explain names the table file)
SMALL_REGS = 40  # producer warp (setmaxnreg); the math warpgroups keep the rest


def _load():
    from .kernel import paged_mqa_logits_ws_sm90

    return paged_mqa_logits_ws_sm90


def padded_rows(next_n: int, heads: int) -> int:
    """NP: draft rows per wgmma, next_n rounded up to a power of two with NP * heads >= 16."""
    return max(pow2_ceil(next_n), pow2_ceil(max(1, 16 // heads)))


def fits(next_n: int, heads: int) -> bool:
    """The q block of all draft rows x heads fits the program (one wgmma up to 256 columns, parts up to 512)."""
    return padded_rows(next_n, heads) * heads <= MAX_ROWS_N


def smem_bytes(q_rows: int, dim: int, block_size: int, stages: int) -> int:
    """Shared memory of one program: 2 q slots of q_rows and the ring (its depth is shared by the math warpgroups)."""
    return 2 * q_rows * dim + stages * (block_size * dim + 4 * block_size) + 1024  # + barriers, alignment


def parts(next_n: int, heads: int, mma_n: int) -> int:
    """Wgmmas per cache block: 1, or with mma_n the parts of mma_n / heads rows that hold rows below next_n."""
    return cdiv(next_n, mma_n // heads) if mma_n else 1


def q_rows(next_n: int, heads: int, mma_n: int) -> int:
    """Rows of a q slot: NP x H, or with parts (mma_n) those of the parts that hold rows below next_n."""
    if not mma_n:
        return padded_rows(next_n, heads) * heads
    return parts(next_n, heads, mma_n) * mma_n


# cache blocks (batch x max_context_len / 64) from which a shape counts as "large" (~248 per SM; B 128 C 8K, 21K
# blocks, runs the small class's choice faster: docs/DESIGN-NOTES.md)
LARGE_BLOCKS = 32768


def regime(batch: int, max_context_len: int, block_size: int = 64) -> str:
    """The size class the tuned table is kept by: "large" shapes are throughput-bound (many blocks per SM), "small"
    ones latency-bound, and the sweep found different choices best for each."""
    return "large" if batch * cdiv(max(1, max_context_len), block_size) >= LARGE_BLOCKS else "small"


def default_choice(np_heads: int) -> dict:
    """(STAGES, SUBS) by the wgmma's N, before any sweep: two programs per SM with the deepest ring that fits, up
    to N 128; at N 256 one program (its 128 accumulator registers need an entry budget above 64K / 512 = 128)."""
    if np_heads > MAX_DOT_N:
        return {"STAGES": 4, "SUBS": 1, "MATH_WG": 2, "MMA_N": MAX_MMA_N}
    if np_heads > 128:
        return {"STAGES": 8, "SUBS": 1}
    return {"STAGES": 6 if np_heads <= 64 else 5, "SUBS": 2}


# what `override` may set
OVERRIDE_KEYS = ("STAGES", "SUBS", "PIPE", "MATH_WG", "Q_IN_LANES", "MMA_N", "AHEAD", "PTX_SLOTS", "OPAQUE")


def table_key(next_n: int, heads: int) -> int:
    """The key the sweep writes its choices under: the live columns next_n x H."""
    return next_n * heads


def _table_key(tuned: dict, next_n: int, heads: int) -> int | None:
    """The key of this shape's entry: the live columns next_n x H (next_n 3 and 4 differ: 3 runs best in parts of
    one row), else the wgmma's padded N = NP x H (a head count the sweep did not run); None where neither is there."""
    return next((k for k in (table_key(next_n, heads), padded_rows(next_n, heads) * heads) if k in tuned), None)


def table_source(next_n: int, heads: int) -> str:
    """The file (and release) the table entry of this shape comes from, or 'the rule' where none holds it."""
    key = _table_key(table(BY_RELEASE, CUDA_TUNED), next_n, heads)
    return "the rule (default_choice)" if key is None else f"{source(BY_RELEASE, key, _DIR)}[{key}]"


def table_entry(next_n: int, heads: int, size_class: str) -> dict:
    """The sweep's choice for this shape (the installed triton's entries over tuned.py's), {} where none."""
    tuned = table(BY_RELEASE, CUDA_TUNED)
    key = _table_key(tuned, next_n, heads)
    return {} if key is None else tuned[key].get(size_class, {})


def _mma_n(mma_n: int, np_heads: int, heads: int, pipe: bool, lanes: bool) -> int:
    """MMA_N as the kernel takes it: 0 (one wgmma of NP x H) or the columns of each part's wgmma, a multiple of H up
    to MAX_MMA_N, below NP x H; not with PIPE or Q_IN_LANES, which keep one wgmma per block."""
    if np_heads > MAX_DOT_N and not mma_n:
        mma_n = MAX_MMA_N
    if not mma_n or mma_n >= np_heads:
        if np_heads > MAX_DOT_N:
            raise ValueError(f"{np_heads} columns need parts: MMA_N up to {MAX_MMA_N}")
        return 0
    if mma_n % heads or mma_n > MAX_MMA_N or mma_n & (mma_n - 1):
        raise ValueError(f"MMA_N {mma_n}: a power of two multiple of heads {heads}, at most {MAX_MMA_N}")
    if pipe or lanes:
        raise ValueError("MMA_N (a block in parts) does not run with PIPE or Q_IN_LANES")
    return mma_n


def paged_ws_sm90_config(*, heads: int, dim: int, next_n: int, block_size: int, batch: int, max_context_len: int,
                         clean: bool, bf16: bool = False, units: int | None, override: dict | None = None
                         ) -> KernelConfig:
    """Config for one paged decode shape on Hopper. `units` = SM count (the schedule's range count P);
    `override` (sweeps) may set STAGES, SUBS, PIPE, MATH_WG (math warpgroups per program) and Q_IN_LANES
    (the q block loaded so that each lane of a quad holds the heads of one draft row at 4 padded rows, of half a
    row at 2: fewer shuffles in the head sum, fewer repeated stores; as the prefill kernel does; off unless the
    table says so, NP 2 and 4 only)."""
    if not fits(next_n, heads):
        raise ValueError(f"next_n {next_n} x heads {heads}: more than {MAX_ROWS_N} draft-row x head columns")
    if block_size != 64 or dim not in (64, 128):
        raise ValueError(f"needs block_size 64 and dim 64 or 128, got block_size={block_size}, dim={dim}")
    np_ = padded_rows(next_n, heads)
    override = dict(override or {})
    if override.get("MATH_WG", 1) > 1:
        override.setdefault("PIPE", False)  # an override's warpgroups replace the table's PIPE, not add to it
    if override.get("PIPE"):
        override.setdefault("MATH_WG", 1)  # and an override's PIPE the table's warpgroups
    if override.get("PIPE") or override.get("Q_IN_LANES"):
        override.setdefault("MMA_N", 0)  # both keep one wgmma per block: the table's parts go
    size_class = regime(batch, max_context_len, block_size)
    tuned = table_entry(next_n, heads, size_class)
    choice = {**default_choice(np_ * heads), **tuned, **override}
    stages, subs = int(choice["STAGES"]), int(choice["SUBS"])
    programs = units or 132
    # Registers: SUBS programs of (G math warpgroups + the producer's warpgroup) share the SM's 64K, so each thread
    # starts at 64K / (SUBS * (G + 1) * 128); setmaxnreg moves the producer's share (SMALL_REGS) to the math ones.
    g = int(choice.get("MATH_WG", 1))
    if g > 1 and choice.get("PIPE"):
        raise ValueError("PIPE (two accumulators) runs with one math warpgroup per program")
    pipe, lanes = bool(choice.get("PIPE", False)), bool(choice.get("Q_IN_LANES", False)) and np_ in (2, 4)
    mma_n = _mma_n(int(choice.get("MMA_N", 0)), np_ * heads, heads, pipe, lanes)
    need = smem_bytes(q_rows(next_n, heads, mma_n), dim, block_size, stages * g)
    if need * subs > SMEM_PER_SM:
        raise ValueError(f"{subs} programs of {need} bytes of shared memory do not fit one SM")
    threads = subs * (g + 1) * 128
    maxnreg = min(256, (65536 // threads) // 8 * 8)
    # four math warpgroups: one producer warp each, streaming that warpgroup's ring alone (LOADERS = 4); fewer: one
    # producer warp for all of them (LOADERS = 1)
    loaders = 4 if g == 4 else 1
    math_regs = min(256, ((maxnreg * (g + 1) * 128 - 128 * SMALL_REGS) // (g * 128)) // 8 * 8)
    constexprs = {"NEXT_N": next_n, "H": heads, "D": dim, "BS": block_size, "NP": np_, "STAGES": stages,
                  "SUBS": subs, "CLEAN": bool(clean),
                  "PIPE": pipe, "MATH_WG": g, "MATH_REGS": math_regs, "SMALL_REGS": SMALL_REGS, "Q_IN_LANES": lanes,
                  "MMA_N": mma_n, "AHEAD": bool(choice.get("AHEAD", True)) or not mma_n,
                  "PTX_SLOTS": bool(choice.get("PTX_SLOTS", False)), "FULL_AT": -1, "EMPTY_AT": -1,
                  "LOADERS": loaders, "OPAQUE": bool(choice.get("OPAQUE", True)),
                  # the computed split by each partition after warp_specialize, so that the rings' setup and the
                  # partitions' start run under the first loads' latency: with one math warpgroup in the small class
                  # (docs/EXPERIMENTS.md); the plan turns it off where it reads a given schedule (split_constexprs)
                  **split_constexprs(False, g == 1 and size_class == "small")}
    schedule = {"programs": programs, "subs": subs, "meta_block_kv": block_size,
                "blocks_max": cdiv(max(1, max_context_len), block_size), "batch": batch, "bf16": bool(bf16),
                "smem_per_program": need, "size_class": size_class,
                "table": table_source(next_n, heads),
                "math_warpgroups": g,
                "slots": ("waited for and released in PTX at the kv ring barriers' offsets (FULL_AT, EMPTY_AT: "
                          "read from a first build when it compiles)") if constexprs["PTX_SLOTS"]
                else "triton's mbarrier ops (a warpgroup barrier before each release; before each wait too on "
                "triton 3.6)",
                "split": "each program computes its share; with schedule_meta given: SELF_SCHEDULE=0, read from it"
                + ("; computed by each partition after warp_specialize (SPLIT_INSIDE)" if constexprs["SPLIT_INSIDE"]
                   else "")}
    return KernelConfig("paged_ws_sm90", "paged_mqa_logits_ws_sm90", KEYS, constexprs, {"num_warps": 4, "maxnreg": maxnreg},
                        (programs * subs,), schedule, launcher="paged_ws_sm90", load=_load)
