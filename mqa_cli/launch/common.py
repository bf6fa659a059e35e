"""Launching a planned kernel: the output buffer, the argument list of the plain-Triton prefill family,
and a launch path that skips the JIT's per-call argument binding after the first launch.

Each family's argument builder also returns a `rebuild`: the same argument list for a later call whose
signature (mqa_cli.api.fastpath) matches, taking only that call's tensors. The API's fast path uses it.

The grid and runtime schedule come from the config (mqa_kernels.<op>.<variant>.config); nothing here
recomputes them. Nothing here reads tensor data or syncs, so every launch can be captured in a CUDA graph.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..errors import UserError
from . import interpreter
from ..problem.prefill import ROW_ALIGN, ROW_BYTES, padded_stride  # noqa: F401 (re-exported: the buffer's row padding)

@dataclass
class LaunchArgs:
    """Everything one launch passes: shared by `launch` (runs it) and `compile` (signature for dump)."""

    grid: tuple
    args: list  # positional runtime arguments, in the kernel's order
    constexprs: dict
    options: dict  # num_warps, num_stages, target options
    # (inputs, out) -> the same runtime arguments for a later call with the same signature. inputs: that call's
    # tensors in the bundle's field order (Prefill: q, kv, kv_scales, weights, ks, ke; Paged: q, kv_cache,
    # weights, context_lens, block_table, schedule_meta), each the bundle's tensor or a view at the same address
    # (the compiled launcher reads pointers only). None: this launch cannot be replayed that way.
    rebuild: Callable | None = None


TMA_ALIGN = 16  # bytes: TMA descriptors need 16-byte aligned bases and row strides


def desc_fields(desc) -> tuple:
    """A TMA descriptor's class and fields without its base tensor (a recorded rebuild must not keep a call's
    tensors)."""
    return type(desc), {k: v for k, v in vars(desc).items() if k != "base"}


def rebased(fields: tuple, base: torch.Tensor):
    """The descriptor of `fields` over `base`, a tensor of the same shape, strides, dtype and alignment as the one
    it was built on (a matching call signature guarantees it), without rerunning the constructor's checks
    (several µs of host time)."""
    cls, values = fields
    d = object.__new__(cls)
    d.__dict__.update(values)
    d.base = base
    return d


def row_align(dtype) -> int:
    """Elements of `dtype` in ROW_BYTES: the output row stride is a multiple of it."""
    return ROW_BYTES // dtype.itemsize


def alloc_logits(S: int, cols: int, device, dtype=torch.float32, align: int | None = None) -> torch.Tensor:
    """[S, cols] view of an [S, padded] buffer (rows padded to ROW_BYTES unless `align` elements are given)."""
    return torch.empty(S, padded_stride(cols, align or row_align(dtype)), dtype=dtype, device=device)[:, :cols]


def out_dtype(cfg) -> torch.dtype:
    """The logits dtype a config writes (a constexpr of the prefill kernels; the paged kernel's store casts)."""
    return torch.bfloat16 if cfg.constexprs.get("BF16") or cfg.schedule.get("bf16") else torch.float32


def pointer_args(t, cfg, out, max_seqlen_k: int = 0) -> LaunchArgs:
    """Arguments of the plain-Triton prefill kernels (tiled, h64d128): pointers, sizes, every stride,
    then the config's own runtime scalars (schedule["args"], in order)."""
    c = cfg.constexprs
    if not c.get("COMPRESSED") and out.stride(0) < -(-t.N // c["BLOCK_KV"]) * c["BLOCK_KV"]:
        raise UserError(f"logits row stride {out.stride(0)} must cover whole kv tiles of {c['BLOCK_KV']}")
    args = [t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke, out, t.S, t.N, int(max_seqlen_k),
            t.q.stride(0), t.q.stride(1), t.kv.stride(0), t.kv_scales.stride(0), t.weights.stride(0),
            t.weights.stride(1), t.ks.stride(0), t.ke.stride(0), out.stride(0),
            *cfg.schedule.get("args", {}).values()]
    tail = tuple(args[7:])  # sizes, strides and schedule scalars: fixed by the signature

    def rebuild(ins, out):
        q, kv, kv_scales, weights, ks, ke = ins
        return (q, kv, kv_scales, weights, ks, ke, out, *tail)

    return LaunchArgs(tuple(cfg.grid), args, dict(c), dict(cfg.options), rebuild)


def kernel_for(cfg, device: torch.device):
    """The jitted kernel of the config, after checking the process can run it on `device`."""
    if (device.type == "cpu") != interpreter.active():
        if device.type == "cpu":
            raise UserError("tensors are on the CPU but the Triton interpreter is off; move them to a GPU, or set "
                            "TRITON_INTERPRET=1 (or call mqa_cli.launch.interpreter.enable_if_no_gpu()) before the first launch")
        raise UserError("tensors are on a GPU but this process runs the Triton interpreter (TRITON_INTERPRET=1)")
    return cfg.jitted()


# Compiled kernels by (config, launch options, device, argument specialization): a repeated launch
# skips the JIT's argument binding and cache lookup, which cost tens of µs of host time per call
# (it matters for decode, where kernels run for a few µs).
# Past MAX_COMPILED keys (a process that sweeps configs) the table starts over; a key missing again only costs one
# launch through the JIT, whose own cache still holds the binary.
_COMPILED: dict = {}
MAX_COMPILED = 1024
_UNCACHEABLE = object()


def _specialization(args) -> tuple | None:
    """What the JIT specializes runtime arguments on: dtypes, 16-byte alignment, ints equal to 1,
    divisible by 16, or past 32 bits. None when an argument is of a kind it does not cover."""
    key = []
    for x in args:
        if type(x) is torch.Tensor or isinstance(x, torch.Tensor):
            key.append((x.dtype, x.data_ptr() % 16 == 0))
        elif type(x) is int or (isinstance(x, int) and not isinstance(x, bool)):
            key.append(("int", x == 1, x % 16 == 0, -(2 ** 31) <= x < 2 ** 31))
        elif isinstance(x, bool):
            key.append(("bool", x))
        elif hasattr(x, "block_shape") and isinstance(getattr(x, "base", None), torch.Tensor):
            # a TMA tensor descriptor: the JIT specializes on its dtype, block shape and shared layout
            key.append(("desc", x.base.dtype, tuple(x.block_shape), repr(getattr(x, "layout", None)),
                        x.base.data_ptr() % 16 == 0))
        else:
            return None
    return tuple(key)


def jit_launch(kernel, cfg, a: LaunchArgs):
    """One launch through the JIT, which compiles on a miss. Returns the compiled kernel."""
    return kernel[a.grid](*a.args, **a.constexprs, **a.options)


def run_kernel(kernel, cfg, a: LaunchArgs, interpret: bool):
    """Launch `kernel` with LaunchArgs; after the first launch of a specialization, through its compiled object.
    Returns the compiled kernel that ran, for a direct relaunch (mqa_cli.api.fastpath); None in the interpreter or
    when the compiled runner does not take these arguments directly."""
    if interpret:
        with interpreter.LAUNCH_LOCK:  # (the interpreter's swap of triton.language is process-wide)
            interpreter.patch_language_once_per_launch()
            kernel[a.grid](*a.args, **a.constexprs)
        return None
    spec = _specialization(a.args)
    device = next((x.device for x in a.args if isinstance(x, torch.Tensor)), None)  # args[0] may be a descriptor
    options = cfg.options_key if a.options == cfg.options else tuple(sorted(a.options.items()))
    key = None if spec is None else (cfg.name, options, device, spec)
    hit = _COMPILED.get(key) if key is not None else None
    if hit is None:
        compiled = jit_launch(kernel, cfg, a)
        if key is not None and compiled is not None:
            names = kernel.arg_names[len(a.args):]
            if set(names) == set(a.constexprs):
                if len(_COMPILED) >= MAX_COMPILED:
                    _COMPILED.clear()
                _COMPILED[key] = (compiled, tuple(a.constexprs[n] for n in names))
        return compiled
    compiled, constexpr_values = hit
    if hit[1] is _UNCACHEABLE:
        jit_launch(kernel, cfg, a)
        return None
    try:
        compiled[tuple(a.grid) + (1,) * (3 - len(a.grid))](*a.args, *constexpr_values)  # the runner reads 3 dims
    except (TypeError, AttributeError, ValueError):
        # an argument kind the compiled runner does not take directly: the JIT path for this key from now on
        _COMPILED[key] = (compiled, _UNCACHEABLE)
        jit_launch(kernel, cfg, a)
        return None
    return compiled

