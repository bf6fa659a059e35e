"""The API's fast path: a repeated eager call goes straight to the compiled kernel's launcher.

Why: decode kernels run for a few µs, and the full path (checks, plan lookup, argument list, Triton's JIT
binding and runner) costs tens of µs of host time per call. Everything that path decides is a pure function
of tensor metadata (shapes, strides, dtypes, devices, address mod 16) and the scalar options: the checks that
run without the value checks, the plan, the grid, every integer argument, Triton's specialisation. So the
first call of a signature runs the full path and records what it launched; a later call with the same
signature allocates its output, rebuilds the argument tuple from its own tensors (the family's `rebuild`,
checked against the full argument list when recorded) and calls the compiled kernel's launcher directly
(mqa_cli.launch.direct: past triton's Python wrapper too, in the forms triton 3.6 and 3.8-3.9 build it).

CUDA tensors only (the interpreter path never comes here); with a Triton launch hook set, every call takes
the full path so the hook sees it. Value checks (they read data) stay with the caller, on every call asked.

Threads take no lock here: this table and its siblings (the plans, the top-k launches, the compiled runners, the
cache's layout ids and descriptors) are read and written by single dict operations, and an entry is a pure function
of its key, so threads that race record equal entries, and a table emptied meanwhile costs one full-path call
(tests/gpu/test_concurrency.py). Each launch goes to the calling thread's current stream.
"""
from __future__ import annotations

import torch

from ..launch import direct as direct_launch

MAX_ENTRIES = 4096  # signatures kept; past that the cache starts over (an engine uses a handful)

_ENTRIES: dict = {}  # signature -> Entry, or _NORMAL for a signature whose launch cannot be replayed directly
_NORMAL = object()
_cuda = None  # _Cuda: the runtime hooks, resolved on the first CUDA call (importing this module imports no triton)
_Tensor = torch.Tensor
_empty = torch.empty


class _Cuda:
    """What a direct launch needs from torch and triton, looked up once."""

    def __init__(self):
        from triton import knobs
        from triton.knobs import HookChain

        self.device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self.stream = raw or (lambda index: torch.cuda.current_stream(index).cuda_stream)
        self.runtime = knobs.runtime
        self.chain = HookChain

    def hooked(self) -> bool:
        """True when a launch enter or exit hook is set (a profiler): then the full path runs, which calls it."""
        rt = self.runtime
        for h in (rt.launch_enter_hook, rt.launch_exit_hook):
            if h is not None and (type(h) is not self.chain or h.calls):
                return True
        return False


def _runtime() -> _Cuda:
    global _cuda
    if _cuda is None:
        _cuda = _Cuda()
    return _cuda


def key(ins: tuple, options: tuple) -> tuple | None:
    """The signature of a call: the options, then per tensor its shape, strides, dtype, device and address mod
    16 (Triton specialises on 16-byte alignment; the checks look at 4-byte alignment); None entries stay None.
    None when an entry is neither a plain tensor nor None. Reads no tensor data and never syncs."""
    k = [options]
    for x in ins:
        if type(x) is _Tensor:
            k += (x.shape, x.stride(), x.dtype, x.device, x.data_ptr() & 15)
        elif x is None:
            k.append(None)
        else:
            return None
    return tuple(k)


def signature(ins: tuple, options: tuple) -> tuple | None:
    """key() with the current CUDA device added to the options, for a call whose q is a CUDA tensor; None for any
    other call (CPU, tensor subclasses, non-tensors), which then always takes the full path."""
    q = ins[0]
    if type(q) is not _Tensor or not q.is_cuda:
        return None
    return key(ins, (options, (_cuda or _runtime()).device()))  # record() reads the device index back here


def get(sig: tuple | None) -> "Entry | None":
    """The recorded fast launch of this signature, or None (not recorded, not replayable, or a hook is set)."""
    entry = _ENTRIES.get(sig)
    if entry is None or entry is _NORMAL or _cuda.hooked():
        return None
    return entry


class Entry:
    """A recorded launch: the compiled kernel's relaunch and what it takes besides the call's tensors."""

    __slots__ = ("relaunch", "rebuild", "rows", "padded", "cols", "view", "view_strides", "dtype", "device",
                 "sliced")

    def launch(self, ins: tuple) -> torch.Tensor:
        """Allocate the output (the row-padded buffer the full path allocates) and launch on the current stream."""
        out = _empty(self.rows, self.padded, dtype=self.dtype, device=self.device)
        if self.sliced:
            out = out.as_strided(self.view, self.view_strides)  # == out[:, :cols]: 6.1 µs, not 9.9 (this project's 2-CPU
            # box, 2026-12-05)
        self.relaunch(self.rebuild(ins, out))
        return out

    def stream(self) -> int:
        """The raw handle of the stream a launch goes to now: the current stream of the recorded device."""
        return _cuda.stream(self.relaunch.index)


def record(sig: tuple | None, launched, ins: tuple) -> None:
    """Remember how to relaunch `launched` (a launchers.Launched that just ran) for later calls of `sig`."""
    if sig is None or sig in _ENTRIES:
        return
    if len(_ENTRIES) >= MAX_ENTRIES:
        _ENTRIES.clear()
    _runtime()
    _ENTRIES[sig] = _entry(launched, ins, device_index=sig[0][1]) or _NORMAL


def _entry(launched, ins: tuple, device_index: int) -> Entry | None:
    """The Entry, or None when this launch cannot be replayed through the compiled launcher."""
    a, out = launched.args, launched.out
    r = relaunch(launched.compiled, launched.kernel, a, device_index) if a.rebuild is not None else None
    if r is None:
        return None
    rows, cols = out.shape if out.dim() == 2 else (0, 0)
    padded = out.stride(0) if out.dim() == 2 else 0
    if (out.dim() != 2 or out.stride(1) != 1 or out.storage_offset() or padded < cols
            or out.untyped_storage().nbytes() != rows * padded * out.element_size()):
        return None  # not the row-padded buffer Entry.launch allocates
    if not _same_args(a.rebuild(ins, out), a.args):
        return None
    e = Entry()
    e.relaunch, e.rebuild = r, a.rebuild
    e.rows, e.padded, e.cols, e.dtype, e.device = rows, padded, cols, out.dtype, out.device
    e.view, e.view_strides, e.sliced = (rows, cols), (padded, 1), cols != padded
    return e


def _same_args(rebuilt, args) -> bool:
    """The rebuilt arguments are the ones the full path launched with: tensors at the same address,
    descriptors with the same fields, everything else equal and of the same type."""
    return len(rebuilt) == len(args) and all(_same(x, y) for x, y in zip(rebuilt, args))


def _same(x, y) -> bool:
    if isinstance(x, _Tensor) or isinstance(y, _Tensor):
        return isinstance(x, _Tensor) and isinstance(y, _Tensor) and x.data_ptr() == y.data_ptr()
    if type(x) is not type(y):
        return False
    if "base" in getattr(x, "__dict__", {}):  # a TMA tensor descriptor: compare field by field
        fx, fy = vars(x), vars(y)
        return fx.keys() == fy.keys() and all(_same(fx[k], fy[k]) for k in fx)
    return bool(x == y)


class Relaunch:
    """A compiled kernel's launcher with its grid and trailing constexprs: for a caller that rebuilds the runtime
    argument list itself (the top-k selection), relaunching on the current stream of the recorded device."""

    __slots__ = ("run", "function", "packed", "grid", "tail", "index", "direct")

    def __call__(self, args: tuple) -> None:
        """Launch with the runtime arguments `args` (the trailing constexprs appended here)."""
        gx, gy, gz = self.grid
        if self.direct is not None:
            self.direct(gx, gy, gz, _cuda.stream(self.index), self.function, self.packed, args + self.tail)
        else:
            self.run(gx, gy, gz, _cuda.stream(self.index), self.function, self.packed, None, None, None, *args,
                     *self.tail)


def relaunch(compiled, kernel, a, device_index: int) -> "Relaunch | None":
    """A Relaunch of `compiled` (what mqa_cli.launch.common.run_kernel returned for LaunchArgs `a` of `kernel`), or None
    when its launcher cannot be called directly (the constexprs are not the trailing parameters, no handles)."""
    if compiled is None or len(a.grid) > 3:
        return None
    run, function, packed = (getattr(compiled, n, None) for n in ("run", "function", "packed_metadata"))
    names = list(kernel.arg_names[len(a.args):])
    if run is None or function is None or packed is None or set(names) != set(a.constexprs):
        return None  # the runner takes every parameter positionally: constexprs must be the trailing ones
    _runtime()
    r = Relaunch()
    r.run, r.function, r.packed, r.index = run, function, packed, device_index
    r.grid = tuple(int(g) for g in a.grid) + (1,) * (3 - len(a.grid))
    r.tail = tuple(a.constexprs[n] for n in names)
    r.direct = direct_launch.unwrap(compiled)  # triton's launcher without its Python wrapper, where it is as known
    return r


def hooked() -> bool:
    """True when a Triton launch hook is set (a profiler): callers then take their full path, which calls it."""
    return _runtime().hooked()


def clear() -> None:
    """Forget every recorded launch (tests; a process that reloads kernels)."""
    _ENTRIES.clear()
