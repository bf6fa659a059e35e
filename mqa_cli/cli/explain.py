"""`mqa-logits explain`: which kernel a problem dispatches to on a target, and why."""
from __future__ import annotations

import json

from .app import app
from .options import Json, Kernel, Target, problem_options


@app.command()
@problem_options
def explain(target: Target = None, kernel: Kernel = None, json_: Json = False, *, problem):
    """Print the problem, every dispatch row with its conditions, the choice, its config and the time floor.

    Examples: `mqa-logits explain --heads 64 --dim 128 --seq 8192`; `mqa-logits explain --target gfx950 --seq 4096 --json`.
    """
    from .. import dispatch, report, source, targets

    tgt = targets.resolve(target)
    prob = source.from_options(problem, tgt.fp8)
    plan = dispatch.plan(prob.shape, tgt, kernel=kernel, force=True)
    d = report.explain_dict(prob.label, prob.counts, plan)
    if json_:
        print(json.dumps(d, indent=2, default=str))
    else:
        print(report.explain_text(d))
