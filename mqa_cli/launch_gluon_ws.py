"""Launcher of the warp-specialised Gluon Hopper (sm90) prefill kernel (descriptors: launch_gluon.py)."""
from __future__ import annotations

import torch

from .launch import LaunchArgs
from .launch_gluon import gluon_inputs, gluon_launcher


def gluon_ws_args(t, cfg, out) -> LaunchArgs:
    """mqa_logits_gluon_ws_sm90: a persistent grid (at most one program per SM) over work items of
    2*BLOCK_Q query rows; the item count is the kernel's last runtime argument."""
    items = -(-t.S // (2 * cfg.constexprs["BLOCK_Q"]))
    units = cfg.schedule.get("units") or torch.cuda.get_device_properties(t.q.device).multi_processor_count
    grid = (max(1, min(items, units)),)
    return LaunchArgs(grid, gluon_inputs(t, cfg, out) + [items], dict(cfg.constexprs), dict(cfg.options))


launch_gluon_ws_sm90 = gluon_launcher(gluon_ws_args)
