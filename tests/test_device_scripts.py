"""The tools that run on the H200 in one device call (tools/, tools/tune/): what can go wrong in them is checked
here, without a GPU, because a failure there costs device time."""
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from .conftest import HEAVY

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools"
CHECK = (TOOLS / "h200_check.sh").read_text()


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "H200_", "SAN_"))}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"  # this python3 first, as on the device
    env.update(extra)
    return env


def test_every_step_has_its_function_a_time_cap_and_a_least_time():
    """A step runs in a child bash (time-boxed) as step_NAME, or as one file of tests/gpu through step_checks; the
    child is given every function of the script. A step without its function or bounds fails only on the device,
    after the machine was started for it."""
    cap = set(re.findall(r"\[(\w+)\]=\d+", re.search(r"declare -A CAP=\(([^)]*)\)", CHECK).group(1)))
    least = set(re.findall(r"\[(\w+)\]=\d+", re.search(r"declare -A MIN=\(([^)]*)\)", CHECK).group(1)))
    assert {"engines", "forms", "ab", "anchor", "sanitize", "install"} <= cap and cap == least
    defined = set(re.findall(r"^step_(\w+)\(\)", CHECK, flags=re.M))
    checks = set(re.findall(r"GPU_FILE_(\w+)=", CHECK)) | {"hostcost"}
    assert 'if [ "$1" = hostcost ]' in CHECK and checks.isdisjoint(defined)
    assert cap <= defined | checks, f"no function: {sorted(cap - defined - checks)}"
    assert "export -f $(compgen -A function)" in CHECK


def test_every_shell_tool_parses():
    for sh in sorted(TOOLS.glob("*.sh")):
        r = subprocess.run(["bash", "-n", str(sh)], capture_output=True, text=True)
        assert r.returncode == 0, f"{sh.name}: {r.stderr}"


def test_every_python_tool_compiles_and_imports_without_a_gpu(tmp_path):
    """Each tool imports on a CPU machine (its work starts in main): a NameError or a missing module would surface
    only on the device otherwise."""
    files = sorted(TOOLS.glob("*.py")) + sorted((TOOLS / "tune").glob("*.py"))
    for f in files:
        compile(f.read_text(), str(f), "exec")
    code = textwrap.dedent('''
        import importlib.util, sys
        bad = []
        for path in sys.argv[1:]:
            folder = path.rsplit("/", 1)[0]
            sys.path.insert(0, folder)
            try:
                spec = importlib.util.spec_from_file_location(path.rsplit("/", 1)[1][:-3], path)
                mod = importlib.util.module_from_spec(spec)
                sys.modules[spec.name] = mod
                spec.loader.exec_module(mod)
            except BaseException as e:
                bad.append(f"{path}: {type(e).__name__}: {e}")
            finally:
                sys.path.remove(folder)
        print("\\n".join(bad))
        sys.exit(1 if bad else 0)
    ''')
    r = subprocess.run([sys.executable, "-c", code, *map(str, files)], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path, env=_env(OUT=str(tmp_path), PAGED_SMOKE="1"))
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]
    assert len(files) >= 5


def test_the_ab_tool_names_its_modes_and_needs_two_variants():
    r = subprocess.run([sys.executable, str(TOOLS / "ab.py"), "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and all(m in r.stdout for m in ("configs", "decode", "prefill", "drafts"))
    sys.path.insert(0, str(TOOLS))
    try:
        import ab
    finally:
        sys.path.pop(0)
    assert ab.variants("PTX_SLOTS=0;PTX_SLOTS=1") == ["PTX_SLOTS=0", "PTX_SLOTS=1"]
    assert ab.variants(";PTX_SLOTS=1") == ["", "PTX_SLOTS=1"]  # an empty variant: the table's own config
    try:
        ab.variants("STAGES=4")
    except SystemExit as e:
        assert "two or more" in str(e)
    else:
        raise AssertionError("one variant was taken")
    args = ab.parser().parse_args(["configs", "--row", "paged_ws_sm90", "--variants", "A=1;A=1"])
    assert args.rounds == 6 and args.next_n == "1,2" and "4096:8192" in args.shapes and args.form == "clean"
    args = ab.parser().parse_args(["configs", "--row", "gluon_ws_sm90", "--variants", ";A=1", "--form", "compressed"])
    assert args.form == "compressed"
    args = ab.parser().parse_args(["drafts"])  # vLLM's B 8-128 at C 8K and 64K, next_n 3 and 6
    assert args.next_n == "3,6" and args.shapes.split(",")[0] == "8:8192" and "128:65536" in args.shapes


def _fake_bundle(tmp_path, version: str) -> Path:
    src = tmp_path / "src" / "triton"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text(f"__version__ = {version!r}\n")
    (tmp_path / "tb" / version).mkdir(parents=True)
    subprocess.run(["tar", "-C", str(src.parent), "-cJf", str(tmp_path / "tb" / version / f"triton-{version}.tar.xz"),
                    "triton"], check=True)
    return tmp_path / "tb"


def test_h200_check_runs_under_the_triton_of_a_carried_bundle(tmp_path):
    """H200_TRITON=V: the bundle is unpacked ahead of the image's triton, python3 imports V and every file of the call
    lands in $OUT/V/; the ptxas named is the caller's, else the one packed beside the bundle (tools/carry.sh:
    ptxas-sm90.xz, named for both of triton's ptxas settings, so the device compiles as the release's wheel does)."""
    import shutil

    tb = _fake_bundle(tmp_path, "9.8.7")
    out = tmp_path / "out"
    r = subprocess.run(["bash", str(TOOLS / "h200_check.sh"), "env"], capture_output=True, text=True, timeout=120,
                       env=_env(H200_TRITON="9.8.7", H200_BUNDLES=str(tb), H200_BUDGET_S="3", OUT=str(out),
                                TRITON_PTXAS_PATH="/fake/ptxas"))
    assert "triton 9.8.7 from " in r.stdout and "ptxas /fake/ptxas" in r.stdout, r.stdout + r.stderr
    assert "env: SKIP" in r.stdout  # the 3 s budget leaves nothing to run: only the selection and the summary
    assert (out / "9.8.7" / "summary.txt").exists() and "triton 9.8.7" in (out / "9.8.7" / "summary.txt").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["9.8.7"]
    shutil.rmtree("/tmp/tb-9.8.7", ignore_errors=True)
    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\necho 'Build cuda_99.9.r99.9/compiler.1_0'\n")
    subprocess.run(f"xz -c {fake} > {tb / '9.8.7' / 'ptxas-sm90.xz'}", shell=True, check=True)
    env = _env(H200_TRITON="9.8.7", H200_BUNDLES=str(tb), H200_BUDGET_S="3", OUT=str(out))
    r = subprocess.run(["bash", str(TOOLS / "h200_check.sh"), "env"], capture_output=True, text=True, timeout=120,
                       env=env)
    assert "ptxas /tmp/tb-9.8.7/ptxas-sm90)" in r.stdout, r.stdout + r.stderr
    assert "cuda_99.9" in subprocess.run(["/tmp/tb-9.8.7/ptxas-sm90"], capture_output=True, text=True).stdout
    shutil.rmtree("/tmp/tb-9.8.7", ignore_errors=True)


def test_wheel_ptxas_takes_the_binary_the_release_compiles_sm90_with(tmp_path):
    """3.8's get_ptxas picks ptxas below arch 100, 3.9's ptxas-blackwell for every arch: wheel_ptxas.sh reads that
    from the release's own backend and packs that binary, refusing a site that holds another release."""
    bodies = {"3.8.0": "    return knobs.nvidia.ptxas_blackwell if arch >= 100 else knobs.nvidia.ptxas\n",
              "3.9.0": "    # the name is misleading\n    return knobs.nvidia.ptxas_blackwell\n"}
    for ver, body in bodies.items():
        site = tmp_path / ver
        nv = site / "triton" / "backends" / "nvidia"
        (nv / "bin").mkdir(parents=True)
        (site / "triton" / "__init__.py").write_text(f"__version__ = '{ver}'\n")
        (nv / "compiler.py").write_text(f"def get_ptxas(arch: int):\n{body}\n\ndef other():\n    pass\n")
        for name in ("ptxas", "ptxas-blackwell"):
            (nv / "bin" / name).write_text(f"#!/bin/sh\necho 'Build {name}'\n")
        xz = tmp_path / f"{ver}.xz"
        r = subprocess.run(["bash", str(TOOLS / "wheel_ptxas.sh"), ver, str(xz)], capture_output=True, text=True,
                           timeout=60, env=_env(TRITON_SITE=str(site)))
        assert r.returncode == 0, r.stdout + r.stderr
        packed = subprocess.run(["xz", "-dc", str(xz)], capture_output=True, text=True, check=True).stdout
        want = "ptxas-blackwell" if ver == "3.9.0" else "ptxas"
        assert f"echo 'Build {want}'" in packed and f"with {want} " in r.stdout, r.stdout
    r = subprocess.run(["bash", str(TOOLS / "wheel_ptxas.sh"), "3.7.0", str(tmp_path / "x.xz")], capture_output=True,
                       text=True, timeout=60, env=_env(TRITON_SITE=str(tmp_path / "3.8.0")))
    assert r.returncode == 2 and "holds triton 3.8.0" in r.stdout


def test_h200_check_marks_a_timing_step_run_beside_a_background_step():
    """A timed step (ab, forms, ...) that starts while a background step (sanitize+) still runs gets a warning and
    a marked summary row; a finished background step marks nothing."""
    text = (TOOLS / "h200_check.sh").read_text()
    start = text.index("BG_NAMES=()")
    fn = text[start:text.index("\n}\n", text.index("beside_background() {")) + 3]
    script = fn + """
sleep 5 & BG_PIDS+=($!); BG_NAMES+=(sanitize)
true & BG_PIDS+=($!); BG_NAMES+=(large); wait $!
echo "running: [$(beside_background)]"
[[ "$TIMED" == *" ab "* ]] && echo "ab is timed"; [[ "$TIMED" == *" sanitize "* ]] || echo "sanitize is not"
kill %1
"""
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert "running: [sanitize]" in r.stdout and "ab is timed" in r.stdout and "sanitize is not" in r.stdout, r.stdout
    assert 'key="[timed beside $BESIDE: not for comparison] $key"' in text


def test_h200_check_stops_when_the_asked_triton_is_not_there(tmp_path):
    r = subprocess.run(["bash", str(TOOLS / "h200_check.sh"), "env"], capture_output=True, text=True, timeout=120,
                       env=_env(H200_TRITON="9.0.1", H200_BUNDLES=str(tmp_path), OUT=str(tmp_path / "out")))
    assert r.returncode == 2 and "no bundle at" in r.stdout and "GPU-PLAN" in r.stdout
    assert not (tmp_path / "out").exists()


FAKE_SANITIZER = r'''#!/usr/bin/env bash
# compute-sanitizer stand-in: runs the program, then writes a racecheck report naming LINE of FILE
if [ "$1" = --help ]; then echo "--target-processes --report-api-errors --print-limit --racecheck-report"; exit 0; fi
if [ "$1" = --version ]; then echo "fake version 0"; exit 0; fi
tool="" log=""
while [ $# -gt 0 ]; do
  case $1 in
    --tool) tool=$2; shift 2 ;;
    --log-file) log=$2; shift 2 ;;
    --target-processes|--report-api-errors|--print-limit|--racecheck-report) shift 2 ;;
    *) break ;;
  esac
done
"$@"
rc=$?
{
  for i in 1 2 3; do echo "========= Write Thread (31,0,0) at 0x1f0 in kernel.py:$FAKE_LINE"; done
  echo "========= Read Thread (0,0,0) at 0x2a0 in kernel.py:$FAKE_LINE"
  echo "========= RACECHECK SUMMARY: 4 hazards displayed (0 errors, 4 warnings)"
} >"$log"
exit $rc
'''


def _race_lines(row: str, log: Path) -> subprocess.CompletedProcess:
    """gpu_sanitize.sh's race_lines function alone, on a racecheck log."""
    text = (TOOLS / "gpu_sanitize.sh").read_text()
    fn = text[text.index("race_lines() {"):text.index("\n}\n", text.index("race_lines() {")) + 3]
    return subprocess.run(["bash", "-c", f"{fn}\nrace_lines {row} {log}"], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env=_env(PY=sys.executable))


def _kernel_lines(row: str) -> tuple[int, int, int]:
    """(the kernel's `def` line, its warp_specialize line or 0, an ordinary line) of kernels/<op>/<row>/kernel.py."""
    src = next((ROOT / "kernels").glob(f"*/{row}/kernel.py")).read_text().splitlines()
    entry = next(i for i, line in enumerate(src, 1) if line.startswith("def "))
    ws = next((i for i, line in enumerate(src, 1) if "gl.warp_specialize(" in line), 0)
    other = next(i for i, line in enumerate(src, 1) if line.strip().startswith("return "))
    return entry, ws, other


def test_racecheck_lines_are_counted_and_only_the_explained_ones_pass(tmp_path):
    """racecheck's reports are counted per (access, source line); a run passes as the known pattern only when every
    line they name is the kernel's `def` line or its warp_specialize call (the partition table the kernel explains)."""
    entry, ws, other = _kernel_lines("paged_ws_sm90")
    log = tmp_path / "race.log"
    log.write_text("".join(f"========= Write Thread (31,0,0) at 0x1f0 in kernel.py:{entry}\n" for _ in range(3))
                   + f"========= Read Thread (0,0,0) at 0x20 in kernel.py:{ws}\nRACECHECK SUMMARY: 4 hazards\n")
    r = _race_lines("paged_ws_sm90:PTX_SLOTS=1", log)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(rf"3 Write kernel.py:{entry} .*\[the kernel's entry line\]", r.stdout), r.stdout
    assert re.search(rf"1 Read  kernel.py:{ws} .*\[its warp_specialize call\]", r.stdout), r.stdout
    log.write_text(log.read_text() + f"========= Read Thread (5,0,0) at 0x40 in kernel.py:{other}\n")
    r = _race_lines("paged_ws_sm90", log)
    assert r.returncode == 1 and f"kernel.py:{other}" in r.stdout and "NOT EXPLAINED" in r.stdout
    # triton 3.6 names the branch line above the call (`if MATH_WG == 1:`); another `if` line is not explained
    branch = ws - 1
    src = next((ROOT / "kernels").glob("*/paged_ws_sm90/kernel.py")).read_text().splitlines()
    assert src[branch - 1].strip().endswith(":"), src[branch - 1]
    log.write_text(f"========= Write Thread (31,0,0) at 0x1f0 in kernel.py:{branch}\nRACECHECK SUMMARY: 1 hazards\n")
    r = _race_lines("paged_ws_sm90", log)
    assert r.returncode == 0 and "[the branch of its warp_specialize call]" in r.stdout, r.stdout + r.stderr
    other_if = next(i for i, line in enumerate(src, 1)
                    if line.strip().startswith("if ") and "warp_specialize(" not in src[i])
    log.write_text(f"========= Write Thread (31,0,0) at 0x1f0 in kernel.py:{other_if}\nRACECHECK SUMMARY: 1 hazards\n")
    assert _race_lines("paged_ws_sm90", log).returncode == 1
    log.write_text("RACECHECK SUMMARY: 4 hazards\n")  # hazards but no line read: never passes as known
    assert _race_lines("paged_ws_sm90", log).returncode == 1


@HEAVY
def test_the_sanitizer_pass_counts_a_known_racecheck_pattern_as_clean(tmp_path):
    """The whole pass on CPU, through a stand-in compute-sanitizer that reports hazards at the kernel's `def` line:
    the run is KNOWN in the table, its lines are listed, and the pass exits 0."""
    fake = tmp_path / "compute-sanitizer"
    fake.write_text(FAKE_SANITIZER)
    fake.chmod(0o755)
    entry = _kernel_lines("tiled")[0]
    out = tmp_path / "out"
    r = subprocess.run(["bash", str(TOOLS / "gpu_sanitize.sh"), "racecheck"], capture_output=True, text=True,
                       timeout=600, env=_env(SAN_SMOKE="1", CS=str(fake), FAKE_LINE=str(entry), SAN_ROWS="tiled",
                                             SAN_EXTRA="0", SAN_VARIANTS="0", OUT=str(out), PY=sys.executable,
                                             SAN_LOGS=str(tmp_path / "logs")))
    report = (out / "sanitize.txt").read_text()
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert re.search(r"\| racecheck \| tiled .*\| KNOWN", report), report
    assert re.search(rf"\s+3 Write kernel.py:{entry} .*\[the kernel's entry line\]", report), report
    assert "1 of them racecheck's known pattern only" in report


def test_the_gpu_steps_run_the_gpu_tests_and_they_skip_cleanly_without_a_gpu():
    """h200_check.sh's check steps name files of tests/gpu that exist, and on this CPU machine `pytest -m gpu`
    collects every one of them without an error and skips them all (the README's CPU run is unaffected)."""
    files = set(re.findall(r"GPU_FILE_\w+=(test_\w+)", CHECK))
    assert files and all((ROOT / "tests" / "gpu" / f"{f}.py").exists() for f in files), files
    assert "pytest -m gpu -q -p no:cacheprovider -rfEs -n \"${GPU_WORKERS:-8}\" tests/gpu" in CHECK
    r = subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "tests/gpu"],
                       capture_output=True, text=True, timeout=600, cwd=ROOT, env=_env(CUDA_VISIBLE_DEVICES=""))
    tail = r.stdout.strip().splitlines()[-1]
    assert r.returncode == 0 and re.fullmatch(r"\d+ skipped(, \d+ warnings?)? in [\d.]+s( \(.*\))?", tail), r.stdout[-3000:]
    assert int(tail.split()[0]) > 300 and "error" not in tail


@HEAVY
def test_the_ab_tool_checks_the_api_forms_on_cpu(tmp_path):
    """tools/ab.py prefill / decode / drafts with --smoke: every form is called and checked (against the float32
    reference, or bitwise against the first form; drafts: flattened rows against native next_n, native against the
    reference) through the interpreter, and the table and its CSV are written."""
    for args, dtype in ((["prefill", "--smoke"], "fp32"), (["prefill", "--smoke", "--dtype", "bf16"], "bf16"),
                        (["decode", "--smoke", "--shapes", "3:70", "--next-n", "2", "--forms", "none,given,half"], "fp32"),
                        (["drafts", "--smoke", "--shapes", "3:70", "--next-n", "3,6"], "fp32")):
        r = subprocess.run([sys.executable, str(TOOLS / "ab.py"), *args], capture_output=True, text=True,
                           timeout=600, cwd=ROOT, env=_env(OUT=str(tmp_path)))
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        rows = [ln for ln in r.stdout.splitlines() if ln.startswith("| ") and not ln.startswith(("| shape", "| B "))]
        checks = [ln.split("|")[-3].strip() for ln in rows]
        if args[0] == "drafts":
            assert len(rows) == 2 and all(re.fullmatch(r"flattened \S+; ref \S+", c) for c in checks), r.stdout
        else:
            assert rows and all(c == "ok" for c in checks), r.stdout
        assert (tmp_path / f"ab_{args[0]}_{dtype}.csv").read_text().count("\n") == len(rows) + 1
