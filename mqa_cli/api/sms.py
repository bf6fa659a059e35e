"""How many SMs a call may use: DeepGEMM's set_num_sms / get_num_sms.

Engines lower it around a call to leave SMs to something running beside it (SGLang around the prefill under
pipeline parallelism, vLLM in micro-batching). Here it is the program count of every persistent kernel (the
Gluon prefill, both decode kernels, the top-k selection) and the ranges of the decode split computed when no
schedule_meta is given; the plain-Triton prefill kernels, which launch one program per tile, size their kv
splits by it. The setting is process-wide, as DeepGEMM's is, and is part of every plan and fast-path key, so a
change takes effect on the next call.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import UserError

_SETTING: int | None = None  # set_num_sms's value; None (or 0 given): the device's SM count
_DEVICE_SMS: dict = {}  # CUDA device index -> its SM count (a property read costs µs)
_LIMITED: dict = {}  # (target, n) -> the target with units = n; starts over past MAX_LIMITED keys
MAX_LIMITED = 256


def device_sms() -> int:
    """SMs (CUs) of the current GPU; 1 without one (the Triton interpreter)."""
    import torch

    if not torch.cuda.is_available():
        return 1
    index = torch.cuda.current_device()
    n = _DEVICE_SMS.get(index)
    if n is None:
        n = _DEVICE_SMS[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return n


def set_num_sms(num_sms: int) -> None:
    """Let later calls use `num_sms` SMs (DeepGEMM's meaning); 0 goes back to the device's count.

    On a GPU, 0 <= num_sms <= its SM count (DeepGEMM asserts the same). Without a GPU (the Triton interpreter)
    any count >= 0 is taken, so the grids that follow it can be checked on a CPU."""
    global _SETTING
    if isinstance(num_sms, bool) or not isinstance(num_sms, int):
        raise UserError(f"num_sms must be an int, got {type(num_sms).__name__}")
    import torch

    if num_sms < 0 or (torch.cuda.is_available() and num_sms > device_sms()):
        bound = f"[0, {device_sms()}] (this GPU's SMs)" if torch.cuda.is_available() else ">= 0"
        raise UserError(f"num_sms must be in {bound}, got {num_sms}")
    _SETTING = num_sms or None


def get_num_sms() -> int:
    """The SMs a call may use: set_num_sms's value, else the current GPU's SM count (1 without a GPU)."""
    return _SETTING if _SETTING is not None else device_sms()


def setting() -> int | None:
    """The value plans and fast-path keys carry: set_num_sms's count, or None for the device's own."""
    return _SETTING


def limited(target, n: int | None):
    """`target` with units = n (the program count its configs take), or `target` itself when n is None."""
    if n is None:
        return target
    hit = _LIMITED.get((target, n))
    if hit is None:
        if len(_LIMITED) >= MAX_LIMITED:
            _LIMITED.clear()
        hit = _LIMITED[(target, n)] = replace(target, units=n)
    return hit
