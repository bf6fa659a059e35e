"""The library API: DeepGEMM-compatible entry points that dispatch through the same table as the CLI."""
from __future__ import annotations

from functools import lru_cache

import torch

from . import dispatch, launch, targets
from .tensors import Prefill, validate


def shape_of(t: Prefill, clean_logits: bool) -> dispatch.Shape:
    return dispatch.Shape("prefill", t.S, t.N, t.heads, t.dim, clean_logits, t.fp8)


def target_for(device: torch.device) -> targets.Target:
    return targets.TARGETS["cpu"] if device.type == "cpu" else targets.detect()


@lru_cache(maxsize=256)
def _cached_plan(shape: dispatch.Shape, target_name: str, kernel: str | None):
    # The plan (and so the config) is chosen once per shape and target, never tuned per call.
    target = targets.TARGETS["cpu"] if target_name == "cpu" else targets.detect()
    return dispatch.plan(shape, target, kernel=kernel)


def fp8_mqa_logits(q, kv, kv_scales=None, weights=None, ks=None, ke=None, clean_logits: bool = True,
                   kernel: str | None = None) -> torch.Tensor:
    """logits[i, j] = sum_h weights[i, h] * relu(q[i, h] . kv[j]) * kv_scales[j] for ks[i] <= j < ke[i].

    `kv` may be a (kv, kv_scales) pair, DeepGEMM's form: fp8_mqa_logits(q, (kv, sf), weights, ks, ke).
    Returns an [S, N] fp32 view of a row-padded buffer; dead entries are -inf when clean_logits.
    """
    if isinstance(kv, (tuple, list)):
        if ke is not None:
            raise TypeError("with kv=(kv, kv_scales) pass weights, ks, ke as the next three arguments")
        kv, kv_scales, weights, ks, ke = kv[0], kv[1], kv_scales, weights, ks
    t = Prefill(q, kv, kv_scales, weights, ks, ke)
    validate(t)
    p = _cached_plan(shape_of(t, clean_logits), target_for(q.device).name, kernel)
    return launch.launch(t, p.config)
