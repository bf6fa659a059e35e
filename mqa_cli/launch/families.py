"""One entry for every launch family: the config's `launcher` names it. `pointer` (the plain-Triton prefill kernels)
builds its arguments in mqa_cli.launch.common; every other family F in mqa_cli/launch/F.py as `F_args` (paged; each
Gluon variant under its own name: gluon_ws_sm90, paged_ws_sm90), so a new family is one module and no edit here.

`launch_config` launches into a given (or fresh) output and returns what ran, so the API can record a fast relaunch
(mqa_cli.api.fastpath); `run` is the same returning only the output; `output_for` allocates the output a config
writes; `args_builder` gives `compile` (dump) the argument list of any family, so dump signs kernels exactly
as they run. A family's module is imported on first use: the Gluon ones need triton's Gluon, which not every
triton has.
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass

import torch

from ..errors import UserError
from ..problem.tensors import Prefill
from . import interpreter, common as launch

INTERPRETED = ("pointer", "paged")  # the families of Triton kernels, which the interpreter runs; Gluon's need a GPU


@dataclass
class Launched:
    """One launch: the output, the kernel and its arguments, and the compiled kernel that ran (None in the
    interpreter, or when it cannot be relaunched directly)."""

    out: torch.Tensor
    kernel: object  # the jitted kernel (its arg_names order the constexprs after the runtime arguments)
    compiled: object
    args: launch.LaunchArgs
    config: object = None  # the KernelConfig that ran (the plan's, as explain names it)


def output_for(t, cfg, max_seqlen_k: int = 0) -> torch.Tensor:
    """The [rows, cols] logits view this config writes: cols = N, max_seqlen_k (compressed) or max_context_len."""
    cols = int(max_seqlen_k) if cfg.constexprs.get("COMPRESSED") else t.N
    return launch.alloc_logits(t.S, cols, t.q.device, launch.out_dtype(cfg))


def args_builder(cfg):
    """(t, cfg, out, extra) -> LaunchArgs for the config's family; extra is max_seqlen_k or schedule_meta."""
    if cfg.launcher == "pointer":
        return launch.pointer_args
    builder = _family_args(cfg.launcher)
    if builder is None:
        raise UserError(f"config {cfg.name} names an unknown launch family {cfg.launcher!r}")
    return builder


@functools.lru_cache(maxsize=16)
def _family_args(family: str):
    """mqa_cli.launch.<family>.<family>_args, or None where no such module is (looked up once a family)."""
    name = f"{__package__}.{family}"
    try:
        return getattr(importlib.import_module(name), f"{family}_args")
    except ModuleNotFoundError as e:
        if e.name != name:
            raise
        return None


def launch_config(t, cfg, out=None, *, max_seqlen_k: int = 0, schedule_meta=None) -> Launched:
    """Launch the planned kernel `cfg` (final: mqa_cli.plan decided what runs) on tensors `t` into `out` (allocated
    when None); returns what ran. schedule_meta: the decode schedule a config with SELF_SCHEDULE=0 reads."""
    if out is None:
        out = output_for(t, cfg, max_seqlen_k)
    device = t.q.device
    if cfg.launcher not in INTERPRETED and device.type != "cuda":
        raise UserError(f"{cfg.kernel} needs CUDA tensors on a Hopper GPU (Gluon has no interpreter path)")
    extra = max_seqlen_k if isinstance(t, Prefill) else schedule_meta
    kernel = launch.kernel_for(cfg, device)
    a = args_builder(cfg)(t, cfg, out, extra)
    compiled = launch.run_kernel(kernel, cfg, a, interpreter.active())
    return Launched(out, kernel, compiled, a, cfg)


def run(t, cfg, out=None, *, max_seqlen_k: int = 0, schedule_meta=None) -> torch.Tensor:
    """Launch the planned kernel on tensors `t`; returns the logits view (allocated when None)."""
    return launch_config(t, cfg, out, max_seqlen_k=max_seqlen_k, schedule_meta=schedule_meta).out
