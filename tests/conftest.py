"""Test setup: on a machine without a GPU the kernels run through the Triton interpreter, switched on here
before any kernel module is imported (importing the library changes nothing)."""
import os
import subprocess
import sys

import pytest

from mqa_cli.launch import interpreter

interpreter.enable_if_no_gpu(note=False)


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
