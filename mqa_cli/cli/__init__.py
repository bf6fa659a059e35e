"""The `mqa-logits` command: one small module per command over one library call.

Exit codes: 0 ok, 1 verification failed, 2 bad input, 3 internal error.
"""
from __future__ import annotations

import os
import sys

import typer

from ..errors import UserError

EXIT_OK, EXIT_VERIFY_FAILED, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3

from .app import app  # noqa: E402
from . import bench, dump, explain, run, verify  # noqa: E402,F401  (registers the commands)


def main() -> None:
    """Entry point: bad input is one line on stderr and exit 2; an internal error exit 3; never a traceback."""
    sys.exit(_run())


def console() -> None:
    """The `mqa-logits` script: main, then the process ends as _leave says."""
    try:
        code = _run()
    except SystemExit as e:  # (a command that calls sys.exit itself)
        code = e.code if isinstance(e.code, int) else EXIT_OK if e.code is None else EXIT_INTERNAL
    _leave(code)


def _leave(code: int) -> None:
    """Exit with `code`. Where triton's Gluon bindings leave objects to the interpreter's shutdown (fact
    gluon_bindings_leak_at_exit: 3.9's TMA builder methods keep an ir.attribute as a default argument), a command
    that compiled a Gluon kernel would end in some 30 lines of nanobind leak warnings on stderr, which read as a
    crash; the output is flushed and the process ends without that teardown (its files are all closed by then)."""
    from mqa_kernels.common import versions

    if versions.holds("gluon_bindings_leak_at_exit") and "triton" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _run() -> int:
    try:
        rc = app(standalone_mode=False)
        return rc if isinstance(rc, int) else EXIT_OK
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except typer.Exit as e:
        return e.exit_code
    except (typer.Abort, KeyboardInterrupt):
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001  a bug or an environment failure: one line, the traceback on request
        if hasattr(e, "show") and isinstance(getattr(e, "exit_code", None), int):
            # click's own errors (typer vendors click): a bad flag or command is bad input, in one line as the
            # other bad input (click's usage and hint lines left out: --help shows the usage)
            message = e.format_message() if hasattr(e, "format_message") else str(e)
            line = " ".join(message.split())
            print(f"error: {line} (--help shows the usage)", file=sys.stderr)
            return EXIT_BAD_INPUT if e.exit_code == 2 else e.exit_code
        if os.environ.get("MQA_LOGITS_DEBUG"):
            raise
        first = (str(e).strip().splitlines() or [""])[0]
        print(f"internal error: {type(e).__name__}: {first} (--debug shows the traceback)", file=sys.stderr)
        return EXIT_INTERNAL
