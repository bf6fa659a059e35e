"""Named benchmark suites as (name, Problem, reference µs) jobs: the shapes of mqa_cli.problem.matrix with the
reference figure that matches the run's clean_logits (the reference measured both)."""
from __future__ import annotations

from dataclasses import replace

from ..errors import UserError
from . import matrix, source
from .prefill import sequence_windows

NAMES = ("seed", "dsv32", "dsv4", "heads", "decode", "drafts")


def jobs(suite: str | None, problem, fp8: str) -> list:
    """Jobs for a named suite (or 'all'), or the one problem of the flags when suite is None."""
    msk = problem.max_seqlen_k or 0
    bf16 = problem.logits_dtype == "bf16"
    if suite is None:
        prob = source.from_options(problem, fp8)
        return [(prob.label, prob, None)]
    names = NAMES if suite == "all" else (suite,)
    out = []
    for n in names:
        if n in matrix.PAGED_SUITES:
            for spec in matrix.PAGED_SUITES[n]:
                key = (spec.batch, spec.context_len, spec.next_n)
                spec = replace(spec, clean_logits=problem.clean)
                ref = None if problem.clean else matrix.DECODE_REFERENCE_US.get(key)
                out.append((spec.label(), source.from_spec(spec, fp8, 0, bf16), ref))
            continue
        if n not in matrix.SUITES:
            raise UserError(f"unknown suite {n!r}; choose one of {', '.join(NAMES)}, indexer or all")
        for b in matrix.SUITES[n]:
            spec = b.spec.with_(clean_logits=problem.clean)
            ref = b.reference_us if problem.clean else b.reference_kernel_us
            k = longest_row(spec) if msk else 0  # compressed: each shape at its own longest row
            out.append((b.name, source.from_spec(spec, fp8, k, bf16), None if (msk or bf16) else ref))
    return out


def longest_row(spec) -> int:
    """The longest window of a prefill spec: the max_seqlen_k its compressed logits need."""
    s, e = sequence_windows(spec)
    return max(1, max(b - a for a, b in zip(s, e)))
