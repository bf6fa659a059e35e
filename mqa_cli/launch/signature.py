"""A launch's signature as triton's JIT builds it, and compiling one launch for a target.

From LaunchArgs (mqa_cli.launch.common: the one source of the argument order): pointers and 16-divisible ints get
tt.divisibility 16 (and, on AMD, the 2 GB pointer range that enables buffer ops), ints equal to 1 become
constexprs, as the JIT does. Used by the cross-target compile (mqa_cli.inspect.compile) and by launches that must see their
build before running it (mqa_cli.launch.barrier_offsets).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import UserError

# torch dtype name -> triton pointer type (what the JIT's specialisation produces).
POINTER_TYPES = {"float8_e4m3fn": "*fp8e4nv", "float8_e4m3fnuz": "*fp8e4b8", "float8_e5m2": "*fp8e5",
                 "float8_e5m2fnuz": "*fp8e5b16", "float32": "*fp32", "float16": "*fp16", "bfloat16": "*bf16",
                 "int32": "*i32", "int64": "*i64", "int8": "*i8", "uint8": "*u8", "bool": "*i1"}


def _specialize(backend_cls, param, value):
    """(type, attrs key or None, constexpr value or None) for one runtime argument, as the JIT decides."""
    import torch

    specialize = not param.do_not_specialize
    align = not param.do_not_specialize_on_alignment
    if isinstance(value, torch.Tensor):
        ty = POINTER_TYPES.get(str(value.dtype).removeprefix("torch."))
        if ty is None:
            raise UserError(f"argument {param.name}: no triton pointer type for {value.dtype}")
        key = backend_cls.get_tensor_specialization(value, align=align) if specialize else ""
        return ty, key, None
    if isinstance(value, bool):
        return "u1", None, None
    if isinstance(value, int):
        if specialize and value == 1:
            return "constexpr", None, 1  # the JIT specialises 1 into the code
        ty = "i32" if -2**31 <= value < 2**31 else ("u64" if value >= 2**63 else "i64")
        key = backend_cls.get_int_specialization(value, align=align) if specialize else ""
        return ty, key, None
    if isinstance(value, float):
        return "fp32", None, None
    # Anything else (TMA tensor descriptors of Gluon kernels, ...): the JIT's own specialisation.
    from triton._C.libtriton import native_specialize_impl

    ty, key = native_specialize_impl(backend_cls, value, param.is_const, specialize, align)
    return ty, key if isinstance(key, str) else None, None


@dataclass
class Signature:
    signature: dict  # param name -> triton type ("*fp8e4nv", "i32", "constexpr", ...)
    constexprs: dict  # param name -> value
    attrs: dict  # (index,) -> [[attr, value], ...]
    grid: tuple


def build_signature(fn, launch_args, backend) -> Signature:
    """ASTSource pieces for `fn` from LaunchArgs (positional runtime args in order, constexprs by name)."""
    params = fn.params
    runtime = [p for p in params if not p.is_constexpr]
    if len(runtime) != len(launch_args.args):
        raise UserError(f"{fn.__name__} takes {len(runtime)} runtime arguments, the launch builder gives "
                        f"{len(launch_args.args)}: mqa_cli/launch/common.py and the kernel disagree")
    values = dict(zip((p.name for p in runtime), launch_args.args))
    missing = [p.name for p in params if p.is_constexpr and p.name not in launch_args.constexprs]
    if missing:
        raise UserError(f"{fn.__name__}: no value for constexpr {', '.join(missing)}")
    backend_cls = type(backend)
    signature, constexprs, attrs = {}, {}, {}
    for i, p in enumerate(params):
        if p.is_constexpr:
            signature[p.name] = "constexpr"
            constexprs[p.name] = launch_args.constexprs[p.name]
            continue
        ty, key, const = _specialize(backend_cls, p, values[p.name])
        signature[p.name] = ty
        if ty == "constexpr":
            constexprs[p.name] = const
        elif key:
            parsed = backend.parse_attr(key)
            if parsed:
                attrs[(i, )] = parsed
    return Signature(signature, constexprs, attrs, tuple(launch_args.grid))


def compile_with_signature(fn, la, gpu):
    """triton.compile of `fn` with LaunchArgs `la` for GPUTarget `gpu`: (compiled kernel, its Signature)."""
    import triton
    from triton.compiler.compiler import make_backend

    sig = build_signature(fn, la, make_backend(gpu))
    source_cls = triton.compiler.ASTSource
    if fn.is_gluon():
        from triton.experimental.gluon._runtime import GluonASTSource as source_cls
    return triton.compile(source_cls(fn, sig.signature, sig.constexprs, sig.attrs), target=gpu,
                          options=dict(la.options)), sig


def compile_launch(fn, la, gpu):
    """The compiled kernel of one launch's arguments for `gpu` (triton's cache makes a repeat cheap)."""
    return compile_with_signature(fn, la, gpu)[0]


def specialization(fn, la, gpu, leave_out: tuple = ()) -> str:
    """What makes the JIT compile a distinct binary of `fn` for launch `la` on `gpu` (argument types, alignment and
    ==1 specialisations, constexprs except `leave_out`, options, target), as one hashable string."""
    from triton.compiler.compiler import make_backend

    sig = build_signature(fn, la, make_backend(gpu))
    constexprs = {k: v for k, v in sig.constexprs.items() if k not in leave_out}
    return repr((fn.__name__, sig.signature, sorted(sig.attrs.items()), sorted(constexprs.items(), key=repr),
                 sorted(la.options.items()), gpu.backend, str(gpu.arch)))
