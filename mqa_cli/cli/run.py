"""`mqa-logits run`: run the dispatched kernel on a problem, time it, optionally check it, save, dump its asm."""
from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer

from .app import app
from .options import Force, Json, KernelSpec, Target, problem_options

Output = Annotated[Optional[str], typer.Option("--output", help="save the logits as safetensors key `logits` "
                                               "(with --topk: `indices` and `values`)")]
SaveProblem = Annotated[Optional[str], typer.Option("--save-problem", help="save the inputs (.safetensors or .pt)")]
DumpAsm = Annotated[bool, typer.Option("--dump-asm", help="after the run, dump the kernel's compiled stages and "
                                       "summary to --dump-dir: on a GPU the kernel that ran; without one, the same "
                                       "kernel compiled for --target (default sm90)")]
DumpDir = Annotated[str, typer.Option("--dump-dir", help="folder for --dump-asm: <target>/<kernel name>_w<warps>_s<stages>/")]
Verify = Annotated[bool, typer.Option("--verify", help="check the run's output against the float32 reference "
                                      "(same tensors, same process); exit 1 on failure")]
TopK = Annotated[Optional[int], typer.Option("--topk", help="return each row's top-k kv positions (the indexer's "
                                             "selection) instead of the logits; memory stays bounded")]


def _problem_argv(argv: list) -> list:
    """The problem flags of this command line (what a child `dump` needs to rebuild the same problem)."""
    drop_value = {"--output", "--save-problem", "--dump-dir", "--target", "--kernel", "--topk"}
    drop_flag = {"run", "--dump-asm", "--verify", "--json", "--force"}
    out, args = [], iter(argv)
    for a in args:
        if a in drop_value:
            next(args, None)  # its value
        elif a not in drop_flag and not any(a.startswith(f + "=") for f in drop_value):
            out.append(a)
    return out


@app.command()
@problem_options
def run(target: Target = None, kernel: KernelSpec = None, output: Output = None, save_problem: SaveProblem = None,
        force: Force = False, json_: Json = False, dump_asm: DumpAsm = False, dump_dir: DumpDir = "dumps",
        verify: Verify = False, topk: TopK = None, *, problem):
    """Run the kernel dispatch selects on the problem (built-in default, flags or --input) and time it.

    Examples: `mqa-logits run --seq 4096 --verify`; `mqa-logits run --dump-asm` (no GPU: the kernel compiled
    for sm90); `mqa-logits run --paged --batch 8 --context-len 8192 --logits-dtype bf16`;
    `mqa-logits run --seq 4096 --heads 8 --kernel gluon_ws_sm90:TMA_STORE=1 --verify` (a config variant).
    """
    from ..launch import interpreter

    interpreter.enable_if_no_gpu()
    from ..bench import calls, timing
    from ..errors import UserError
    from ..inspect import dump as asm_dump
    from ..plan import dispatch, targets
    from ..problem import io, source
    from . import report

    for path in (output, save_problem):
        if path is not None:
            io.check_tensor_file(path, force)
    if dump_asm:
        io.check_dump_dir(dump_dir)
    here = targets.detect()
    run_tgt = here
    dump_target = target or asm_dump.DEFAULT_DUMP_TARGET
    if target is not None and target != here.name:
        if not (dump_asm and not here.is_gpu):
            raise UserError(f"cannot run on {target}: this machine has {here.name}; `mqa-logits dump --target "
                            f"{target}` compiles for it without running")
    device = targets.device_for(run_tgt)
    prob = source.from_options(problem, run_tgt.fp8)
    plan = dispatch.plan_spec(prob.shape, run_tgt, kernel, force=force)
    if dump_asm:
        asm_dump.check_folder(run_tgt, plan, dump_dir, force)
    # with --topk (prefill) the bounded plan's bytes stand in for the logits buffer
    held = (report.topk_memory(prob, topk, run_tgt)["total_bytes"] if topk is not None and prob.shape.kind == "prefill"
            else None)
    prob.check_fits(device, reference_size=4 if verify and topk is None else 0, logits_bytes=held)
    t = prob.materialise(device)
    if save_problem:
        io.save_tensors(save_problem, t.as_dict(), force)
    result = {"problem": report.counts_dict(prob.counts), "label": prob.label, "target": run_tgt.name,
              "kernel": plan.chosen.row.name, "kernel_name": plan.config.name, "config": plan.config.as_dict()}
    if topk is not None:
        from ..check import recall as indexer

        call = indexer.topk_call(t, prob.shape, topk, prob.max_seqlen_k)
    else:
        call = calls.kernel_only(t, plan.config, prob.max_seqlen_k)
    tm, out = timing.time_and_result(call, run_tgt.is_gpu)
    result.update({"time_us": tm.median_us, "p20_us": tm.p20_us, "p80_us": tm.p80_us, "timing": tm.method,
                   "tflops": timing.tflops(prob.counts.flop, tm.median_us), "output": output,
                   "saved_problem": save_problem})
    if output:
        io.save_tensors(output, {"indices": out[0], "values": out[1]} if topk is not None else {"logits": out}, force)
    check = None
    if verify:
        from ..check import verify as V

        if topk is not None:
            from ..check import recall as indexer

            check = indexer.recall(t, prob.shape, topk, out[0])
        else:
            check = V.check_output(out, t, prob.shape.clean_logits, prob.max_seqlen_k)
        result["verify"] = check.as_dict()
    if dump_asm:
        if run_tgt.is_gpu and target in (None, run_tgt.name):
            result["dump"] = asm_dump.dump_launched(run_tgt, plan, prob.label, dump_dir, force)
        else:
            overrides = kernel[kernel.index(":"):] if kernel and ":" in kernel else ""  # the run's row, its overrides
            result["dump"] = asm_dump.dump_for_target(_problem_argv(sys.argv[1:]), dump_target,
                                                      plan.chosen.row.name + overrides, dump_dir, force)
    if json_:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(report.summary_text(prob.label, prob.counts))
        print(f"kernel   {plan.chosen.row.name} → {plan.config.name} on {run_tgt.name}")
        print(f"time     {tm.median_us:.1f} µs ({tm.method}; p20-p80 {tm.p20_us:.1f}-{tm.p80_us:.1f})")
        print(f"rate     {result['tflops']:.1f} TFLOP/s over live FLOP")
        if check is not None:
            print(f"verify   {check.line()}")
        for label, path in (("problem", save_problem), ("output", output)):
            if path:
                print(f"saved {label} to {path}", file=sys.stderr)
        if dump_asm:
            from ..inspect.asm import summary_table

            d = result["dump"]
            print(f"\nwrote    {d['dump_dir']}/ (compiled for {d['target']})\n" + summary_table(d["summary"]))
    if check is not None and not check.ok:
        raise typer.Exit(1)
