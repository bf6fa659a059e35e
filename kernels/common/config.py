"""What one compiled kernel variant is, as data (no triton import: dispatch and `explain` stay cheap).

Every variant home (`mqa_kernels.<op>.<variant>`) holds `config.py` (its constexpr KEYS, written once, and a
function returning a KernelConfig with the grid already computed) and `kernel.py` (the jitted kernel,
whose `repr=` reads the same KEYS). The launcher reads `grid` and `schedule`; it recomputes neither.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

from .naming import kernel_name

# Shared constants (also used inside kernels as plain ints).
INT32_MAX = 2147483647  # "no row" sentinel for min-reductions over ks
NEG_INF_FILL = 512  # elements per vectorised -inf store of the dead-column fill


# The decode schedule's unit: get_paged_mqa_logits_metadata's entries count 64-token blocks in the engines' calls
# (DeepGEMM's decode kernels take block size 64 only), so a schedule given with another block size is not read.
SCHEDULE_BLOCK = 64


def reads_schedule(given: bool, block_size: int, ranges: int, programs: int) -> bool:
    """Whether a decode call reads the schedule_meta it was given (the rule the plan applies, which the API and the
    decode configs follow): one counted in SCHEDULE_BLOCK-token blocks, split into at least as many ranges as the call
    has programs. A schedule of fewer ranges would run on that many SMs and leave the rest idle (vLLM builds
    num_sms // 2 at next_n 4, for DeepGEMM's 2-SM clusters): the kernel then computes its own split over every SM."""
    return given and block_size == SCHEDULE_BLOCK and not (ranges and programs and ranges < programs)


def split_constexprs(read: bool, split_inside: bool = False) -> dict:
    """A decode kernel's split as its constexprs: computed by the program (SELF_SCHEDULE) unless the schedule is
    read; and where the kernel can compute it in each partition after warp_specialize (SPLIT_INSIDE), only when
    computed (a read schedule is read before warp_specialize)."""
    return {"SELF_SCHEDULE": not read, "SPLIT_INSIDE": bool(split_inside) and not read}


_JITTED: dict = {}  # loader -> jitted kernel

# Every compile states its fp fusion: the head sums are explicit FMA chains, but the rest of each epilogue (the scale,
# the masks' arithmetic) is written for fused multiply-adds, and triton 3.9 warns that its default (fusion on) turns
# off in 3.10.
FP_FUSION = True


@dataclass(frozen=True)
class KernelConfig:
    variant: str  # the home package under mqa_kernels.<op> (and the dispatch row family), e.g. "tiled"
    kernel: str  # the entry kernel's base name
    keys: tuple  # constexpr names that name the compiled kernel (the variant's KEYS)
    constexprs: dict = field(hash=False)
    options: dict = field(hash=False)  # num_warps, num_stages, target options
    grid: tuple = field(default=(1,), hash=False)  # launch grid, computed once from the shape
    schedule: dict = field(default_factory=dict, hash=False)  # runtime scalars the kernel takes, and facts for explain
    launcher: str = "pointer"  # launch family: "pointer" (plain Triton prefill), "paged", "schedule", "topk", or a
    # Gluon variant's own name ("gluon_ws_sm90", "paged_ws_sm90": mqa_cli/launch/<name>.py builds its arguments)
    load: Callable | None = field(default=None, hash=False, compare=False)  # returns the jitted kernel

    def __post_init__(self):
        if "enable_fp_fusion" not in self.options:
            object.__setattr__(self, "options", {**self.options, "enable_fp_fusion": FP_FUSION})

    @cached_property
    def name(self) -> str:
        """The config-aware symbol the kernel compiles to (computed once: the launch path keys on it)."""
        return kernel_name(self.kernel, self.keys, self.constexprs)

    @cached_property
    def options_key(self) -> tuple:
        """The launch options as a hashable key (computed once)."""
        return tuple(sorted(self.options.items()))

    @property
    def dump_name(self) -> str:
        """num_warps / num_stages are launch options, not constexprs: the dump folder carries them."""
        return f"{self.name}_w{self.options.get('num_warps', 4)}_s{self.options.get('num_stages', 1)}"

    def jitted(self):
        """The jitted entry kernel (imports triton on first call; remembered per loader after that)."""
        fn = _JITTED.get(self.load)
        if fn is None:
            if self.load is None:
                raise RuntimeError(f"config {self.name} names no kernel loader")
            fn = _JITTED[self.load] = self.load()
        return fn

    def as_dict(self) -> dict:
        return {"variant": self.variant, "kernel": self.kernel, "name": self.name, "constexprs": dict(self.constexprs),
                "options": dict(self.options), "grid": list(self.grid), "schedule": dict(self.schedule)}


def pow2_ceil(x: int) -> int:
    return 1 << max(0, (max(1, x) - 1).bit_length())


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def backend_options(backend: str, *, cuda: dict, hip: dict | None = None) -> dict:
    """Launch options per backend: the interpreter takes none that matter; AMD gets its own."""
    if backend == "cuda":
        return dict(cuda)
    if backend == "hip":
        return dict(hip or {"num_warps": 4, "num_stages": 2, "waves_per_eu": 2, "matrix_instr_nonkdim": 16})
    return {"num_warps": 4, "num_stages": 1}
