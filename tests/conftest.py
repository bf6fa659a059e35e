"""Test setup: on a machine without a GPU the kernels run through the Triton interpreter, switched on here
before any kernel module is imported (importing the library changes nothing)."""
import os
import subprocess
import sys

import pytest

from mqa_cli.launch import interpreter

interpreter.enable_if_no_gpu(note=False)

# The README's command runs each file whole on one worker (`-n 2 --dist loadfile`), so a module's fixtures (one
# batch of CLI runs, one set of compiles) run once.
# The larger matrices (more compiled variants, more random problems, the wider adversarial sweeps) are marked
# `heavy`: the README's test command skips them, CI runs them after it (`MQA_LOGITS_HEAVY=1 pytest -m heavy`).
RUN_HEAVY = os.environ.get("MQA_LOGITS_HEAVY") == "1"
HEAVY = pytest.mark.heavy


def some_heavy(params, keep, ids=None):
    """`params` for parametrize with all but the indices in `keep` marked heavy: the everyday run checks the
    representative cases, CI's heavy run every one. A tuple is one value per argument name (a 1-tuple for one
    argument whose values are tuples)."""
    out = []
    for i, p in enumerate(params):
        p = p if isinstance(p, tuple) else (p,)
        kw = {"id": ids(p if len(p) > 1 else p[0]) if callable(ids) else ids[i]} if ids else {}
        out.append(pytest.param(*p, **kw) if i in keep else pytest.param(*p, marks=HEAVY, **kw))
    return out


def pytest_collection_modifyitems(config, items):
    if RUN_HEAVY or "heavy" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="a heavy matrix: MQA_LOGITS_HEAVY=1 pytest -m heavy (CI runs it)")
    for item in items:
        if item.get_closest_marker("heavy"):
            item.add_marker(skip)


def cli(*args, env_extra=None, cwd=None, timeout=600):
    """Run `python -m mqa_cli ARGS` in a subprocess; returns CompletedProcess with text output."""
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "mqa_cli", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)


@pytest.fixture
def run_cli():
    return cli


def assert_one_line_error(proc, code=2, contains=None):
    """Bad input: exit code 2, one line on stderr, no traceback."""
    err = proc.stderr.strip()
    assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], err[-2000:])
    assert "Traceback" not in err and "Traceback" not in proc.stdout
    lines = [line for line in err.splitlines() if not line.startswith("note:")]
    assert len(lines) == 1, err
    if contains:
        assert contains in lines[0], lines[0]
    return lines[0]
