"""The typer application every command registers on (its own module, so commands import no package that
imports them)."""
from __future__ import annotations

import os

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_show_locals=False,
                  help="fp8 MQA logits (DeepSeek sparse attention's lightning indexer): explain, run, verify, dump, "
                       "bench.\n\nExit codes: 0 ok, 1 verification failed, 2 bad input, 3 internal error "
                       "(one line on stderr; --debug or MQA_LOGITS_DEBUG=1 shows the traceback).\n\n"
                       "Example: mqa-logits explain --heads 64 --dim 128 --seq 8192")


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="show the traceback of an internal error")) -> None:
    if debug:
        os.environ["MQA_LOGITS_DEBUG"] = "1"
