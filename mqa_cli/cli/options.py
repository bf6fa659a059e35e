"""Problem flags, declared once and injected into every command that takes a problem."""
from __future__ import annotations

import functools
import inspect
import typing
from dataclasses import dataclass, fields
from typing import Annotated, Optional

import typer

from ..errors import UserError
from ..problem import LAYOUTS, ProblemSpec

PANEL = "Problem"

# Defaults of the built-in problem when no flag is given: small enough for the interpreter.
DEFAULT_PROBLEM = ProblemSpec(batch=1, seq=512, heads=64, dim=128, layout="causal")


def _opt(flag, help_, **kw):
    return typer.Option(flag, help=help_, rich_help_panel=PANEL, **kw)


@dataclass
class ProblemOptions:
    batch: Optional[int] = None
    seq: Optional[int] = None
    seq_kv: Optional[int] = None
    ratio: Optional[int] = None
    heads: Optional[int] = None
    dim: Optional[int] = None
    layout: Optional[str] = None
    window: Optional[int] = None
    seed: Optional[int] = None
    clean_logits: Optional[bool] = None
    input: Optional[str] = None

    def given(self) -> bool:
        """Did the user name a problem (any flag or a file)?"""
        return any(getattr(self, f.name) is not None for f in fields(self))

    def spec(self) -> ProblemSpec:
        """The spec from flags over the built-in defaults (not used with --input)."""
        if self.input is not None:
            raise UserError("--input takes the problem from the file; drop the size flags")
        base = DEFAULT_PROBLEM
        changes = {f.name: getattr(self, f.name) for f in fields(self)
                   if f.name != "input" and getattr(self, f.name) is not None}
        if self.layout is not None and self.layout not in LAYOUTS:
            raise UserError(f"--layout must be one of {', '.join(LAYOUTS)}, got {self.layout!r}")
        return base.with_(**changes)

    @property
    def clean(self) -> bool:
        return True if self.clean_logits is None else self.clean_logits


PROBLEM_PARAMS = [
    ("batch", Annotated[Optional[int], _opt("--batch", "sequences B (S = B*seq query rows)")]),
    ("seq", Annotated[Optional[int], _opt("--seq", f"query tokens per sequence [{DEFAULT_PROBLEM.seq}]")]),
    ("seq_kv", Annotated[Optional[int], _opt("--seq-kv", "kv tokens per sequence [seq / ratio; cp: 4*seq]")]),
    ("ratio", Annotated[Optional[int], _opt("--ratio", "kv compression ratio (DeepSeek V4 indexer) [1]")]),
    ("heads", Annotated[Optional[int], _opt("--heads", f"query heads H [{DEFAULT_PROBLEM.heads}]")]),
    ("dim", Annotated[Optional[int], _opt("--dim", f"head dim D [{DEFAULT_PROBLEM.dim}]")]),
    ("layout", Annotated[Optional[str], _opt("--layout", "causal | full | window | cp [causal]")]),
    ("window", Annotated[Optional[int], _opt("--window", "window length W for --layout window")]),
    ("seed", Annotated[Optional[int], _opt("--seed", "random seed of the inputs [0]")]),
    ("clean_logits", Annotated[Optional[bool], _opt("--clean-logits/--no-clean-logits",
                                                    "write -inf outside each row's window [clean]")]),
    ("input", Annotated[Optional[str], _opt("--input", "load the problem from .safetensors/.pt "
                                                       "(keys q, kv, kv_scales, weights, ks, ke)")]),
]
PROBLEM_NAMES = [name for name, _ in PROBLEM_PARAMS]


def problem_options(fn):
    """Give a command the problem flags; it receives them as `problem: ProblemOptions`."""
    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn, include_extras=True)  # resolve string annotations (PEP 563)
    own = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in sig.parameters.values()
           if p.name != "problem"]
    extra = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ann)
             for name, ann in PROBLEM_PARAMS]

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        values = {name: kwargs.pop(name, None) for name in PROBLEM_NAMES}
        return fn(*args, problem=ProblemOptions(**values), **kwargs)

    wrapper.__signature__ = sig.replace(parameters=own + extra)
    return wrapper


Target = Annotated[Optional[str], typer.Option("--target", help="sm90 | sm100 | gfx942 | gfx950 | cpu [the GPU found, else cpu]")]
Kernel = Annotated[Optional[str], typer.Option("--kernel", help="force a dispatch row by name (see `explain`)")]
Force = Annotated[bool, typer.Option("--force", help="overwrite existing files; run a --kernel whose conditions fail")]
Json = Annotated[bool, typer.Option("--json", help="print one JSON object on stdout (messages go to stderr)")]
