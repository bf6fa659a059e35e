"""`mqa-logits bench`: time the public API (or kernels alone) over a problem or a suite; table, CSV, JSON, plot."""
from __future__ import annotations

import csv
import json
import sys
from typing import Annotated, Optional

import typer

from .app import app
from .options import Force, Json, Target, problem_options

Suite = Annotated[Optional[str], typer.Option("--suite", help="seed | dsv32 | dsv4 | heads | decode | drafts | all, or indexer "
                                              "(the indexer step, fused beside the engines' path) (instead of problem flags)")]
Kernels = Annotated[Optional[str], typer.Option("--kernels", help="comma-separated dispatch rows to time alone "
                                                "[the public API]; two give a base-vs-variant table")]
KernelOnly = Annotated[bool, typer.Option("--kernel-only", help="time the dispatched kernel alone (no API checks, "
                                          "output preallocated) instead of the public API")]
Graph = Annotated[bool, typer.Option("--graph", help="also time CUDA-graph replay of the same call (launch cost "
                                     "removed) [on for decode]")]
Goals = Annotated[Optional[str], typer.Option("--goals", help="a JSON file {shape name: µs} of goals to mark")]
Csv = Annotated[Optional[str], typer.Option("--csv", help="write every row as CSV")]
Plot = Annotated[Optional[str], typer.Option("--plot", help="write a PNG: a roofline of each row's TF/s under the "
                                             "fp8 and copy-rate ceilings, and its % of the binding floor, beside "
                                             "the reference's where known (needs matplotlib)")]


@app.command()
@problem_options
def bench(suite: Suite = None, kernels: Kernels = None, kernel_only: KernelOnly = False, graph: Graph = False,
          goals: Goals = None, target: Target = None, csv_path: Csv = None, plot_path: Plot = None,
          force: Force = False, json_: Json = False, *, problem):
    """Time what users call (the public API, do_bench median, L2 flushed) over a problem or a suite.

    Examples: `mqa-logits bench --suite seed`; `mqa-logits bench --suite decode --no-clean --csv d.csv`;
    `mqa-logits bench --suite seed --kernels gluon_ws_sm90,h64d128_sm90`.
    """
    from ..launch import interpreter

    interpreter.enable_if_no_gpu()
    from rich.progress import Progress

    from ..bench import suite as B
    from ..errors import UserError
    from ..plan import targets
    from ..problem import io, matrix, suites

    for path in (csv_path, plot_path):
        if path is not None:
            io.check_writable(path, force)
    if plot_path is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UserError("--plot needs matplotlib: pip install 'mqa-logits[plot]'") from None
    tgt = targets.resolve(target)
    device = targets.device_for(tgt)
    if suite is not None and any(v is not None for k, v in vars(problem).items()
                                 if k not in ("clean_logits", "max_seqlen_k", "logits_dtype", "max_bytes")):
        raise UserError("give either --suite or problem flags, not both (--clean/--no-clean, --max-seqlen-k, "
                        "--logits-dtype and --max-bytes apply to a suite)")
    goal_us = B.read_goals(goals) if goals else {}
    if suite == "indexer":  # the step (logits + top-k 2048): ours fused beside the engines' path where it imports
        from ..bench import indexer as indexer_bench

        if indexer_bench.main(["--csv", csv_path] if csv_path else []):
            raise typer.Exit(1)  # a selection was not exact
        return
    jobs = suites.jobs(suite, problem, tgt.fp8)
    names = [k.strip() for k in kernels.split(",")] if kernels else [None]
    rows, notes = [], []
    with Progress(transient=True, disable=json_ or not sys.stderr.isatty()) as bar:
        task = bar.add_task("bench", total=len(jobs) * len(names))
        for name, prob, ref_us in jobs:
            run_names, skipped = B.runnable_rows(names, prob.shape, tgt) if names != [None] else ([None], [])
            notes += skipped
            if problem.max_bytes is not None:  # a suite's problems take the limit too
                prob.max_bytes = problem.max_bytes
            prob.check_fits(device)
            t = prob.materialise(device)
            for row in run_names:
                bar.update(task, description=f"{name} {row or 'api'}")
                rows.append(B.bench_one(name, prob, tgt, row, t, kernel_only, ref_us, goal_us.get(name),
                                        graph or prob.shape.kind == "paged"))
                bar.advance(task)
            bar.advance(task, len(names) - len(run_names))
            del t
    for n in notes:
        print("note: " + n, file=sys.stderr)
    if not rows:
        raise UserError("nothing to time: no requested kernel runs here")
    if csv_path:
        with open(csv_path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].as_dict()))
            w.writeheader()
            w.writerows(r.as_dict() for r in rows)
    if plot_path:
        from ..bench import plot

        plot.render(rows, plot_path, tgt, f"fp8 MQA logits on {tgt.device_name or tgt.name}",
                    reference_label=matrix.REFERENCE_SOURCE)
    if json_:
        print(json.dumps({"target": tgt.name, "device": tgt.device_name, "reference": matrix.REFERENCE_SOURCE,
                          "rows": [r.as_dict() for r in rows]}, indent=2))
        return
    print(f"target {tgt.name}" + (f" ({tgt.device_name})" if tgt.device_name else "") +
          f"; clean_logits={problem.clean}; calls: api = the public entry point, kernel = the kernel alone; "
          f"ref µs = {matrix.REFERENCE_SOURCE}")
    print(B.table(rows))
    print(B.floor_note(tgt))
    if kernels and len(names) == 2:
        print()
        print(B.compare_table(rows, names[0], names[1]))
