"""vLLM's plug-in (mqa_cli.vllm_plugin), loaded as vLLM's loader loads it: the entry points of the group
`vllm.general_plugins` from the installed metadata (this venv's editable install; CI checks the wheel the same way,
.ci/run part 2), each loaded and called, in a spawned process. .ci/plugin_check.py is the check CI runs on the wheel:
run here as written, then what it leaves out: the variable at 0 or at a value it does not know, and where the names
the stand-in does not serve go (an installed DeepGEMM, imported before or not; vLLM's vendored copy; none).

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


def _check_module():
    spec = importlib.util.spec_from_file_location("plugin_check", CHECK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOADER = _check_module().LOADER


def spawn(code: str, tmp_path, value: str | None, site: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MQA_LOGITS_AS_DEEP_GEMM", "PYTHONPATH")}
    if value is not None:
        env["MQA_LOGITS_AS_DEEP_GEMM"] = value
    if site:
        env["PYTHONPATH"] = site
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=str(tmp_path),
                          timeout=300)


def ok(proc, marker):
    assert proc.returncode == 0 and marker in proc.stdout, (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc.stdout


def plugin_lines(out: str, level: str = "INFO") -> list:
    return [ln for ln in out.splitlines() if ln.startswith(f"LOG {level} vllm.plugins.mqa_logits:")]


def test_installed_entry_point_and_the_ci_check(tmp_path):
    """The entry point is in the installed metadata and points at this tree's plug-in; .ci/plugin_check.py passes:
    set, the stand-in serves vLLM 0.34's calls right (fp32, bf16) and logs one line; unset, nothing at all."""
    probe = ("from importlib.metadata import entry_points; import mqa_cli; "
             "print([(e.name, e.value) for e in entry_points(group='vllm.general_plugins')], mqa_cli.__file__)")
    out = ok(spawn(probe + "; print('PROBE')", tmp_path, None), "PROBE")
    assert "('mqa_logits', 'mqa_cli.vllm_plugin:register')" in out, \
        f"the installed metadata lacks the plug-in (reinstall: pip install -e .): {out}"
    assert os.path.join(ROOT, "mqa_cli") in out, f"mqa_cli is installed from another tree: {out}"
    env = {k: v for k, v in os.environ.items() if k not in ("MQA_LOGITS_AS_DEEP_GEMM", "PYTHONPATH")}
    proc = subprocess.run([sys.executable, CHECK], capture_output=True, text=True, env=env, cwd=str(tmp_path),
                          timeout=900)
    out = ok(proc, "PLUGIN OK")
    assert "SET OK " + os.path.join(ROOT, "mqa_cli") in out, out


@pytest.mark.parametrize("value", ["0", ""], ids=["zero", "empty"])
def test_off_values_do_nothing_and_say_nothing(tmp_path, value):
    code = LOADER + textwrap.dedent('''
        assert "mqa_cli.deep_gemm" not in sys.modules and "deep_gemm" not in sys.modules
        print("OFF OK")
    ''')
    proc = spawn(code, tmp_path, value)
    assert proc.returncode == 0 and proc.stdout == "OFF OK\n" and not proc.stderr, (proc.stdout, proc.stderr)


def test_unknown_value_is_named_once_and_changes_nothing(tmp_path):
    code = LOADER + textwrap.dedent('''
        assert "mqa_cli.deep_gemm" not in sys.modules and "deep_gemm" not in sys.modules
        print("UNKNOWN OK")
    ''')
    out = ok(spawn(code, tmp_path, "true"), "UNKNOWN OK")
    warned = plugin_lines(out, "WARNING")
    assert len(warned) == 1 and "MQA_LOGITS_AS_DEEP_GEMM='true'" in warned[0] and "1" in warned[0], out
    assert not plugin_lines(out), out


FAKE_DEEP_GEMM = '''
calls = []


def fp8_gemm_nt(*args):
    return "the GEMM of WHO"


def set_num_sms(n):
    calls.append(n)


def fp8_fp4_mqa_logits(*args, **kwargs):
    raise AssertionError("the real DeepGEMM's MQA logits must not be called")
'''


def fake_package(root, dotted: str, who: str):
    path = root.joinpath(*dotted.split("."))
    path.mkdir(parents=True)
    (path / "__init__.py").write_text(FAKE_DEEP_GEMM.replace("WHO", who))
    for parent in [root.joinpath(*dotted.split(".")[:i]) for i in range(1, dotted.count(".") + 1)]:
        (parent / "__init__.py").touch()


@pytest.mark.parametrize("case", ["installed", "installed, imported first", "vLLM's vendored copy", "none"])
def test_other_names_go_to_the_real_deep_gemm(tmp_path, case):
    """The log line names where the names it does not serve go, and they go there: an installed deep_gemm (also
    when imported before the plug-in runs), else vLLM's vendored copy in a process that imported vLLM, else none;
    PYTHONPATH is left alone (vLLM loads the plug-in in each process)."""
    site = tmp_path / "site"
    if case.startswith("installed"):
        fake_package(site, "deep_gemm", "deep_gemm")
    elif case == "vLLM's vendored copy":
        fake_package(site, "vllm.third_party.deep_gemm", "vllm.third_party.deep_gemm")
    before = {"installed, imported first": "import deep_gemm as early\n",
              "vLLM's vendored copy": "import vllm\n"}.get(case, "")
    code = before + LOADER + textwrap.dedent('''
        import os
        import deep_gemm
        assert deep_gemm.__name__ == "mqa_cli.deep_gemm", deep_gemm
        assert os.environ.get("PYTHONPATH") == SITE, os.environ.get("PYTHONPATH")
        real = getattr(deep_gemm, "fp8_gemm_nt", None)
        print("GEMM:", real() if real else None)
        assert "torch" not in sys.modules  # (served names and set_num_sms: tests/test_api_deep_gemm.py)
        print("FORWARD OK")
    ''').replace("SITE", repr(str(site)))
    out = ok(spawn(code, tmp_path, "1", site=str(site)), "FORWARD OK")
    (line,) = plugin_lines(out)
    if case.startswith("installed"):
        assert f"every other name goes to DeepGEMM ({site / 'deep_gemm'})" in line, line
        assert "GEMM: the GEMM of deep_gemm" in out, out
    elif case == "vLLM's vendored copy":
        assert "every other name goes to vLLM's vendored DeepGEMM (vllm.third_party.deep_gemm)" in line, line
        assert "GEMM: the GEMM of vllm.third_party.deep_gemm" in out, out
    else:
        assert "no DeepGEMM is installed" in line and "GEMM: None" in out, out


def test_vendored_copy_is_not_looked_up_outside_vllm(tmp_path):
    """Finding vLLM's vendored copy imports vLLM's package: a process that has not imported vLLM (SGLang's, a
    script's) is left without it rather than made to import vLLM."""
    site = tmp_path / "site"
    fake_package(site, "vllm.third_party.deep_gemm", "vllm.third_party.deep_gemm")
    code = textwrap.dedent('''
        import sys
        import mqa_cli.deep_gemm
        mqa_cli.deep_gemm.install(child_processes=False)
        import deep_gemm
        assert getattr(deep_gemm, "fp8_gemm_nt", None) is None
        assert "vllm" not in sys.modules, "vLLM imported by the stand-in"
        print("NO VLLM OK")
    ''')
    ok(spawn(code, tmp_path, None, site=str(site)), "NO VLLM OK")


def test_readme_and_pyproject_name_the_same_variable_and_entry_point():
    """The README's plug-in line sets the variable the plug-in reads; the entry point it names for VLLM_PLUGINS is
    the one pyproject.toml ships, pointing at the plug-in's function."""
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    section = readme.split("## Inside vLLM and SGLang", 1)[1].split("\n## ", 1)[0]
    first_bash = re.findall(r"```bash\n(.*?)```", section, flags=re.S)[0]
    assert f"{vllm_plugin.ENV}=1 vllm serve" in first_bash, first_bash
    assert "`mqa_logits`" in section and "`vllm.general_plugins`" in section
    pyproject = open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()
    group = pyproject.split('[project.entry-points."vllm.general_plugins"]', 1)[1].split("\n[", 1)[0]
    assert re.search(r'^mqa_logits = "mqa_cli\.vllm_plugin:register"$', group, flags=re.M), group
