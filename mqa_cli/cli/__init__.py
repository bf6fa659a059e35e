"""The `mqa-logits` command: one small module per command over one library call."""
from __future__ import annotations

import os
import sys

import typer

from ..errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_show_locals=False,
                  help="fp8 MQA logits (DeepSeek sparse attention's lightning indexer): explain, run, verify, dump, bench.")

from . import bench, dump, explain, run, verify  # noqa: E402,F401  (registers the commands)


def main() -> None:
    """Entry point: bad input is one line on stderr and exit 2; never a traceback."""
    try:
        app()
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as e:  # a bug or an environment failure: one line, the traceback only on request
        if os.environ.get("MQA_LOGITS_DEBUG"):
            raise
        first = (str(e).strip().splitlines() or [""])[0]
        print(f"internal error: {type(e).__name__}: {first} (MQA_LOGITS_DEBUG=1 shows the traceback)",
              file=sys.stderr)
        sys.exit(1)
