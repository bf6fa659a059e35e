"""The codebase's shape: no import cycles (function-local imports included), importing any module changes no
environment, and kernels/ holds only kernels and configs."""
import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"mqa_cli": ROOT / "mqa_cli", "mqa_kernels": ROOT / "kernels"}


def _modules() -> dict:
    mods = {}
    for pkg, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            mods[".".join([pkg, *parts])] = path
    return mods


def _imports(name: str, path: Path, known: set) -> set:
    """Every project module `name` imports, at any depth of its code (relative imports resolved)."""
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                mod = ".".join(anchor + ([mod] if mod else []))
            for alias in node.names:
                full = f"{mod}.{alias.name}"
                out.add(full if full in known else mod)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m in known and m != name}


def test_no_import_cycles():
    mods = _modules()
    graph = {m: _imports(m, p, set(mods)) for m, p in mods.items()}
    # a package's __init__ is imported by its submodules implicitly; only explicit edges count
    state, stack = {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(n):] + [n]))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_importing_every_module_leaves_the_environment_alone():
    names = sorted(m for m in _modules() if not m.endswith((".kernel", "__main__")) and "gluon" not in m)
    code = ("import importlib, os\n"
            f"for n in {names!r}:\n    importlib.import_module(n)\n"
            "print(os.environ.get('TRITON_INTERPRET', 'unset'))")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "unset"


def test_kernels_folder_holds_kernels_and_configs_only():
    allowed = {"__init__.py", "config.py", "kernel.py", "tuned.py", "epilogue.py", "prologue.py", "naming.py",
               "gluon_compat.py", "tuned_by_triton.py", "versions.py",
               "wgmma_descriptors.py"}  # (how the kernels compile on 3.9: the PTX pass their compiles take)
    files = {p.name for p in (ROOT / "kernels").rglob("*.py")}
    assert files <= allowed, files - allowed
    for cfg in (ROOT / "kernels").rglob("config.py"):
        tree = ast.parse(cfg.read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree)
                     if isinstance(n, ast.ImportFrom) and n.level == 0}
        assert not imported & {"triton", "torch"}, f"{cfg} imports {imported & {'triton', 'torch'}}"


def test_ci_runs_the_readme_test_command_and_the_heavy_matrices():
    """The README's test command is the one CI runs first (on the same triton), and CI also runs what it skips."""
    import re

    readme = (ROOT / "README.md").read_text()
    (cmd,) = re.findall(r"^pip install -q (torch==\S+ triton==\S+) -e \"\.\[test\]\" && (python -m pytest .*)$", readme,
                        re.M)
    ci = (ROOT / ".ci" / "run").read_text()
    assert f'pip install -q {cmd[0]} -e ".[test]" && {cmd[1]}' in ci
    assert "MQA_LOGITS_HEAVY=1 python -m pytest" in ci and "-m heavy tests" in ci
