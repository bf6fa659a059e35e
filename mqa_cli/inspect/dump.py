"""`run --dump-asm`: the asm of the kernel a run used.

On a GPU it is the kernel that ran (the JIT's cache). Without a GPU the run goes through the interpreter,
which compiles nothing, so the kernel is compiled for a target instead (`--target`, or sm90, the GPU the
tool's users run most), in a child process: one process cannot both interpret and compile a kernel.
"""
from __future__ import annotations

import json
import subprocess
import sys

from ..errors import UserError
from . import asm as inspect_asm
from . import compile as comp

DEFAULT_DUMP_TARGET = "sm90"


def check_folder(tgt, plan, dump_dir: str, force: bool) -> None:
    """Before the run: refuse a dump folder we may not write."""
    if tgt.is_gpu:
        comp.check_folder(comp.dump_folder_for(dump_dir, tgt.name, plan.config), force)


def dump_launched(tgt, plan, label: str, dump_dir: str, force: bool) -> dict:
    """After a GPU run: write the asm of the kernel that ran; its folder and summary."""
    compiled = comp.launched_kernel(plan.config)
    art = comp.from_compiled(compiled, tgt, plan.config, plan.chosen.row.name, label)
    summary = inspect_asm.summarize(art)
    folder, _ = comp.write_dump(art, dump_dir, force=force, summary=summary)
    return {"dump_dir": str(folder), "target": tgt.name, "summary": summary}


def dump_for_target(problem_argv: list, target: str, kernel: str, dump_dir: str, force: bool) -> dict:
    """Compile the run's kernel for `target` in a child `mqa-logits dump` (no GPU needed)."""
    cmd = [sys.executable, "-m", "mqa_cli", "dump", *problem_argv, "--target", target, "--kernel", kernel,
           "--dump-dir", dump_dir, "--json"] + (["--force"] if force else [])
    env = {k: v for k, v in __import__("os").environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if not ln.startswith("note:")]
        raise UserError(f"--dump-asm for {target}: {lines[-1] if lines else 'dump failed'}")
    d = json.loads(proc.stdout)
    return {"dump_dir": d["dump_dir"], "target": target, "summary": d["summary"]}
