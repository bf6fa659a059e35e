"""Many `python -m mqa_cli ARGS` runs in one child process, each judged as if it had its own.

Starting the command costs about 3.5 s of CPU (torch, triton, the CLI) before it does anything; a test file that
checks twenty bad inputs spent a minute on that alone. run_many() runs the cases in order in one child: each case's
file descriptors 1 and 2 go to its own files (so C-level and Python output both count, as in a process of its own),
its exit status is what SystemExit carried (or 1 and the traceback for an exception that escaped), and os.environ is
restored after it. A case that kills the child (a signal, os._exit) is reported with the child's exit status and
whatever it had written, and the cases after it run in a fresh child; a case past its time budget is killed and
reported the same way (returncode None). Cases share imports and module state, so a batch holds either compiles
(`dump`) or kernel runs (`run`, `verify`, `bench`), never both: a process that imported triton in interpreter mode
cannot compile (and `explain` goes with either).

`python tests/cli_batch.py DIR` is the child: it reads DIR/cases.json and writes DIR/<i>.out, DIR/<i>.err and one
line of DIR/results.jsonl per case.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS_KERNELS = {"run", "verify", "bench"}


def run_many(cases: dict, env_extra: dict | None = None, timeout: float = 600, cwd=None, module: str = "mqa_cli") -> dict:
    """{name: argv} -> {name: subprocess.CompletedProcess}, in the dict's order, with `python -m mqa_cli` as args.
    env_extra applies to every case (TRITON_INTERPRET is left out, as conftest.cli does: the CLI decides); timeout
    is each case's budget in seconds; module is what runs as `python -m` (tests/test_cli_batch.py's stand-ins)."""
    commands = {str(a[0]) for a in cases.values() if a}
    if "dump" in commands and commands & RUNS_KERNELS:
        raise ValueError("a batch holds compiles (dump) or kernel runs (run, verify, bench), not both")
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    env.update(env_extra or {})
    names = list(cases)
    argvs = {n: [str(a) for a in cases[n]] for n in names}
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="mqa-cli-batch-") as tmp:
        todo = names
        while todo:
            d = Path(tmp) / str(len(results))
            d.mkdir()
            (d / "cases.json").write_text(json.dumps({"module": module, "cases": [argvs[n] for n in todo]}))
            with open(d / "child.err", "w") as child_err:
                proc = subprocess.Popen([sys.executable, __file__, str(d)], env=env, cwd=cwd,
                                        stdout=subprocess.DEVNULL, stderr=child_err)
                hung = _wait(proc, d / "results.jsonl", timeout)
            child_err = (d / "child.err").read_text(errors="replace")
            lines = (d / "results.jsonl").read_text().splitlines() if (d / "results.jsonl").exists() else []
            done = [json.loads(line) for line in lines]
            for r in done:
                n = todo[r["i"]]
                results[n] = _completed(module, argvs[n], r["rc"], d, r["i"], r["s"])
            if len(done) < len(todo):  # the next case ended the child (or outlived its budget)
                i = len(done)
                n = todo[i]
                results[n] = _completed(module, argvs[n], None if hung else proc.returncode, d, i, None,
                                        extra_err=child_err)
                todo = todo[i + 1:]
            else:
                if proc.returncode:  # the child failed on its way out, after the last case: that case's process would
                    last = results[todo[-1]]
                    last.returncode, last.stderr = proc.returncode, last.stderr + child_err
                todo = []
    return {n: results[n] for n in names}


def _wait(proc, log: Path, timeout: float) -> bool:
    """Wait for the child, giving each case `timeout` seconds from the end of the one before; True if one outlived
    it (the child is killed)."""
    done, deadline = 0, time.monotonic() + timeout
    while proc.poll() is None:
        n = log.read_text().count("\n") if log.exists() else 0
        if n > done:
            done, deadline = n, time.monotonic() + timeout
        elif time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            return True
        time.sleep(0.05)
    return False


def _completed(module, argv, rc, d: Path, i: int, seconds, extra_err: str = "") -> subprocess.CompletedProcess:
    out = (d / f"{i}.out").read_text(errors="replace") if (d / f"{i}.out").exists() else ""
    err = (d / f"{i}.err").read_text(errors="replace") if (d / f"{i}.err").exists() else ""
    p = subprocess.CompletedProcess([sys.executable, "-m", module, *argv], rc, out, err + extra_err)
    p.seconds = seconds  # the case's own time in the child (None: it did not finish)
    return p


def _child(d: Path) -> None:
    import runpy
    import traceback

    spec = json.loads((d / "cases.json").read_text())
    module, cases = spec["module"], spec["cases"]
    log = open(d / "results.jsonl", "a")
    for i, argv in enumerate(cases):
        env = dict(os.environ)
        sys.stdout.flush(), sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        out = os.open(d / f"{i}.out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        err = os.open(d / f"{i}.err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1), os.dup2(err, 2)
        sys.argv = [module, *argv]
        t0 = time.perf_counter()
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            rc = 0
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        except BaseException:  # noqa: BLE001  what the interpreter would print before exiting 1
            traceback.print_exc()
            rc = 1
        sys.stdout.flush(), sys.stderr.flush()
        os.dup2(saved[0], 1), os.dup2(saved[1], 2)
        for fd in (out, err, *saved):
            os.close(fd)
        os.environ.clear()
        os.environ.update(env)
        log.write(json.dumps({"i": i, "rc": rc, "s": round(time.perf_counter() - t0, 3)}) + "\n")
        log.flush()


if __name__ == "__main__":
    sys.path[0] = os.getcwd()  # as `python -m mqa_cli` has it (not this file's folder)
    _child(Path(sys.argv[1]))
