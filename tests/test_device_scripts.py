"""The scripts that run on the H200 in one device call: what can go wrong in them is checked here, without a GPU,
because a failure there costs device time."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mqa_cli import versions

ROOT = Path(__file__).resolve().parents[1]
CHECK = (ROOT / "scripts" / "h200_check.sh").read_text()


def test_every_step_of_h200_check_is_exported_to_the_shells_that_run_it():
    """Each step runs in a child bash (time-boxed): a step function missing from `export -f` fails with 'command not
    found' on the device, after the machine was started for it."""
    called = set(re.findall(r'^\s+[a-z+]+\) echo "(step_\w+)', CHECK, flags=re.M))
    exported = set(re.search(r"export -f ([^\n]*)", CHECK.split("export -f mqa", 1)[1]).group(1).split())
    assert called, "no step found: the case statement changed form"
    assert called <= exported, f"not exported: {sorted(called - exported)}"
    defined = set(re.findall(r"^(step_\w+)\(\)", CHECK, flags=re.M))
    assert called <= defined, f"not defined: {sorted(called - defined)}"


def test_every_step_has_a_time_cap_and_a_least_time():
    cap = set(re.findall(r"\[(\w+)\]=\d+", re.search(r"declare -A CAP=\(([^)]*)\)", CHECK).group(1)))
    least = set(re.findall(r"\[(\w+)\]=\d+", re.search(r"declare -A MIN=\(([^)]*)\)", CHECK).group(1)))
    steps = set(re.findall(r'^\s+([a-z]+)\) echo "', CHECK, flags=re.M)) - {"env", "install", "tests", "verify"}
    assert steps <= cap and steps <= least, f"missing: {sorted(steps - (cap & least))}"


# (scripts/overlap_probe.py calls gl.thread_barrier itself, not mqa_kernels.gluon_compat: 3.6's names)
@pytest.mark.skipif(not versions.holds("gluon_names_3_6"), reason=versions.FACTS["gluon_names_3_6"].required())
def test_the_overlap_probe_cross_compiles_without_spills_and_takes_turns_without_a_hang():
    """scripts/overlap_probe.py: each variant compiles for sm90 to a wgmma loop without spills; the turn-taking ones
    have their two named barriers in the loop, and no CTA-wide barrier between a warpgroup's first wait for its
    turn and its first wgmma (that hung the H200 once: the warpgroup waiting for its turn never reaches it)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "overlap_probe.py"), "--cpu-compile"], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("G ")]
    assert len(lines) >= 20
    for ln in lines:
        assert "QGMMA 0," not in ln and "spills   0" in ln, ln
        assert ("BAR 2:" in ln) == ln.split(" regs")[0].rstrip().endswith("PP"), ln


def test_the_phase_probe_reads_the_slots_the_kernel_stamps():
    """scripts/decode_phases.py names the clock slots the decode kernel's STAMPS build writes: a slot it reads that
    the kernel never writes would print zeros as a phase, on the GPU."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import decode_phases
    finally:
        sys.path.pop(0)
    src = (ROOT / "kernels" / "paged_ws_sm90" / "kernel.py").read_text()
    written = {int(k) for k in re.findall(r"_(?:stamp|put)\(p, (\d+),", src)}
    read = {k for _, k in decode_phases.PHASES} | {0, 11, 12}  # entry clock, entry and end timers
    assert read <= written, sorted(read - written)
    assert max(written) < 16  # a program's row of the stamps is 16 slots
