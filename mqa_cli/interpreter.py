"""The Triton interpreter switch: turned on explicitly (by the CLI and the test setup), never by an import.

Triton decides at `@triton.jit` decoration time whether a kernel is interpreted, and the kernel modules
are imported lazily (at first launch), so switching on before the first launch is enough.
"""
from __future__ import annotations

import os
import sys

_NOTED = False


def active() -> bool:
    """True when kernels run through the Triton interpreter in this process."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def enable_if_no_gpu(note: bool = True) -> bool:
    """On a machine without a GPU, switch the interpreter on (and say so once on stderr). Returns active()."""
    if "TRITON_INTERPRET" not in os.environ:
        import torch

        if not torch.cuda.is_available():
            os.environ["TRITON_INTERPRET"] = "1"
    if note and active():
        say_once()
    return active()


def say_once() -> None:
    global _NOTED
    if not _NOTED:
        print("note: no GPU: kernels run through the Triton interpreter on the CPU; its times say nothing about "
              "GPU speed", file=sys.stderr)
        _NOTED = True
