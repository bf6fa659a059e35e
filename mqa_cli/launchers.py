"""One entry for every launch family: the config's `launcher` names it (pointer, tma, paged).

`run` launches into a given output; `output_for` allocates the output a config writes; `args_builder`
gives `compile` (dump) the argument list of any family, so dump signs kernels exactly as they run.
The Gluon (tma) family is imported on first use: it needs triton's Gluon, which not every triton has.
"""
from __future__ import annotations

import torch

from . import interpreter, launch, launch_paged
from .errors import UserError


def output_for(t, cfg, max_seqlen_k: int = 0) -> torch.Tensor:
    """The [rows, cols] logits view this config writes: cols = N, max_seqlen_k (compressed) or max_context_len."""
    cols = int(max_seqlen_k) if cfg.constexprs.get("COMPRESSED") else t.N
    return launch.alloc_logits(t.S, cols, t.q.device, launch.out_dtype(cfg))


def args_builder(cfg):
    """(t, cfg, out, extra) -> LaunchArgs for the config's family; extra is max_seqlen_k or schedule_meta."""
    if cfg.launcher == "pointer":
        return launch.pointer_args
    if cfg.launcher == "paged":
        return launch_paged.paged_args
    if cfg.launcher == "tma":
        from . import launch_tma

        return launch_tma.tma_args
    raise UserError(f"config {cfg.name} names an unknown launch family {cfg.launcher!r}")


def run(t, cfg, out=None, *, max_seqlen_k: int = 0, schedule_meta=None) -> torch.Tensor:
    """Launch the planned kernel on tensors `t`; returns the logits view (allocated when out is None)."""
    if out is None:
        out = output_for(t, cfg, max_seqlen_k)
    if cfg.launcher == "paged":
        return launch_paged.launch_paged(t, cfg, out, schedule_meta)
    if cfg.launcher == "tma" and t.q.device.type != "cuda":
        raise UserError(f"{cfg.kernel} needs CUDA tensors on a Hopper GPU (Gluon has no interpreter path)")
    builder = args_builder(cfg)
    launch.run_kernel(launch.kernel_for(cfg, t.q.device), cfg, builder(t, cfg, out, max_seqlen_k),
                      interpreter.active())
    return out
