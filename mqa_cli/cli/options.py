"""Problem flags, declared once and injected into every command that takes a problem."""
from __future__ import annotations

import functools
import inspect
import typing
from dataclasses import dataclass, fields
from typing import Annotated, Optional

import typer

from ..errors import UserError
from ..problem.paged import PagedSpec, read_context_lens
from ..problem.prefill import ProblemSpec

PANEL = "Problem"

# Defaults of the built-in problem when no flag is given: small enough for the interpreter.
DEFAULT_PROBLEM = ProblemSpec(batch=1, seq=512, heads=64, dim=128, layout="causal")
# ... and of the paged one (--paged); PagedSpec's defaults (B 4, next_n 2, C 512, block 64, H 64, D 128).
DEFAULT_PAGED = PagedSpec()
PAGED_ONLY = ("next_n", "context_len", "context_lens_from", "block_size", "context_jitter")
PREFILL_ONLY = ("seq", "seq_kv", "ratio", "layout", "window")
OUTPUT_ONLY = ("max_seqlen_k", "logits_dtype", "max_bytes")
PAGED_SPEC_FIELDS = ("batch", "next_n", "context_len", "context_jitter", "block_size", "heads", "dim", "seed",
                     "clean_logits")


def _opt(flag, help_, panel=PANEL):
    return typer.Option(flag, help=help_, rich_help_panel=panel)


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
    # The paged decode form (--paged): see mqa_cli/paged.py.
    paged: Optional[bool] = None
    next_n: Optional[int] = None
    context_len: Optional[int] = None
    context_lens_from: Optional[str] = None
    block_size: Optional[int] = None
    context_jitter: Optional[float] = None
    # What to write (not part of the problem): compressed columns and the logits dtype.
    max_seqlen_k: Optional[int] = None
    logits_dtype: Optional[str] = None
    max_bytes: Optional[int] = None  # the memory a command may use (default: the device's)

    def given(self) -> bool:
        """Did the user name a problem (any flag or a file)? --paged alone picks the form, not a problem."""
        return any(getattr(self, f.name) is not None for f in fields(self) if f.name not in ("paged",) + OUTPUT_ONLY)

    def paged_spec(self):
        """The paged spec from flags over the paged defaults; prefill-only flags are refused."""

        wrong = [n for n in PREFILL_ONLY if getattr(self, n) is not None]
        if wrong:
            raise UserError(f"--{wrong[0].replace('_', '-')} is a prefill flag; with --paged use --context-len, "
                            f"--next-n, --block-size, --context-jitter")
        changes = {n: getattr(self, n) for n in PAGED_SPEC_FIELDS if getattr(self, n) is not None}
        spec = DEFAULT_PAGED.with_(**changes)
        if self.context_lens_from is not None:
            lens = read_context_lens(self.context_lens_from, spec.next_n)
            if self.batch is not None and self.batch != len(lens):
                raise UserError(f"--batch {self.batch} but {self.context_lens_from} holds {len(lens)} context lengths")
            if self.context_len is not None:
                raise UserError("--context-len and --context-lens-from both give the contexts; drop one")
            spec = spec.with_(batch=len(lens), contexts=tuple(lens))
        return spec

    def spec(self) -> ProblemSpec:
        """The spec from flags over the built-in defaults (source.from_options handles --input first)."""
        base = DEFAULT_PROBLEM
        paged_only = [n for n in PAGED_ONLY if getattr(self, n) is not None]
        if paged_only:
            raise UserError(f"--{paged_only[0].replace('_', '-')} belongs to the paged form; add --paged")
        changes = {f.name: getattr(self, f.name) for f in fields(self)
                   if f.name not in ("input", "paged") + PAGED_ONLY + OUTPUT_ONLY and getattr(self, f.name) is not None}
        return base.with_(**changes)  # ProblemSpec validates every value

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
    ("clean_logits", Annotated[Optional[bool], typer.Option("--clean-logits/--no-clean-logits", "--clean/--no-clean",
                                                            help="write -inf outside each row's window [clean]",
                                                            rich_help_panel=PANEL)]),
    ("input", Annotated[Optional[str], _opt("--input", "load the problem from .safetensors/.pt "
                                                       "(keys q, kv, kv_scales, weights, ks, ke)")]),
]
PAGED_PANEL = "Problem (paged decode, --paged)"
PROBLEM_PARAMS += [
    ("paged", Annotated[Optional[bool], _opt("--paged", "the paged decode form (fp8_paged_mqa_logits); --batch, "
                                             "--heads, --dim, --seed, --clean-logits apply too; --input also reads "
                                             "paged files", PAGED_PANEL)]),
    ("next_n", Annotated[Optional[int], _opt("--next-n", f"draft rows per sequence, 1..8 [{DEFAULT_PAGED.next_n}]",
                                             PAGED_PANEL)]),
    ("context_len", Annotated[Optional[int], _opt("--context-len", f"mean context length C "
                                                  f"[{DEFAULT_PAGED.context_len}]", PAGED_PANEL)]),
    ("context_lens_from", Annotated[Optional[str], _opt("--context-lens-from", "a text file of context lengths, one "
                                                        "per sequence (sets --batch)", PAGED_PANEL)]),
    ("block_size", Annotated[Optional[int], _opt("--block-size", f"tokens per cache block: 16 | 32 | 64 "
                                                 f"[{DEFAULT_PAGED.block_size}]", PAGED_PANEL)]),
    ("context_jitter", Annotated[Optional[float], _opt("--context-jitter", "contexts drawn uniformly in [(1-j)C, "
                                                       f"(1+j)C) [{DEFAULT_PAGED.context_jitter}]", PAGED_PANEL)]),
]
OUTPUT_PANEL = "Output"
PROBLEM_PARAMS += [
    ("max_seqlen_k", Annotated[Optional[int], _opt("--max-seqlen-k", "compressed logits [S, K]: column c of row i is "
                                                   "kv position ks[i] + c (prefill) [0: full rows]", OUTPUT_PANEL)]),
    ("logits_dtype", Annotated[Optional[str], _opt("--logits-dtype", "fp32 | bf16 [fp32]", OUTPUT_PANEL)]),
    ("max_bytes", Annotated[Optional[int], _opt("--max-bytes", "refuse (exit 2) a problem whose inputs, logits and "
                                                "reference would need more bytes [the device's memory]",
                                                OUTPUT_PANEL)]),
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
        if values["logits_dtype"] not in (None, "fp32", "bf16"):
            raise UserError(f"--logits-dtype must be fp32 or bf16, got {values['logits_dtype']!r}")
        return fn(*args, problem=ProblemOptions(**values), **kwargs)

    wrapper.__signature__ = sig.replace(parameters=own + extra)
    return wrapper


Target = Annotated[Optional[str], typer.Option("--target", help="sm90 | sm100 | gfx942 | gfx950 | cpu, or a card: h100 | h200 | h100-pcie | h20 | ... (sm90 with that card's figures) [the GPU found, else cpu]")]
KernelSpec = Annotated[Optional[str], typer.Option(
    "--kernel", help="a dispatch row by name (see `explain`), optionally with config overrides: "
                     "NAME:KEY=VALUE,... e.g. tiled:BLOCK_Q=8,num_stages=4; ':KEY=VALUE' overrides the dispatched "
                     "row. dump compiles any constexpr, launch option or schedule entry as given; run, verify and "
                     "explain rebuild the row's config with the keys it takes, so its schedule follows")]
Force = Annotated[bool, typer.Option("--force", help="overwrite existing files; run a --kernel whose conditions fail")]
Json = Annotated[bool, typer.Option("--json", help="print one JSON object on stdout (messages go to stderr)")]
