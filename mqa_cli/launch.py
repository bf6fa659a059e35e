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


def _launch_with(args_fn):
    def launch_family(t, cfg, out: torch.Tensor | None = None) -> torch.Tensor:
        _check_layout(t)
        interpret = t.q.device.type == "cpu"
        if interpret:
            note_interpreter()
        out = alloc_logits(t.S, t.N, t.q.device) if out is None else out
        a = args_fn(t, cfg, out)
        kernel_object(cfg, interpret)[a.grid](*a.args, **a.constexprs, **({} if interpret else a.options))
        return out

    launch_family.__doc__ = f"Launch the kernel whose arguments {args_fn.__name__} builds."
    return launch_family


# Per kernel module: how to build its arguments, and how to launch it.
ARGS = {"prefill_tiled": tiled_args, "prefill_h64d128": h64d128_args}
LAUNCHERS = {module: _launch_with(fn) for module, fn in ARGS.items()}

# The paged decode kernel's launcher lives in launch_paged.py (it imports the helpers above).
from .launch_paged import launch_paged, paged_args  # noqa: E402

ARGS["paged_decode"] = paged_args
LAUNCHERS["paged_decode"] = launch_paged


# Gluon launchers import gluon (and build TMA descriptors): loaded on first use only.
LAZY_LAUNCHERS = {
    "prefill_gluon_sm90": ("mqa_cli.launch_gluon", "launch_gluon_sm90"),
    "prefill_gluon_ws_sm90": ("mqa_cli.launch_gluon_ws", "launch_gluon_ws_sm90"),
}


def launch(t, cfg, out=None):
    if cfg.module not in LAUNCHERS and cfg.module in LAZY_LAUNCHERS:
        module, name = LAZY_LAUNCHERS[cfg.module]
        LAUNCHERS[cfg.module] = getattr(importlib.import_module(module), name)
    return LAUNCHERS[cfg.module](t, cfg, out)
