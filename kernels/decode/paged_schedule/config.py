"""Config of the paged schedule kernel (no triton or torch import: dispatch and `explain` stay cheap).

One program (a decode step pays one small launch): CHUNK sequences per step of its loops over the batch,
PBLOCK schedule entries per step of its loop over the entries. CHUNK follows the batch (a power of two,
so a small batch computes no dead lanes), which bounds the compiled variants to a handful.
"""
from __future__ import annotations

from ...common.config import KernelConfig, backend_options, cdiv, pow2_ceil
from . import KEYS


MAX_CHUNK = 1024
MIN_CHUNK = 128  # one element per thread at 4 warps
PBLOCK = 256  # entries per step of the last pass (H200: 133 entries, one step)


def _load():
    from .kernel import paged_schedule

    return paged_schedule


def paged_schedule_config(*, batch: int, programs: int, backend: str) -> KernelConfig:
    """Config for `programs` ranges over `batch` sequences."""
    chunk = min(MAX_CHUNK, max(MIN_CHUNK, pow2_ceil(batch)))
    if backend == "interpreter":
        chunk = min(chunk, 256)  # several steps per loop on moderate test batches
    pblock = PBLOCK if backend != "interpreter" else 64
    options = backend_options(backend, cuda={"num_warps": 4, "num_stages": 1},
                              hip={"num_warps": 4, "num_stages": 1})
    schedule = {"programs": programs, "batch": batch, "batch_steps": cdiv(max(batch, 1), chunk),
                "entry_steps": cdiv(programs + 1, pblock)}
    return KernelConfig("paged_schedule", "paged_schedule", KEYS, {"CHUNK": chunk, "PBLOCK": pblock}, options,
                        (1,), schedule, launcher="schedule", load=_load)
