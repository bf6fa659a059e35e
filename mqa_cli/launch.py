"""One launch function per kernel family; the kernel object comes from the plan's config.

On a CPU tensor the kernel runs through the Triton interpreter (wrapped here, so no
environment variable has to be set before import).
"""
from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass

import torch

from .errors import UserError


def _setup_interpreter() -> bool:
    """With no GPU, turn on the Triton interpreter; it must be on before triton is first imported."""
    if "triton" not in sys.modules and not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    return os.environ.get("TRITON_INTERPRET") == "1"


INTERPRETING = _setup_interpreter()

_NOTED = False


def note_interpreter() -> None:
    global _NOTED
    if not _NOTED:
        print("note: no GPU: running the Triton interpreter on the CPU; its times say nothing about GPU speed",
              file=sys.stderr)
        _NOTED = True


def kernel_object(cfg, interpret: bool):
    """The jitted entry kernel named by the config, or its interpreted twin."""
    if interpret != INTERPRETING:
        if interpret:
            raise UserError("tensors are on the CPU but this process compiles for a GPU; move them to the GPU "
                            "(or set TRITON_INTERPRET=1 before starting Python)")
        raise UserError("tensors are on a GPU but this process runs the Triton interpreter (TRITON_INTERPRET=1)")
    return getattr(importlib.import_module(f"mqa_kernels.{cfg.module}"), cfg.kernel)


def padded_stride(N: int, align: int = 128) -> int:
    """Row stride of the logits buffer: rounded up so full kv tiles store without column masks."""
    return -(-N // align) * align


def alloc_logits(S: int, N: int, device, align: int = 128) -> torch.Tensor:
    """[S, N] view of an [S, padded] fp32 buffer."""
    return torch.empty(S, padded_stride(N, align), dtype=torch.float32, device=device)[:, :N]


def _check_layout(t) -> None:
    if t.q.stride(2) != 1 or t.q.stride(1) != t.dim:
        raise UserError("q must have contiguous heads and dims (q[s] is one [H, D] block); call .contiguous()")
    if t.kv.stride(1) != 1:
        raise UserError("kv must be contiguous along D; call .contiguous()")
    if t.weights.stride(1) != 1:
        raise UserError("weights must be contiguous along heads; call .contiguous()")


@dataclass
class LaunchArgs:
    """Everything one launch passes: shared by `launch` (runs it) and `compile` (signature for dump)."""

    grid: tuple
    args: list  # positional runtime arguments, in the kernel's order
    constexprs: dict
    options: dict  # num_warps, num_stages, target options


def tiled_args(t, cfg, out) -> LaunchArgs:
    """Arguments of mqa_logits_tiled for tensors `t` (Prefill) and an [S, N] view `out`."""
    c = cfg.constexprs
    n_tiles = -(-t.N // c["BLOCK_KV"])
    per_split = -(-n_tiles // cfg.schedule.get("kv_splits", 1))
    grid = (-(-t.S // c["BLOCK_Q"]), -(-n_tiles // per_split))
    args = [t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke, out,
            t.S, t.N, t.q.stride(0), t.kv.stride(0), t.weights.stride(0), out.stride(0), per_split]
    return LaunchArgs(grid, args, dict(c), dict(cfg.options))


def h64d128_args(t, cfg, out) -> LaunchArgs:
    """Arguments of mqa_logits_h64d128; the out row stride must cover whole kv tiles."""
    c = cfg.constexprs
    if out.stride(0) < -(-t.N // c["BLOCK_KV"]) * c["BLOCK_KV"]:
        raise UserError(f"logits row stride {out.stride(0)} must be padded to a multiple of {c['BLOCK_KV']}")
    grid = (-(-t.S // c["BLOCK_Q"]),)
    args = [t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke, out,
            t.S, t.N, t.q.stride(0), t.kv.stride(0), t.weights.stride(0), out.stride(0)]
    return LaunchArgs(grid, args, dict(c), dict(cfg.options))


# Compiled kernels by (config, launch options, device, argument specialization): a repeated launch
# skips the JIT's argument binding and cache lookup, which cost tens of µs of host time per call
# (it matters for decode, where kernels run for a few µs).
_COMPILED: dict = {}


def _specialization(args) -> tuple | None:
    """What the JIT specializes runtime arguments on: dtypes, 16-byte alignment, ints equal to 1,
    divisible by 16, or past 32 bits. None when an argument is of a kind it does not cover."""
    key = []
    for x in args:
        if isinstance(x, torch.Tensor):
            key.append((x.dtype, x.data_ptr() % 16 == 0))
        elif isinstance(x, bool):
            key.append(("bool", x))
        elif isinstance(x, int):
            key.append(("int", x == 1, x % 16 == 0, -(2 ** 31) <= x < 2 ** 31))
        else:
            return None
    return tuple(key)


def run_kernel(kernel, cfg, a: LaunchArgs, interpret: bool) -> None:
    """Launch `kernel` with LaunchArgs; after the first launch of a specialization, through its compiled object."""
    if interpret:
        kernel[a.grid](*a.args, **a.constexprs)
        return
    spec = _specialization(a.args)
    key = None if spec is None else (cfg.name, tuple(sorted(a.options.items())), a.args[0].device, spec)
    hit = _COMPILED.get(key) if key is not None else None
    if hit is None:
        compiled = kernel[a.grid](*a.args, **a.constexprs, **a.options)
        if key is not None and compiled is not None:
            names = kernel.arg_names[len(a.args):]
            if set(names) == set(a.constexprs):
                _COMPILED[key] = (compiled, tuple(a.constexprs[n] for n in names))
        return
    compiled, constexpr_values = hit
    compiled[tuple(a.grid) + (1,) * (3 - len(a.grid))](*a.args, *constexpr_values)  # the runner reads 3 dims


def _launch_with(args_fn):
    def launch_family(t, cfg, out: torch.Tensor | None = None) -> torch.Tensor:
        _check_layout(t)
        interpret = t.q.device.type == "cpu"
        if interpret:
            note_interpreter()
        out = alloc_logits(t.S, t.N, t.q.device) if out is None else out
        run_kernel(kernel_object(cfg, interpret), cfg, args_fn(t, cfg, out), interpret)
        return out

    launch_family.__doc__ = f"Launch the kernel whose arguments {args_fn.__name__} builds."
    return launch_family


# Per kernel module: how to build its arguments, and how to launch it.
ARGS = {"prefill_tiled": tiled_args, "prefill_h64d128": h64d128_args}
LAUNCHERS = {module: _launch_with(fn) for module, fn in ARGS.items()}

# Families whose launch code lives in its own module (it imports this one, or gluon): loaded on
# first use, as (module, argument builder or None, launcher).
LAZY = {
    "paged_decode": ("mqa_cli.launch_paged", "paged_args", "launch_paged"),
    "prefill_gluon_sm90": ("mqa_cli.launch_gluon", "gluon_sm90_args", "launch_gluon_sm90"),
    "prefill_gluon_ws_sm90": ("mqa_cli.launch_gluon_ws", "gluon_ws_args", "launch_gluon_ws_sm90"),
}


def _load(module: str) -> None:
    if module in LAUNCHERS or module not in LAZY:
        return
    where, args_name, launch_name = LAZY[module]
    mod = importlib.import_module(where)
    if args_name is not None:
        ARGS[module] = getattr(mod, args_name)
    LAUNCHERS[module] = getattr(mod, launch_name)


def args_builder(module: str):
    """The LaunchArgs builder of a kernel module (None if it has none): what `compile` signs from."""
    _load(module)
    return ARGS.get(module)


def launch(t, cfg, out=None):
    _load(cfg.module)
    return LAUNCHERS[cfg.module](t, cfg, out)
