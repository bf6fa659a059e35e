"""`mqa-logits bench`: time kernels over a problem or a suite; table, CSV, JSON and plot."""
from __future__ import annotations

import csv
import json
import sys
from typing import Annotated, Optional

import typer

from . import app
from .options import Force, Json, Target, problem_options

Suite = Annotated[Optional[str], typer.Option("--suite", help="seed | dsv32 | dsv4 | decode | all (instead of problem flags)")]
Kernels = Annotated[Optional[str], typer.Option("--kernels", help="comma-separated dispatch rows to time [the dispatched one]; "
                                                                  "two give the seed's base-vs-variant table")]
Csv = Annotated[Optional[str], typer.Option("--csv", help="write every row as CSV")]
Plot = Annotated[Optional[str], typer.Option("--plot", help="write a PNG: TF/s per shape per kernel against the peak")]


def suite_problems(name: str, clean: bool, fp8: str):
    """(name, Problem, target_us, reference_us) for a named suite."""
    from dataclasses import replace

    from .. import matrix, source
    from ..errors import UserError

    names = ["seed", "dsv32", "dsv4", "decode"] if name == "all" else [name]
    out = []
    for n in names:
        if n == "decode":
            decode = getattr(matrix, "DECODE_SUITE", None)
            if decode is None:
                raise UserError("--suite decode needs the paged decode kernels, not in this build")
            from .. import paged

            for spec in decode:
                key = (spec.batch, spec.context_len, spec.next_n)
                spec = replace(spec, clean_logits=clean)  # the reference figures are clean off
                ref = None if clean else matrix.DECODE_REFERENCE_US.get(key)
                out.append((spec.label(), paged.problem_from_spec(spec, fp8), matrix.DECODE_TARGET_US.get(key), ref))
            continue
        if n not in matrix.SUITES:
            raise UserError(f"unknown suite {n!r}; choose seed, dsv32, dsv4, decode or all")
        for b in matrix.SUITES[n]:
            spec = b.spec.with_(clean_logits=clean)
            ref = b.reference_us if clean else b.reference_kernel_us
            out.append((b.name, source.from_spec(spec, fp8), b.target_us if clean else None, ref))
    return out


@app.command()
@problem_options
def bench(suite: Suite = None, kernels: Kernels = None, target: Target = None, csv_path: Csv = None,
          plot_path: Plot = None, force: Force = False, json_: Json = False, *, problem):
    """Time kernels (do_bench median, L2 flushed) over a problem or a suite; TF/s, % of floor, targets."""
    from rich.progress import Progress

    from .. import bench as B
    from .. import io, source, targets
    from ..errors import UserError
    from .run import device_for

    for path in (csv_path, plot_path):
        if path is not None:
            io.check_writable(path, force)
    if plot_path is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UserError("--plot needs matplotlib: pip install 'mqa-logits[plot]'") from None
    tgt = targets.resolve(target)
    device = device_for(tgt)
    if suite is not None and problem.given() and any(
            v is not None for k, v in vars(problem).items() if k != "clean_logits"):
        raise UserError("give either --suite or problem flags, not both")
    if not tgt.is_gpu:
        print("note: no GPU: interpreter times say nothing about GPU speed", file=sys.stderr)
    if suite is not None:
        jobs = suite_problems(suite, problem.clean, tgt.fp8)
    else:
        prob = source.from_options(problem, tgt.fp8)
        jobs = [(prob.label, prob, None, None)]
    names = [k.strip() for k in kernels.split(",")] if kernels else [None]
    rows, notes = [], []
    with Progress(transient=True, disable=json_ or not sys.stderr.isatty()) as bar:
        task = bar.add_task("bench", total=len(jobs) * len(names))
        for name, prob, target_us, ref_us in jobs:
            run_names, skipped = B.runnable_rows(names, prob.shape, tgt) if names != [None] else ([None], [])
            notes += skipped
            t = prob.materialise(device)
            for row in run_names:
                bar.update(task, description=f"{name} {row or 'auto'}")
                rows.append(B.bench_one(name, prob, tgt, row, device, t, target_us, ref_us))
                bar.advance(task)
            bar.advance(task, len(names) - len(run_names))
            del t
    for n in notes:
        print("note: " + n, file=sys.stderr)
    if csv_path:
        with open(csv_path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].as_dict()))
            w.writeheader()
            for r in rows:
                w.writerow(r.as_dict())
    if plot_path:
        B.plot(rows, plot_path, tgt.peak_fp8_tflops, f"fp8 MQA logits on {tgt.device_name or tgt.name}")
    if json_:
        print(json.dumps({"target": tgt.name, "device": tgt.device_name, "rows": [r.as_dict() for r in rows]},
                         indent=2))
        return
    print(f"target {tgt.name}" + (f" ({tgt.device_name})" if tgt.device_name else "") +
          f"; clean_logits={problem.clean}; ref µs = DeepGEMM on the H200 (anchors), target µs = issue target")
    print(B.table(rows))
    if kernels and len(names) == 2:
        print()
        print(B.compare_table(rows, names[0], names[1]))
