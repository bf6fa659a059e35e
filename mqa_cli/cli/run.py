"""`mqa-logits run`: run the dispatched kernel on a problem, time it, optionally save inputs and logits."""
from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer

from . import app
from .options import Force, Json, Kernel, Target, problem_options

Output = Annotated[Optional[str], typer.Option("--output", help="save the logits [S, N] as safetensors key `logits`")]
SaveProblem = Annotated[Optional[str], typer.Option("--save-problem", help="save the inputs (.safetensors or .pt)")]
DumpAsm = Annotated[bool, typer.Option("--dump-asm", help="after the run, dump the kernel that ran (its own compiled "
                                       "asm, registers after load) to --dump-dir and print its summary; GPU only: "
                                       "on the CPU interpreter it refuses (exit 2), use `mqa-logits dump --target`")]
DumpDir = Annotated[str, typer.Option("--dump-dir", help="folder for --dump-asm: <target>/<kernel name>_w<warps>_s<stages>/")]


def device_for(tgt):
    from ..errors import UserError
    from .. import targets

    here = targets.detect()
    if tgt.name != here.name:
        raise UserError(f"cannot run on {tgt.name}: this machine has {here.name}; `mqa-logits dump --target "
                        f"{tgt.name}` compiles for it without running")
    return "cuda" if tgt.is_gpu else "cpu"


@app.command()
@problem_options
def run(target: Target = None, kernel: Kernel = None, output: Output = None, save_problem: SaveProblem = None,
        force: Force = False, json_: Json = False, dump_asm: DumpAsm = False, dump_dir: DumpDir = "dumps", *, problem):
    """Run the kernel dispatch selects on the problem (built-in default, flags or --input) and time it."""
    from .. import dispatch, io, launch, report, source, targets, timing

    for path in (output, save_problem):
        if path is not None:
            io.check_writable(path, force)
    tgt = targets.resolve(target)
    device = device_for(tgt)
    prob = source.from_options(problem, tgt.fp8)
    plan = dispatch.plan(prob.shape, tgt, kernel=kernel, force=force)
    if dump_asm:
        from .dump import check_dump_asm
        check_dump_asm(tgt, plan, dump_dir, force)
    t = prob.materialise(device)
    if save_problem:
        io.save_tensors(save_problem, t.as_dict(), force)
    out = launch.alloc_logits(t.S, t.N, t.q.device)
    tm = timing.time_fn(lambda: launch.launch(t, plan.config, out), tgt.is_gpu)  # the interpreter runs it once
    if output:
        io.save_tensors(output, {"logits": out}, force)
    result = {"problem": report.counts_dict(prob.counts), "label": prob.label, "target": tgt.name,
              "kernel": plan.chosen.row.name, "kernel_name": plan.config.name, "config": plan.config.as_dict(),
              "time_us": tm.median_us, "p20_us": tm.p20_us, "p80_us": tm.p80_us, "timing": tm.method,
              "tflops": timing.tflops(prob.counts.flop, tm.median_us), "output": output, "saved_problem": save_problem}
    if dump_asm:
        from .dump import dump_launched
        result["dump"] = dump_launched(tgt, plan, prob.label, dump_dir, force)
    if json_:
        print(json.dumps(result, indent=2, default=str))
        return
    print(report.summary_text(prob.label, prob.counts))
    print(f"kernel   {plan.chosen.row.name} → {plan.config.name} on {tgt.name}")
    print(f"time     {tm.median_us:.1f} µs ({tm.method}; p20-p80 {tm.p20_us:.1f}-{tm.p80_us:.1f})")
    print(f"rate     {result['tflops']:.1f} TFLOP/s over live FLOP")
    for label, path in (("problem", save_problem), ("logits", output)):
        if path:
            print(f"saved {label} to {path}", file=sys.stderr)
    if dump_asm:
        from ..inspect_asm import summary_table
        print(f"\nwrote    {result['dump']['dump_dir']}/\n" + summary_table(result["dump"]["summary"]))
