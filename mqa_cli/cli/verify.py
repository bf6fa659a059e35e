"""`mqa-logits verify`: check kernels against the reference on one problem or the built-in matrix."""
from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer

from .app import app
from .options import Force, Json, KernelSpec, Target, problem_options

Dtype = Annotated[str, typer.Option("--dtype", help="reference precision: float32 | float64")]

def _holds(dispatch, shape, tgt, kernel) -> bool:
    from ..errors import UserError

    try:
        return dispatch.plan_spec(shape, tgt, kernel).chosen.ok
    except UserError:  # the row's conditions fail for this shape
        return False


@app.command()
@problem_options
def verify(target: Target = None, kernel: KernelSpec = None, dtype: Dtype = "float32", large: Annotated[bool, typer.Option(
        "--large", help="add the large GPU shapes (S = N = 32768 causal, ...) to the built-in matrix")] = False,
           rel_tol: Annotated[float, typer.Option("--rel-tol", help="relative-error bound")] = 1e-3,
           topk: Annotated[Optional[int], typer.Option("--topk", help="also check the indexer's top-k selection: "
                                                       "recall against the float64 reference's top-k")] = None,
           force: Force = False, json_: Json = False, *, problem):
    """Exact -inf pattern, relative error, calc_diff and bitwise repeatability; exit 1 on any failure.

    Examples: `mqa-logits verify` (the built-in matrix); `mqa-logits verify --paged`;
    `mqa-logits verify --seq 1024 --max-seqlen-k 512 --no-clean`; `mqa-logits verify --kernel tiled --large`; `mqa-logits verify --kernel tiled:BLOCK_Q=8` (a config variant).
    """
    from ..launch import interpreter

    interpreter.enable_if_no_gpu()
    import torch
    from tabulate import tabulate

    from ..check.verify import DIFF_TOL, verify as verify_one
    from ..errors import UserError
    from ..plan import dispatch, targets
    from ..problem import matrix, source, suites

    if dtype not in ("float32", "float64"):
        raise UserError(f"--dtype must be float32 or float64, got {dtype!r}")
    tgt = targets.resolve(target)
    device = targets.device_for(tgt)
    if problem.given():
        problems = [source.from_options(problem, tgt.fp8)]
    elif problem.paged:  # `verify --paged`: the built-in paged matrix
        specs = list(matrix.PAGED_VERIFY_MATRIX) + (list(matrix.PAGED_GPU_EXTRA) if large else [])
        problems = [source.from_spec(s, tgt.fp8, 0, problem.logits_dtype == "bf16") for s in specs]
    else:  # the built-in matrix; --max-seqlen-k (any value > 0) checks each at its own longest row
        specs = list(matrix.VERIFY_MATRIX) + (list(matrix.GPU_EXTRA) if large else [])
        problems = [source.from_spec(s, tgt.fp8, suites.longest_row(s) if problem.max_seqlen_k else 0,
                                     problem.logits_dtype == "bf16") for s in specs]
    if kernel is not None and not force and not problem.given():
        # A named row over the built-in matrix: check it on the problems it supports.
        keep = [p for p in problems if _holds(dispatch, p.shape, tgt, kernel)]
        if not keep:
            raise UserError(f"kernel {kernel} holds for none of the built-in problems on {tgt.name}"
                            + ("" if large else "; --large adds the large shapes"))
        if len(keep) < len(problems):
            print(f"note: {kernel} holds for {len(keep)} of the {len(problems)} built-in problems; verifying those "
                  f"(--force runs it on all)", file=sys.stderr)
        problems = keep
    results, recalls = [], []
    for prob in problems:
        plan = dispatch.plan_spec(prob.shape, tgt, kernel, force=force)
        prob.check_fits(device, reference_size=8 if dtype == "float64" else 4)
        t = prob.materialise(device)
        results.append(verify_one(t, plan.config, prob.shape.clean_logits, prob.label, getattr(torch, dtype),
                                  rel_tol=rel_tol, max_seqlen_k=prob.max_seqlen_k))
        if topk is not None:
            from ..check import recall as indexer

            idx, _ = indexer.topk_call(t, prob.shape, topk, prob.max_seqlen_k)()
            recalls.append((prob.label, indexer.recall(t, prob.shape, topk, idx)))
        del t
    ok = all(r.ok for r in results) and all(r.ok for _, r in recalls)
    if json_:
        print(json.dumps({"ok": ok, "target": tgt.name, "rel_tol": rel_tol, "diff_tol": DIFF_TOL,
                          "results": [r.as_dict() for r in results],
                          "topk": [{"problem": label, **r.as_dict()} for label, r in recalls]}, indent=2))
    else:
        rows = [[r.label, r.kernel, "✓" if r.comparison.inf_pattern_ok else "✗", f"{r.comparison.rel_error:.2e}",
                 f"{r.comparison.calc_diff:.2e}", r.comparison.unwritten, "✓" if r.bitwise_repeat else "✗",
                 "pass" if r.ok else "FAIL"] for r in results]
        print(tabulate(rows, headers=["problem", "kernel", "-inf", "rel err", "calc_diff", "unwritten", "bitwise",
                                      "result"]))
        print(f"{sum(r.ok for r in results)} passed, {sum(not r.ok for r in results)} failed "
              f"(on {tgt.name}; rel err < {rel_tol:g}, calc_diff < {DIFF_TOL:g})")
        for label, r in recalls:
            print(f"{label}: {r.line()}")
    if not ok:
        raise typer.Exit(1)
