"""vLLM's plug-in (mqa_cli.vllm_plugin) against the real vLLM: the tests marked `vllm` load it through vLLM 0.34.0's
own `load_general_plugins()` in a spawned process, each with the parts of .ci/plugin_check.py (what a CPU cannot
give, the card and a bundled DeepGEMM that loads, simulated there and only there). They run where vLLM imports
(CI's vLLM venv: the wheel installed with --no-deps, .ci/run part 2) and are skipped elsewhere.

- the CI check itself: sm90 served, next_n 3 and 6 native, vLLM's wrappers against the float64 reference; unset,
  nothing changes and nothing is printed;
- where the plug-in stands aside (sm100; sm90 whose bundled DeepGEMM cannot load, the real one on this CPU) and
  where it serves but leaves next_n alone (the second variable unset; a vLLM without the names it changes): vLLM
  answers what it answers without the plug-in, and one line says why;
- the variable at 0 or at a value it does not know.

Unmarked: the entry point in the installed metadata, and where the stand-in forwards the names it does not serve
(an installed DeepGEMM, imported before or not; a vendored copy that loads; none): packages written here, since no
DeepGEMM loads on a CPU.

Each check runs in a fresh interpreter started outside the source tree, so that the plug-in comes from the installed
metadata (a stale build's metadata in the source tree would otherwise be read first)."""
import importlib.util
import os
import re
import subprocess
import sys
import textwrap

import pytest

from mqa_cli import vllm_plugin

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECK = os.path.join(ROOT, ".ci", "plugin_check.py")
_spec = importlib.util.spec_from_file_location("plugin_check", CHECK)
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)



def needs_vllm(test):
    """Marked `vllm`, and skipped where vLLM does not import (CI's vLLM venv has it)."""
    skip = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed here")
    return pytest.mark.vllm(skip(test))


def ok(proc, marker):
    assert proc.returncode == 0 and marker in proc.stdout, (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc.stdout


def test_installed_entry_point_is_this_trees_plugin(tmp_path):
    probe = ("from importlib.metadata import entry_points; import mqa_cli; "
             "print([(e.name, e.value) for e in entry_points(group='vllm.general_plugins')], mqa_cli.__file__)")
    out = ok(check.spawn(probe + "; print('PROBE')", {}, str(tmp_path)), "PROBE")
    assert "('mqa_logits', 'mqa_cli.vllm_plugin:register')" in out, \
        f"the installed metadata lacks the plug-in (reinstall: pip install -e .): {out}"
    assert os.path.join(ROOT, "mqa_cli") in out, f"mqa_cli is installed from another tree: {out}"


@needs_vllm
def test_the_ci_check_passes_in_real_vllm(tmp_path):
    """.ci/plugin_check.py: set on a simulated sm90, the stand-in serves vLLM's wrappers right at next_n 3 and 6
    natively and logs one line; unset, nothing at all."""
    proc = subprocess.run([sys.executable, CHECK], capture_output=True, text=True, timeout=900, cwd=str(tmp_path),
                          env={k: v for k, v in os.environ.items() if k not in (check.ENV, check.NATIVE_ENV)})
    ok(proc, "PLUGIN OK")


OLDER_VLLM = "import vllm.utils.deep_gemm as _v\ndel _v._paged_mqa_logits_schedule_slots  # a release without it\n"
CASES = {  # name: (card, bundled copy simulated as one that loads, MQA_LOGITS_NATIVE_NEXT_N, code before loading,
    #                 what the line says, whether the stand-in serves)
    "sm100": (100, True, "1", "", "INFO", "this GPU is sm100", False),
    "sm90, DeepGEMM cannot load": (90, False, "1", "", "WARNING", "DeepGEMM failed to import (OSError", False),
    "sm90, next_n left to vLLM": (90, True, None, "", "INFO", "next_n as vLLM runs it (1, 2, 4 native", True),
    "sm90, another vLLM release": (90, True, "1", OLDER_VLLM, "INFO",
                                   "has no _paged_mqa_logits_schedule_slots", True),
}


@needs_vllm
@pytest.mark.parametrize("case", list(CASES))
def test_vllm_answers_as_without_the_plugin(tmp_path, case):
    """vLLM's has_deep_gemm(), is_deep_gemm_supported(), native next_n and schedule sizing, with the variable set
    and without, are the same: on sm100 and where DeepGEMM cannot load (the real bundled copy on this CPU) the
    stand-in is not put in place; where it serves without native next_n (not asked, or a vLLM without the names
    it changes) only the module vLLM calls differs. One line says which and why."""
    card, bundled, native, before, level, says, serves = CASES[case]
    code = check.program(before, check.LOAD, check.ANSWERS, card=card, bundled=bundled)
    env = {check.NATIVE_ENV: native} if native else {}
    on, off = (check.spawn(code, {**env, **extra}, str(tmp_path)) for extra in ({check.ENV: "1"}, {}))
    got, want = check.answers(on), check.answers(off)
    assert not check.plugin_lines(off), off.stdout
    (line,) = check.plugin_lines(on)
    assert level in line and says in line, line
    assert got.pop("vLLM's deep_gemm") == ("mqa_cli.deep_gemm" if serves else want["vLLM's deep_gemm"]), got
    want.pop("vLLM's deep_gemm")
    assert got == want, (got, want, line)


@needs_vllm
@pytest.mark.parametrize("value", ["0", "true"], ids=["zero", "unknown"])
def test_other_values_change_nothing(tmp_path, value):
    """0 (as unset or empty): nothing, and nothing said; a value it does not know: named once, as a warning."""
    proc = check.spawn(check.program(check.LOAD, check.UNSET, card=90, bundled=True), {check.ENV: value},
                       str(tmp_path))
    ok(proc, "UNSET OK")
    lines = check.plugin_lines(proc)
    if value == "0":
        assert not lines, lines
    else:
        assert len(lines) == 1 and "WARNING" in lines[0] and "MQA_LOGITS_AS_DEEP_GEMM='true'" in lines[0], lines


FAKE_DEEP_GEMM = '''
def fp8_gemm_nt(*args):
    return "the GEMM of WHO"


def fp8_fp4_mqa_logits(*args, **kwargs):
    raise AssertionError("the real DeepGEMM's MQA logits must not be called")
'''


def fake_package(root, dotted: str, who: str):
    path = root.joinpath(*dotted.split("."))
    path.mkdir(parents=True)
    (path / "__init__.py").write_text(FAKE_DEEP_GEMM.replace("WHO", who))
    for parent in [root.joinpath(*dotted.split(".")[:i]) for i in range(1, dotted.count(".") + 1)]:
        (parent / "__init__.py").touch()


@pytest.mark.parametrize("case", ["installed", "installed, imported first", "vendored copy", "vendored, no vLLM",
                                  "none"])
def test_other_names_go_to_the_real_deep_gemm(tmp_path, case):
    """Where the stand-in (installed in-process, as the plug-in installs it) sends the names it does not serve, as
    forwarded_to() says: an installed deep_gemm (also one imported before), else the vendored copy in a process
    that imported vLLM (finding it imports vLLM's package: a process that has not, SGLang's or a script's, is left
    without it), else none; PYTHONPATH is left alone."""
    site = tmp_path / "site"
    if case.startswith("installed"):
        fake_package(site, "deep_gemm", "deep_gemm")
    elif case.startswith("vendored"):
        fake_package(site, "vllm.third_party.deep_gemm", "vllm.third_party.deep_gemm")
    before = {"installed, imported first": "import deep_gemm as early\n", "vendored copy": "import vllm\n"}.get(case, "")
    code = before + textwrap.dedent('''
        import os, sys
        import mqa_cli.deep_gemm as standin
        standin.install(child_processes=False)
        import deep_gemm
        assert deep_gemm is standin and os.environ.get("PYTHONPATH", "") == SITE, os.environ.get("PYTHONPATH")
        real = getattr(deep_gemm, "fp8_gemm_nt", None)
        print("GEMM:", real() if real else None, "TO:", standin.forwarded_to(), "VLLM:", "vllm" in sys.modules)
        assert "torch" not in sys.modules  # (served names and set_num_sms: tests/test_api_deep_gemm.py)
        print("FORWARD OK")
    ''').replace("SITE", repr(str(site) if site.exists() else ""))
    out = ok(check.spawn(code, {"PYTHONPATH": str(site) if site.exists() else ""}, str(tmp_path)), "FORWARD OK")
    if case.startswith("installed"):
        assert f"every other name goes to DeepGEMM ({site / 'deep_gemm'})" in out, out
        assert "GEMM: the GEMM of deep_gemm" in out, out
    elif case == "vendored copy":
        assert "every other name goes to vLLM's vendored DeepGEMM (vllm.third_party.deep_gemm)" in out, out
        assert "GEMM: the GEMM of vllm.third_party.deep_gemm" in out, out
    else:
        assert "no DeepGEMM is installed" in out and "GEMM: None" in out and "VLLM: False" in out, out


def test_readme_and_pyproject_name_the_same_variables_and_entry_point():
    """The README's plug-in lines set the variables the plug-in reads; the entry point it names for VLLM_PLUGINS is
    the one pyproject.toml ships, pointing at the plug-in's function."""
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    section = readme.split("## Inside vLLM and SGLang", 1)[1].split("\n## ", 1)[0]
    first_bash = re.findall(r"```bash\n(.*?)```", section, flags=re.S)[0]
    assert f"{vllm_plugin.ENV}=1 vllm serve" in first_bash, first_bash
    assert f"{vllm_plugin.ENV}=1 {vllm_plugin.NATIVE_ENV}=1 vllm serve" in first_bash, first_bash
    assert "`mqa_logits`" in section and "`vllm.general_plugins`" in section
    pyproject = open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()
    group = pyproject.split('[project.entry-points."vllm.general_plugins"]', 1)[1].split("\n[", 1)[0]
    assert re.search(r'^mqa_logits = "mqa_cli\.vllm_plugin:register"$', group, flags=re.M), group
