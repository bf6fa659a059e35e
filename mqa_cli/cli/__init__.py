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
    try:
        rc = app(standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else EXIT_OK)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as e:  # noqa: BLE001  a bug or an environment failure: one line, the traceback on request
        if hasattr(e, "show") and isinstance(getattr(e, "exit_code", None), int):
            # click's own errors (typer vendors click): a bad flag or command is bad input, in one line as the
            # other bad input (click's usage and hint lines left out: --help shows the usage)
            message = e.format_message() if hasattr(e, "format_message") else str(e)
            line = " ".join(message.split())
            print(f"error: {line} (--help shows the usage)", file=sys.stderr)
            sys.exit(EXIT_BAD_INPUT if e.exit_code == 2 else e.exit_code)
        if os.environ.get("MQA_LOGITS_DEBUG"):
            raise
        first = (str(e).strip().splitlines() or [""])[0]
        print(f"internal error: {type(e).__name__}: {first} (--debug shows the traceback)", file=sys.stderr)
        sys.exit(EXIT_INTERNAL)
