"""What a dispatched row runs as, decided once after dispatch: whether a decode call reads the schedule it was given,
whether the paged cache can be read by TMA, and whether a build needs its ring barriers' offsets read from a first
compile. Each decision is a pure function of the Shape (sizes, flags and the cache's layout: no tensor data), is
cached with the plan, and is shown by `explain` as a sentence. The launch layer follows the config it is handed; it
never chooses another. No torch, no triton.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from mqa_kernels.common.config import SCHEDULE_BLOCK, KernelConfig, reads_schedule, split_constexprs

from ..problem.shape import Shape

TMA_ALIGN = 16  # bytes: TMA bases and row strides
FIRST_BUILD = "first build"  # config.schedule["slot_offsets"]: FULL_AT / EMPTY_AT read from a first compile


def cache_block_stride(shape: Shape) -> int:
    """Bytes from one cache block to the next: the call's kv_cache.stride(0), or the dense block_size * (D + 4)."""
    return shape.cache_block_stride or shape.block_size * (shape.dim + 4)


def cache_describable(shape: Shape) -> bool:
    """Whether TMA can read the cache blocks in place: fp8 rows at stride D inside 16-byte aligned blocks."""
    stride = cache_block_stride(shape)
    return stride % TMA_ALIGN == 0 and stride % shape.dim == 0 and shape.cache_aligned


def cache_sentence(shape: Shape) -> str:
    return (f"block stride {cache_block_stride(shape)} bytes"
            + ("" if shape.cache_aligned else ", base not 16-byte aligned")
            + (", aiter's pre-shuffled rows" if shape.cache_layout == "shuffled" else ""))


@dataclass(frozen=True)
class Decision:
    """One decision of the plan: what it is about, and what was decided, as explain prints it."""

    about: str
    decided: str


def decide(shape: Shape, cfg: KernelConfig) -> tuple[KernelConfig, list]:
    """The config that runs for this shape (the dispatched row's config with the decisions applied) and the
    decisions made, in the order explain prints them."""
    decisions = []
    if shape.kind == "paged":
        cfg, d = _schedule(shape, cfg)
        decisions.append(d)
        decisions.append(_cache(shape, cfg))
    cfg, d = slot_offsets(cfg)
    if d is not None:
        decisions.append(d)
    return cfg, decisions


def with_schedule(cfg: KernelConfig, self_schedule: bool) -> KernelConfig:
    """The decode config that computes its split in the kernel (self_schedule) or reads schedule_meta, as
    split_constexprs states it (SPLIT_INSIDE where the config has it)."""
    c = cfg.constexprs
    want = {k: v for k, v in split_constexprs(not self_schedule, c.get("SPLIT_INSIDE", False)).items() if k in c}
    if all(c.get(k) == v for k, v in want.items()):
        return cfg
    return replace(cfg, constexprs={**c, **want})


def _schedule(shape: Shape, cfg: KernelConfig) -> tuple[KernelConfig, Decision]:
    ranges, programs = shape.schedule_ranges, int(cfg.schedule.get("programs") or 0)
    read = reads_schedule(shape.schedule_given, shape.block_size, ranges, programs)
    if read:
        why = "given: schedule_meta is read (SELF_SCHEDULE=0)"
    elif shape.schedule_given and shape.block_size == SCHEDULE_BLOCK:
        why = (f"given in {ranges} ranges, fewer than the {programs} programs of this call: not read (it would leave "
               f"{programs - ranges} SMs idle); each program computes its split over all {programs} (SELF_SCHEDULE=1)")
    elif shape.schedule_given:
        why = (f"given at block size {shape.block_size}: not read (a schedule counts {SCHEDULE_BLOCK}-token blocks); "
               "each program computes its split (SELF_SCHEDULE=1)")
    else:
        why = "none given: each program computes its split (SELF_SCHEDULE=1)"
    if "SELF_SCHEDULE" not in cfg.constexprs:
        return cfg, Decision("schedule_meta", why)
    return with_schedule(cfg, not read), Decision("schedule_meta", why)


def _cache(shape: Shape, cfg: KernelConfig) -> Decision:
    ok = cache_describable(shape)
    what = cache_sentence(shape)
    if shape.cache_layout == "shuffled":
        return Decision("cache", f"{what}: read in place by the pointer kernel's KV_SHUFFLED build (the TMA row reads "
                                 "plain rows only)")
    if ok:
        return Decision("cache", f"{what}: read by TMA where the row uses it")
    return Decision("cache", f"{what}: TMA cannot describe it (16-byte multiple and a multiple of D {shape.dim} "
                             "needed), so the TMA row is ruled out and a pointer kernel runs")


def slot_offsets(cfg: KernelConfig) -> tuple[KernelConfig, Decision | None]:
    """A PTX_SLOTS build waits on its ring's barriers at offsets triton's allocator picks: they are read from a
    first compile of the same specialisation on the device (mqa_cli.launch.barrier_offsets) unless given."""
    c = cfg.constexprs
    if not c.get("PTX_SLOTS") or min(c.get("FULL_AT", 0), c.get("EMPTY_AT", 0)) >= 0:
        return cfg, None
    cfg = replace(cfg, schedule={**cfg.schedule, "slot_offsets": FIRST_BUILD})
    return cfg, Decision("slot offsets", "FULL_AT / EMPTY_AT read from a first build on the device, then checked in "
                                         "the build that uses them (one extra compile per specialisation)")
