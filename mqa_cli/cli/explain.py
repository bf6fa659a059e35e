"""`mqa-logits explain`: which kernel a problem dispatches to on a target, and why."""
from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from .app import app
from .options import Json, KernelSpec, Target, problem_options


@app.command()
@problem_options
def explain(target: Target = None, kernel: KernelSpec = None, json_: Json = False,
            topk: Annotated[Optional[int], typer.Option("--topk", help="show the top-k plan (run --topk K): its "
                                                        "selection config and memory instead of the full logits")] = None,
            schedule: Annotated[Optional[str], typer.Option(
                "--schedule", help="paged: an engine's call passes schedule_meta (given; given:R for one of R "
                                   "ranges, e.g. vLLM's num_sms // 2 at next_n 4) or None (computed) [computed]")] = None,
            cache_block_stride: Annotated[Optional[int], typer.Option(
                "--cache-block-stride", help="paged: bytes from one cache block to the next, as an engine's "
                                             "kv_cache.stride(0) (a layer of a bigger buffer) [block_size x (D + 4)]")]
            = None,
            cache_layout: Annotated[Optional[str], typer.Option(
                "--cache-layout", help="paged: plain (DeepGEMM's cache) or shuffled (aiter's pre-shuffled cache, "
                                       "its Preshuffle=True) [plain]")] = None,
            *, problem):
    """Print the problem, every dispatch row with its conditions, the choice, its config and the time floor.

    Examples: `mqa-logits explain --heads 64 --dim 128 --seq 8192`; `mqa-logits explain --target gfx950 --seq 4096 --json`;
    `mqa-logits explain --heads 8 --seq 8192 --target sm90 --kernel :TMA_STORE=1` (the config `run` would run);
    an engine's decode call: `mqa-logits explain --paged --target sm90 --schedule given --cache-block-stride 25344`;
    aiter's decode call on a pre-shuffled cache: `mqa-logits explain --paged --target gfx950 --block-size 64
    --cache-layout shuffled`.
    """
    from ..plan import dispatch, targets
    from ..problem import source
    from . import report

    tgt = targets.resolve(target)
    prob = source.with_call(source.from_options(problem, tgt.fp8), schedule, cache_block_stride, cache_layout)
    plan = dispatch.plan_spec(prob.shape, tgt, kernel, force=True)
    tk = report.topk_memory(prob, topk, tgt) if topk is not None else None
    d = report.explain_dict(prob.label, prob.counts, plan, report.memory_dict(prob.counts, prob.shape,
                                                                              prob.max_seqlen_k, tk))
    if json_:
        print(json.dumps(d, indent=2, default=str))
    else:
        print(report.explain_text(d))
