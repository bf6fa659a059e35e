"""The `mqa-logits` command: one small module per command over one library call."""
from __future__ import annotations

import sys

import typer

from ..errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_show_locals=False,
                  help="fp8 MQA logits (DeepSeek sparse attention's lightning indexer): explain, run, verify, dump, bench.")

from . import explain, run, verify  # noqa: E402,F401  (registers the commands)


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
