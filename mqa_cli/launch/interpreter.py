"""The Triton interpreter switch: turned on explicitly (by the CLI and the test setup), never by an import.

Triton decides at `@triton.jit` decoration time whether a kernel is interpreted, and the kernel modules
are imported lazily (at first launch), so switching on before the first launch is enough.
"""
from __future__ import annotations

import os
import sys
import threading

_NOTED = False  # the CPU-path note was printed

# One interpreted launch at a time in a process: triton's interpreter swaps triton.language's builtins process-wide
# for the length of a launch and keeps the program index in one global builder, so two threads' launches at once
# undo each other's swap ("Did you forget to add @triton.jit ?") or mix their programs. The CPU path's speed matters
# little; its results must be the serial ones. Never taken on a GPU.
LAUNCH_LOCK = threading.RLock()


def active() -> bool:
    """True when kernels run through the Triton interpreter in this process."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def enable_if_no_gpu(note: bool = True) -> bool:
    """On a machine without a GPU, switch the interpreter on (and say so once on stderr). Returns active().
    Refuses in one line where the installed triton's interpreter cannot run with the installed numpy."""
    if "TRITON_INTERPRET" not in os.environ:
        import torch

        if not torch.cuda.is_available():
            os.environ["TRITON_INTERPRET"] = "1"
    if active():
        problem = numpy_problem()
        if problem:
            from ..errors import UserError

            raise UserError(problem)
    global _NOTED
    if note and active() and not _NOTED:
        print("note: no GPU: kernels run through the Triton interpreter on the CPU; its times say nothing about "
              "GPU speed", file=sys.stderr)
        _NOTED = True
    return active()


def numpy_problem(triton: str | None = None, numpy: str | None = None) -> str | None:
    """Why the interpreter cannot run here, or None: triton 3.6's converts 1-element arrays with int(), which numpy
    2.4 made an error (fact interpreter_needs_numpy_below_2_4). A requirement cannot say so (an environment marker
    does not see triton's version), and a GPU run never uses the interpreter, so the check is made where it is used."""
    from importlib.metadata import PackageNotFoundError, version

    from mqa_kernels.common import versions

    triton = triton or versions.installed()
    try:
        numpy = numpy or version("numpy")
    except PackageNotFoundError:
        return None
    if versions.holds("interpreter_needs_numpy_below_2_4", triton) and versions.release(numpy) >= (2, 4):
        return (f"triton {triton}'s interpreter (the CPU path) needs numpy < 2.4, this is numpy {numpy}: "
                f"pip install 'numpy<2.4' (or triton 3.8 or later, which takes any numpy)")
    return None


_ONE_PATCH = False


def patch_language_once_per_launch() -> None:
    """Make the interpreter patch triton.language once per kernel launch instead of once per @triton.jit helper call.

    triton's interpreter (3.6, 3.8, 3.9: runtime/interpreter.py `_patch_lang`) swaps every triton.language builtin
    for its interpreted form when a launch starts, and restores them when it ends; it also redoes the whole swap on
    every call of a jit helper inside the kernel (about 3 ms each, a few hundred calls per launch), though the
    builtins are already swapped and the helper's swap is never undone on its own. Here a helper's call skips the
    swap when the launch around it already swapped the same modules: an interpreted launch takes 25-37 % less time
    (docs/DESIGN-NOTES.md, "The CPU path"). Where the installed triton has no such function, nothing changes."""
    global _ONE_PATCH
    if _ONE_PATCH:
        return
    _ONE_PATCH = True
    import inspect

    import triton.language as tl
    from triton.runtime import interpreter as ti

    real = getattr(ti, "_patch_lang", None)
    if real is None or getattr(ti, "_LangPatchScope", None) is None:
        return
    swapped: list = []  # per launch in progress: the ids of the language modules its swap covered

    def langs(fn) -> set:
        return {id(v) for v in fn.__globals__.values() if inspect.ismodule(v) and v in (tl, tl.core)}

    def patch_lang(fn):
        mine = langs(fn)
        if swapped and mine <= swapped[-1]:
            return ti._LangPatchScope()  # already swapped by the launch around this call: nothing to undo
        scope = real(fn)
        if type(sys._getframe(1).f_locals.get("self")).__name__ != "GridExecutor":
            if swapped:  # a helper's call that swapped a module the launch had not: swapped for the rest of it
                swapped[-1] |= mine
            return scope  # (a helper's scope is dropped, as the interpreter drops it)
        swapped.append(mine)
        restore = scope.restore

        def restore_and_pop():
            swapped.pop()
            restore()

        scope.restore = restore_and_pop
        return scope

    patch_lang.real = real  # (the interpreter's own, for a comparison)
    ti._patch_lang = patch_lang

