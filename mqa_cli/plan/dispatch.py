"""Dispatch as data: one ordered table of kernel rows; `plan()` takes the first whose conditions hold.

`explain` prints this table and `run`/`verify`/`bench`/`dump` execute what `plan()` returns, so
what is explained is what runs. Each condition carries its required and actual value, so a
rejection reads as a sentence. Nothing here imports torch or triton.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from mqa_kernels.common.config import KernelConfig
from mqa_kernels.decode.paged.config import OVERRIDE_KEYS as PAGED_KEYS
from mqa_kernels.decode.paged.config import paged_config, with_kv_shuffled
from mqa_kernels.decode.paged_ws_sm90.config import fits as paged_ws_fits
from mqa_kernels.decode.paged_ws_sm90.config import OVERRIDE_KEYS as PAGED_WS_KEYS
from mqa_kernels.decode.paged_ws_sm90.config import paged_ws_sm90_config
from mqa_kernels.prefill.gluon_ws_sm90.config import gluon_ws_sm90_config
from mqa_kernels.prefill.gluon_ws_sm90.config import OVERRIDE_KEYS as GLUON_KEYS
from mqa_kernels.prefill.gluon_ws_sm90.config import tuned_shapes as gluon_tuned_shapes
from mqa_kernels.prefill.h64d128.config import h64d128_config
from mqa_kernels.prefill.heads_on_m.config import heads_on_m_config
from mqa_kernels.prefill.tiled.config import OVERRIDE_KEYS as TILED_KEYS
from mqa_kernels.prefill.tiled.config import tiled_config

from ..errors import UserError
from . import build
from .targets import Target
from mqa_kernels.common.versions import FACTS, installed as triton_version
from ..problem.shape import Shape


@dataclass(frozen=True)
class Check:
    name: str
    required: str
    actual: str
    ok: bool

    def sentence(self) -> str:
        return f"{self.name} must be {self.required}, is {self.actual}"


class Capabilities:
    """Lazy probes of the toolchain; each is computed on first use and shown, never swallowed."""

    def __init__(self):
        self._cache = {}

    def _get(self, key, fn):
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    @property
    def triton_version(self) -> str:
        return self._get("triton", lambda: triton_version() or "not installed")

    @property
    def gluon(self) -> str:
        """'available' or why not, found from the installed files (no import)."""

        def probe():
            from importlib.metadata import PackageNotFoundError, distribution

            try:
                dist = distribution("triton")
            except PackageNotFoundError:
                return "triton not installed"
            path = dist.locate_file("triton/experimental/gluon/language/nvidia/hopper/__init__.py")
            return "available" if path.exists() else "missing (triton/experimental/gluon not in this triton)"

        return self._get("gluon", probe)


def _pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


def check_eq(name, actual, required) -> Check:
    return Check(name, f"== {required}", str(actual), actual == required)


def check_in(name, actual, allowed) -> Check:
    return Check(name, "in {" + ", ".join(map(str, allowed)) + "}", str(actual), actual in allowed)


def check_pow2_range(name, actual, lo, hi) -> Check:
    return Check(name, f"a power of two in [{lo}, {hi}]", str(actual), _pow2(actual) and lo <= actual <= hi)


def check_ge(name, actual, bound) -> Check:
    return Check(name, f">= {bound}", str(actual), actual >= bound)


def check_fact(caps: Capabilities, name: str, also: tuple = ()) -> Check:
    """The installed triton is a release where version fact `name` holds (kernels/common/versions.py); `also` names the
    facts the row's code relies on besides, those that hold for this release (shown, never ruled on)."""
    v = caps.triton_version
    fact = FACTS[name]
    known = v != "not installed" and v[:1].isdigit()
    extra = [f for f in also if known and FACTS[f].holds(v)]
    return Check("triton", fact.required() + (f"; here: {', '.join(extra)}" if extra else ""), v,
                 known and fact.holds(v))


def check_fp8_runs(shape: Shape, target: Target) -> Check:
    """The Triton interpreter cannot run e4m3fnuz; GPU targets need their own flavour."""
    if target.backend == "interpreter":
        return Check("fp8 flavour", "e4m3fn (the Triton interpreter does not handle e4m3fnuz)", shape.fp8,
                     shape.fp8 == "e4m3fn")
    return Check("fp8 flavour", f"{target.fp8} (native on {target.name})", shape.fp8, shape.fp8 == target.fp8)


@dataclass(frozen=True)
class Row:
    name: str
    summary: str
    conditions: Callable[[Shape, Target, Capabilities], list]
    config: Callable[..., KernelConfig]  # (shape, target), and override={KEY: value} where variant_keys says
    # the keys `run/verify --kernel NAME:KEY=V` may give config(..., override=) (the config module's OVERRIDE_KEYS):
    # the config is rebuilt with them, its schedule recomputed; none: launch options only
    variant_keys: tuple = ()


def check_offsets(shape: Shape) -> Check:
    """Every kernel forms row * stride products in 64 bits, so no output size rules a row out; shown so the
    limit is visible (int32 offsets would fail past 2^31 elements, 8 GiB of fp32 logits)."""
    return Check("offsets", "64-bit (any size)", f"64-bit ({shape.out_elements:,} output elements)", True)


def check_block_offsets(shape: Shape) -> Check:
    """The Gluon prefill kernel addresses a query block's logits as a 64-bit row base plus int32 offsets (fewer
    registers in its tile loop), so up to 32 rows of the kv-tile-padded output width must stay below 2^31 elements
    (N up to about 67M kv rows): far past any index, shown so the limit is visible."""
    span = 32 * (-(-max(shape.N, 1) // 64) * 64)
    return Check("block offsets", "< 2^31 (32 rows, int32)", f"{span:,}", span < 2 ** 31)


def check_split_blocks(shape: Shape) -> Check:
    """The Gluon decode kernel counts the batch's cache blocks in 32-bit integers when it splits the work (a
    64-bit division on a decode step's critical path costs latency), so batch x cdiv(max_context_len, 64) must stay
    below 2^31 (2^37 tokens of context): far past any cache, shown so the limit is visible."""
    blocks = shape.batch * -(-max(shape.N, 1) // 64)
    return Check("split blocks", "< 2^31 (32-bit split)", f"{blocks:,}", blocks < 2 ** 31)


def _tiled_conditions(shape, target, caps):
    return [
        check_eq("problem", shape.kind, "prefill"),
        check_pow2_range("heads", shape.heads, 8, 128),
        check_pow2_range("dim", shape.dim, 32, 256),
        check_fp8_runs(shape, target),
        check_fact(caps, "triton_kernels", TRITON_FACTS),
        check_offsets(shape),
    ]


def _tiled_config(shape, target, override=None):
    return tiled_config(heads=shape.heads, dim=shape.dim, S=shape.S, N=shape.N, clean=shape.clean_logits,
                        compressed=shape.compressed, bf16=shape.bf16, backend=target.backend, units=target.units,
                        override=override)


def _specialised_conditions(target_name: str, min_seq: int, heads: tuple):
    """The conditions of a row for one target, head counts and D 128, from seq_len min_seq."""

    def conditions(shape, target, caps):
        return [
            check_eq("problem", shape.kind, "prefill"),
            check_eq("target", target.name, target_name),
            check_in("heads", shape.heads, heads),
            check_eq("dim", shape.dim, 128),
            check_ge("seq_len (S)", shape.S, min_seq),
            check_fp8_runs(shape, target),
            check_fact(caps, "triton_kernels", TRITON_FACTS),
            check_offsets(shape),
        ]

    return conditions


def _h64d128_config(shape, target):
    return h64d128_config(heads=shape.heads, dim=shape.dim, S=shape.S, N=shape.N, clean=shape.clean_logits,
                          compressed=shape.compressed, bf16=shape.bf16)


def _heads_on_m_config(row_target: str):
    def config(shape, target):
        return heads_on_m_config(heads=shape.heads, dim=shape.dim, S=shape.S, N=shape.N, clean=shape.clean_logits,
                                 compressed=shape.compressed, bf16=shape.bf16, row_target=row_target,
                                 target=target.name)

    return config


# The facts the rows' code depends on besides the release check itself (explain names those that hold here).
TRITON_FACTS = ("tree_reduce", "interpreter_needs_numpy_below_2_4", "fp_fusion_default_warns")
GLUON_FACTS = ("gluon_names_3_6", "gluon_names_3_8", "tree_reduce", "in_order_reduce", "fp_fusion_default_warns")


def check_gluon(caps: Capabilities) -> list:
    """Gluon's API changes between releases: these kernels compile on the releases fact gluon_hopper lists
    (mqa_kernels.common.gluon_compat bridges the renames)."""
    return [Check("gluon", "available", caps.gluon, caps.gluon == "available"),
            check_fact(caps, "gluon_hopper", GLUON_FACTS)]


def _check_swept(shape: Shape) -> Check:
    """The Gluon prefill kernel takes the (heads, dim) shapes its sweeps measured it ahead on (its tuned.py)."""
    swept = gluon_tuned_shapes()
    return Check("heads x dim", "a shape the sweeps chose it for (tuned.py): " + ", ".join(f"H{h} D{d}" for h, d in swept),
                 f"H{shape.heads} D{shape.dim}", (shape.heads, shape.dim) in swept)


def _gluon_ws_sm90_conditions(shape, target, caps):
    return [
        check_eq("problem", shape.kind, "prefill"),
        check_eq("target", target.name, "sm90"),
        _check_swept(shape),
        check_ge("seq_len (S)", shape.S, 1024),
        check_eq("fp8 flavour", shape.fp8, "e4m3fn"),
        *check_gluon(caps),
        check_offsets(shape),
        check_block_offsets(shape),
    ]


def _gluon_ws_sm90_config(shape, target, override=None):
    return gluon_ws_sm90_config(heads=shape.heads, dim=shape.dim, S=shape.S, N=shape.N, clean=shape.clean_logits,
                                compressed=shape.compressed, bf16=shape.bf16, units=target.units, override=override)


# The table, in order. The portable row comes last and holds wherever Triton runs.
PREFILL_ROWS: list[Row] = [
    Row("gluon_ws_sm90", "warp-specialised Gluon on Hopper: TMA producer warp, two math warpgroups with their own "
        "query rows (wgmma 64 x N 128/256, setmaxnreg 240/24) or three sharing a query block (N 128, 160), each kv "
        "tile loaded once for all, query rows spread over the lanes of a quad (head sum without shuffles), -inf "
        "filler warp, persistent snake-ordered grid, optional kv splits, optional kv ring waited for and released "
        "in PTX (PTX_SLOTS: no warpgroup barrier a tile); the (heads, dim) shapes where a sweep measured it ahead (its table, tuned.py, says by how much; "
        "docs/PERFORMANCE.md)",
        _gluon_ws_sm90_conditions, _gluon_ws_sm90_config, GLUON_KEYS),
    Row("heads_on_m_gfx950", "aiter's rule (its H64 D128 kernel on gfx950 for seq_len >= 4096), here for H 64 and 32: "
        "one-wave workgroups, a query row each, its heads in the wave's 32x32x64 MFMA tiles (kv = M, heads = N), relu "
        "(one max) x weight summed in its registers (FMAs and a lane swap: no LDS round trip), no barrier in the tile "
        "loop, 2 waves per SIMD, no scratch, uniform loop bounds, one tile loop (cost model: `mqa-logits dump "
        "--target gfx950`)",
        _specialised_conditions("gfx950", 4096, (32, 64)), _heads_on_m_config("gfx950")),
    Row("heads_on_m_gfx942", "the same kernel on gfx942 (MI300X: 32x32x16 fp8 MFMA, e4m3fnuz) for seq_len >= 4096, H "
        "64 and 32: one wave per query row, its heads summed in that wave's registers, each kv tile shared by 4 rows, "
        "2 waves per SIMD, no scratch",
        _specialised_conditions("gfx942", 4096, (32, 64)), _heads_on_m_config("gfx942")),
    Row("h64d128_sm90", "specialised long-row kernel on Hopper (H 64 or 32, D 128): 256/H query rows x H heads "
        "= MMA N 256, unmasked interior tiles, heaviest blocks first, wide -inf stores; on every supported triton the "
        "Gluon row takes its shapes first, so it runs when named (--kernel h64d128_sm90)",
        _specialised_conditions("sm90", 1024, (32, 64)), _h64d128_config),
    Row("tiled", "portable Triton kernel: kv tile = MMA M, BLOCK_Q x heads = N; live tiles only; -inf fused",
        _tiled_conditions, _tiled_config, TILED_KEYS),
]

def _paged_conditions(shape, target, caps):
    return [
        check_eq("problem", shape.kind, "paged"),
        Check("next_n", "in [1, 8]", str(shape.next_n), 1 <= shape.next_n <= 8),
        check_in("block_size", shape.block_size, (1, 16, 32, 64, 128, 256)),
        check_pow2_range("heads", shape.heads, 8, 64),
        check_in("dim", shape.dim, (64, 128)),
        check_cache_layout(shape, ("plain", "shuffled")),
        check_fp8_runs(shape, target),
        check_fact(caps, "triton_kernels", TRITON_FACTS),
        check_offsets(shape),
    ]


def check_cache_layout(shape: Shape, layouts: tuple) -> Check:
    """The order of the cache's fp8 rows a row reads: DeepGEMM's plain rows, or aiter's pre-shuffled ones (16-token
    groups: block_size a multiple of 16)."""
    ok = shape.cache_layout in layouts and (shape.cache_layout == "plain" or shape.block_size % 16 == 0)
    want = " or ".join(layouts) + (" (shuffled: block_size a multiple of 16)" if "shuffled" in layouts else "")
    return Check("cache layout", want, f"{shape.cache_layout}, block_size {shape.block_size}", ok)


def _paged_config(shape, target, override=None):
    cfg = paged_config(heads=shape.heads, dim=shape.dim, next_n=shape.next_n, block_size=shape.block_size,
                       batch=shape.batch, max_context_len=shape.N, clean=shape.clean_logits, bf16=shape.bf16,
                       backend=target.backend, units=target.units, override=override)
    return with_kv_shuffled(cfg) if shape.cache_layout == "shuffled" else cfg


def check_cache_tma(shape: Shape) -> Check:
    """The Gluon decode kernel reads the cache blocks by TMA in place; a cache inside a bigger buffer whose block
    stride TMA cannot describe runs the portable row (mqa_cli.plan.build)."""
    return Check("cache", "TMA-describable (block stride a multiple of 16 bytes and of D, 16-byte aligned base)",
                 build.cache_sentence(shape), build.cache_describable(shape))


def _paged_ws_sm90_conditions(shape, target, caps):
    return [
        check_eq("problem", shape.kind, "paged"),
        check_eq("target", target.name, "sm90"),
        check_eq("block_size", shape.block_size, 64),
        check_in("dim", shape.dim, (64, 128)),
        check_pow2_range("heads", shape.heads, 8, 64),
        Check("next_n x heads", "<= 512 (one wgmma up to 256, parts past it)", f"{shape.next_n} x {shape.heads}",
              1 <= shape.next_n and paged_ws_fits(shape.next_n, shape.heads)),
        check_eq("fp8 flavour", shape.fp8, "e4m3fn"),
        check_cache_layout(shape, ("plain",)),
        check_cache_tma(shape),
        *check_gluon(caps),
        check_split_blocks(shape),
        check_offsets(shape),
    ]


def _paged_ws_sm90_config(shape, target, override=None):
    return paged_ws_sm90_config(heads=shape.heads, dim=shape.dim, next_n=shape.next_n, block_size=shape.block_size,
                                batch=shape.batch, max_context_len=shape.N, clean=shape.clean_logits, bf16=shape.bf16,
                                units=target.units, override=override)


# The paged decode form (fp8_paged_mqa_logits): the Hopper TMA kernel, then the portable row.
PAGED_ROWS: list[Row] = [
    Row("paged_ws_sm90", "warp-specialised Gluon decode on Hopper: a TMA producer warp streams whole cache blocks "
        "(fp8 rows + fp32 scales, ids read 32 at a time from the block table) into a ring; one wgmma per block for "
        "all next_n rows x heads, or one per part of the rows (MMA_N: next_n 3 as 2 + 1 rows, 5-8 at H 64); "
        "where the sweep chose it, ring slots waited for and released in PTX, without warpgroup barriers "
        "(PTX_SLOTS); with four math warpgroups (next_n 2 at large batches) one producer warp each, streaming its "
        "own ring; persistent length-balanced ranges, SUBS programs per SM; the TMA descriptors prefetched "
        "at entry; at small batches with one math warpgroup, a computed split found by each partition after the "
        "warps start (SPLIT_INSIDE)", _paged_ws_sm90_conditions, _paged_ws_sm90_config,
        PAGED_WS_KEYS),
    Row("paged", "paged decode: persistent grid, the cache blocks of all sequences split evenly over the SMs "
        "(schedule metadata, or computed by each program when none is given); each kv tile gathered once through "
        "the block table for all next_n draft rows x heads (= MMA N); -inf fused; reads aiter's pre-shuffled cache in "
        "place (KV_SHUFFLED)", _paged_conditions, _paged_config,
        PAGED_KEYS),
]

TABLE: list[Row] = PREFILL_ROWS + PAGED_ROWS


# Former row names, refused with the row's name now (no second name runs anything).
RENAMED = {"h64d128_gfx950": "heads_on_m_gfx950", "h64d128_gfx942": "heads_on_m_gfx942"}


@dataclass
class Candidate:
    row: Row
    checks: list

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def first_failure(self) -> Check | None:
        return next((c for c in self.checks if not c.ok), None)


@dataclass
class Plan:
    shape: Shape
    target: Target
    candidates: list
    chosen: Candidate
    config: KernelConfig
    forced: bool = False
    notes: list = field(default_factory=list)
    # what the chosen row runs as, decided after dispatch (mqa_cli.plan.build): schedule, cache, slot offsets
    decisions: list = field(default_factory=list)


def plan(shape: Shape, target: Target, kernel: str | None = None, force: bool = False,
         caps: Capabilities | None = None) -> Plan:
    """Evaluate every row in order and pick the first that holds (or the named one)."""
    caps = caps or Capabilities()
    candidates = [Candidate(row, row.conditions(shape, target, caps)) for row in TABLE]
    if kernel is not None:
        chosen = next((c for c in candidates if c.row.name == kernel), None)
        if chosen is None and kernel in RENAMED:
            raise UserError(f"kernel {kernel} is now named {RENAMED[kernel]} (the kernel it runs)")
        if chosen is None:
            raise UserError(f"unknown kernel {kernel!r}; choose one of {', '.join(r.name for r in TABLE)}")
        if not chosen.ok and not force:
            fails = "; ".join(c.sentence() for c in chosen.checks if not c.ok)
            raise UserError(f"kernel {kernel} does not hold for this problem on {target.name}: {fails} (--force to run it anyway)")
        notes = [f"forced by --kernel {kernel}" + (" --force" if not chosen.ok else "")]
        return _decided(Plan(shape, target, candidates, chosen, _configure(chosen.row, shape, target), True, notes))
    chosen = next((c for c in candidates if c.ok), None)
    if chosen is None:
        why = "; ".join(f"{c.row.name}: {c.first_failure.sentence()}" for c in candidates)
        raise UserError(f"no kernel supports this problem on {target.name}: {why}")
    return _decided(Plan(shape, target, candidates, chosen, _configure(chosen.row, shape, target)))


def _decided(p: Plan) -> Plan:
    """The plan with its config final: the decisions that follow dispatch applied (mqa_cli.plan.build)."""
    p.config, p.decisions = build.decide(p.shape, p.config)
    return p


def plan_spec(shape: Shape, target: Target, spec: str | None, force: bool = False,
              caps: Capabilities | None = None) -> Plan:
    """plan() for a --kernel value that may carry config overrides ('NAME:KEY=VALUE,...', ':KEY=VALUE' for the
    dispatched row): the row's config rebuilt with them (its schedule recomputed), so a variant can be run and
    checked, not only compiled. A row that cannot rebuild its config takes launch options only."""
    from .overrides import OPTION_KEYS, apply_overrides, parse_overrides, split_kernel_spec

    name, overrides = split_kernel_spec(spec)
    p = plan(shape, target, kernel=name, force=force, caps=caps)
    if not overrides:
        return p
    row = p.chosen.row
    if not row.variant_keys:
        bad = [k for k in overrides if k not in OPTION_KEYS]
        if bad:
            raise UserError(f"kernel {row.name} cannot rebuild its schedule for {', '.join(bad)} (launch options "
                            f"only); `mqa-logits dump --kernel {spec}` compiles that variant")
        p.config = apply_overrides(p.config, overrides)
    else:
        unknown = [k for k in overrides if k not in row.variant_keys]
        if unknown:
            raise UserError(f"kernel {row.name} takes no config key {', '.join(map(repr, unknown))} to run; choose from "
                            f"{', '.join(row.variant_keys)} (`mqa-logits dump --kernel` compiles any constexpr)")
        try:
            p.config = row.config(shape, target, override=parse_overrides(p.config, overrides))
        except ValueError as e:
            raise UserError(f"kernel {row.name} cannot be configured with {spec.partition(':')[2]}: {e}") from None
    _decided(p)
    p.notes.append("config overrides: " + ", ".join(f"{k}={v}" for k, v in overrides.items()))
    return p


def _configure(row: Row, shape: Shape, target: Target) -> KernelConfig:
    """The row's config; a forced row that cannot be configured for the shape is bad input, not a crash."""
    try:
        return row.config(shape, target)
    except ValueError as e:
        raise UserError(f"kernel {row.name} cannot be configured for this problem: {e}") from None
