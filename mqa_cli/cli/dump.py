"""`mqa-logits dump`: compile the dispatched kernel for any target (no GPU needed), write every stage, summarise."""
from __future__ import annotations

import json
import sys
from typing import Annotated, Optional, Tuple

import typer

from .app import app
from .options import Force, Json, KernelSpec, Target, problem_options

DumpDir = Annotated[str, typer.Option("--dump-dir", help="folder that receives <target>/<kernel name>_w<warps>_s<stages>/")]
Stage = Annotated[Optional[str], typer.Option(
    "--stage", help="print only this stage to stdout (writes nothing): ttir | ttgir | llir | ptx | sass (CUDA) | "
                    "amdgcn (AMD)")]
Diff = Annotated[Optional[Tuple[str, str]], typer.Option(
    "--diff", help="compile two kernels and print their summaries side by side (writes nothing); each is a row "
                   "name with optional overrides as for --kernel, e.g. --diff tiled tiled:BLOCK_KV=128,num_warps=8")]


def _row_config(spec, tgt, prob, force):
    """(dispatch row, config) a --kernel spec names: the row planned for the problem, its overrides applied."""
    from ..plan import dispatch
    from ..plan.overrides import apply_overrides, split_kernel_spec

    name, overrides = split_kernel_spec(spec)
    plan = dispatch.plan(prob.shape, tgt, kernel=name, force=force)
    return plan.chosen.row.name, apply_overrides(plan.config, overrides)


def _cache_note(art, cache_dir: str) -> str:
    how = "cache hit" if art.cache_hit else "compiled"
    return f"triton cache {cache_dir} ({how}, {art.seconds:.2f} s)"


@app.command()
@problem_options
def dump(target: Target = None, kernel: KernelSpec = None, dump_dir: DumpDir = "dumps", stage: Stage = None,
         diff: Diff = None, force: Force = False, json_: Json = False, *, problem):
    """Compile the kernel dispatch selects (or --kernel) for --target without running it, on any machine.

    Writes ttir, ttgir, llir, then ptx + cubin + sass (CUDA) or amdgcn + hsaco (AMD) and manifest.json into
    DUMP_DIR/<target>/<kernel name>_w<warps>_s<stages>/ (an existing non-empty folder needs --force), then prints the
    summary: registers, spills, stack/local/shared memory, warps, stages and the instruction mix (tensor-core,
    global and shared loads/stores, shuffles, max/relu); on CUDA also each tensor-core loop's length and mix (what
    a tile costs the tensor cores); on AMD a static cost model of each matrix-core loop (MFMA, VALU, LDS, memory
    and scalar counts, the cycles each unit needs a trip, the bound, cycles per 1.05 MFLOP and FLOP per cycle; a
    model, not a timing: its costs are printed with it). Triton's cache makes a repeated dump cheap.

    Examples: `mqa-logits dump --target sm90 --seq 4096`;
    `mqa-logits dump --target gfx950 --seq 8192 --stage amdgcn`;
    `mqa-logits dump --target sm90 --diff tiled tiled:BLOCK_KV=128,num_warps=8`.
    """
    from ..inspect import compile as comp

    comp.prepare()  # before anything imports triton: the interpreter stays off in this process
    from ..errors import UserError
    from ..inspect import asm as inspect_asm
    from ..plan import targets
    from ..problem import source

    tgt = targets.resolve(target)
    if not tgt.is_gpu:
        raise UserError("target cpu runs the Triton interpreter: nothing is compiled there; "
                        "pick --target sm90, sm100, gfx942 or gfx950")
    if stage is not None:
        if stage not in comp.TEXT_STAGES:
            raise UserError(f"unknown stage {stage!r}; choose one of {', '.join(comp.TEXT_STAGES)}")
        if stage not in comp.STAGES[tgt.backend]:
            have = [s for s in comp.STAGES[tgt.backend] if s in comp.TEXT_STAGES]
            raise UserError(f"{tgt.name} ({tgt.backend}) has no {stage} stage; it has {', '.join(have)}")
    if diff is not None and (kernel is not None or stage is not None):
        raise UserError("--diff names both kernels itself; drop --kernel / --stage")
    prob = source.from_options(problem, tgt.fp8)
    cache_dir = comp.cache_dir()
    if stage is None and diff is None:
        from ..problem import io

        io.check_dump_dir(dump_dir)

    if diff is not None:
        arts = [comp.compile_config(tgt, cfg, prob.shape, row, prob.label)
                for row, cfg in (_row_config(spec, tgt, prob, force) for spec in diff)]
        sums = [inspect_asm.summarize(a) for a in arts]
        for a in arts:
            print(_cache_note(a, cache_dir), file=sys.stderr)
        if json_:
            print(json.dumps({"a": sums[0], "b": sums[1]}, indent=2, default=str))
        else:
            print(inspect_asm.diff_table(*sums))
        return

    row, cfg = _row_config(kernel, tgt, prob, force)
    if stage is None:  # refuse before compiling
        comp.check_folder(comp.dump_folder_for(dump_dir, tgt.name, cfg), force)
    art = comp.compile_config(tgt, cfg, prob.shape, row, prob.label)
    if stage is not None or json_:
        print(_cache_note(art, cache_dir), file=sys.stderr)
    if stage is not None:
        sys.stdout.write(art.stages[stage])
        return
    summary = inspect_asm.summarize(art)
    if tgt.backend == "hip":  # AMD: the static cost model of each matrix-core loop (no card here to time it)
        from ..inspect import amdgcn_model

        summary["cost_model"] = {"loops": amdgcn_model.model(art.stages.get("amdgcn", ""), tgt.name),
                                 "assumes": amdgcn_model.cost_note(tgt.name)}
    folder, files = comp.write_dump(art, dump_dir, force=force, summary=summary)
    if json_:
        print(json.dumps({"dump_dir": str(folder), "files": files, "cache_dir": cache_dir,
                          "cache_hit": art.cache_hit, "compile_s": art.seconds, "problem": prob.label,
                          "summary": summary}, indent=2, default=str))
        return
    stem = art.cfg.name + "."
    print(f"problem  {prob.label}")
    print(f"wrote    {folder}/")
    print(f"         {' '.join(f[len(stem):] if f.startswith(stem) else f for f in files)}")
    print(f"cache    {_cache_note(art, cache_dir).removeprefix('triton cache ')}")
    print()
    print(inspect_asm.summary_table(summary))
    if "cost_model" in summary:
        from ..inspect import amdgcn_model

        print()
        print(amdgcn_model.table(summary["cost_model"]["loops"], tgt.name))
    print()

