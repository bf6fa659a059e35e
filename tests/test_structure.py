"""The codebase's shape: no import cycles (function-local imports included), importing any module changes no
environment, kernels/ holds only kernels and configs, and a variant is the unit: kernels/common imports no variant
and no kernel reaches into another module's private names."""
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def import_froms(name: str, path: Path):
    """(module, names taken from it) of every import in module `name`, at any depth of its code (relative imports
    resolved); `import a.b` is (a.b, [])."""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                mod = ".".join(base[: len(base) - node.level + 1] + ([mod] if mod else []))
            yield mod, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            yield from ((a.name, []) for a in node.names)


def _imports(name: str, path: Path, known: set) -> set:
    """Every project module `name` imports: `from X import y` counts X.y where that is a module, else X."""
    out = set()
    for mod, names in import_froms(name, path):
        out.update({f"{mod}.{n}" if f"{mod}.{n}" in known else mod for n in names} or {mod})
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
               "gluon_compat.py", "gluon_ring.py", "gluon_heads.py", "tuned_by_triton.py", "versions.py"}
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


def _variant_of(module: str) -> str | None:
    """'mqa_kernels.decode.paged_ws_sm90.kernel' -> 'mqa_kernels.decode.paged_ws_sm90'; None outside a variant."""
    parts = module.split(".")
    if parts[0] != "mqa_kernels" or len(parts) < 3 or parts[1] == "common":
        return None
    return ".".join(parts[:3]) if parts[1] in ("decode", "prefill") and len(parts) >= 3 else ".".join(parts[:2])


def _private_imports(name: str, path: Path, known: set) -> list:
    """`from X import _name` in module `name` where X is another project module: what it reaches into."""
    out = []
    for mod, names in import_froms(name, path):
        private = [n for n in names if n.startswith("_") and not n.startswith("__")]
        if private and mod in known and mod != name:
            out.append(f"{name} imports {', '.join(private)} from {mod}")
    return out


def test_no_kernel_imports_another_module_s_private_names():
    """A kernel imports shared pieces by their public names (kernels/common) and nothing from another variant:
    no `from X import _name` across modules under kernels/, no kernel imports another variant, and the shared floor
    stays shared: nothing under kernels/common imports a variant's module (its config, kernel or table), at any
    depth of its code; a variant hands what common needs as arguments."""
    mods = _modules()
    known = set(mods)
    bad = []
    for name, path in mods.items():
        if not name.startswith("mqa_kernels."):
            continue
        bad += _private_imports(name, path, known)
        if name.endswith(".kernel") or name.startswith("mqa_kernels.common"):
            mine = _variant_of(name)
            bad += [f"{name} imports {m} (another variant)" for m in _imports(name, path, known)
                    if _variant_of(m) not in (None, mine)]
    assert not bad, "\n".join(bad)


def test_the_structure_checks_catch_what_they_guard(tmp_path):
    """The checks above on a made-up decode kernel that imports the prefill kernel's names, one of them private."""
    assert _variant_of("mqa_kernels.decode.paged_ws_sm90.kernel") == "mqa_kernels.decode.paged_ws_sm90"
    assert _variant_of("mqa_kernels.topk.config") == "mqa_kernels.topk"
    assert _variant_of("mqa_kernels.common.gluon_ring") is None
    f = tmp_path / "kernel.py"
    f.write_text("from ...prefill.gluon_ws_sm90.kernel import _ring, lane_head_sum\n"
                 "from ...common.gluon_ring import ring\n")
    name = "mqa_kernels.decode.paged_ws_sm90.kernel"
    known = {"mqa_kernels.prefill.gluon_ws_sm90.kernel", name, "mqa_kernels.common.gluon_ring"}
    assert _private_imports(name, f, known) == [f"{name} imports _ring from mqa_kernels.prefill.gluon_ws_sm90.kernel"]
    got = _imports(name, f, known)
    assert {_variant_of(m) for m in got} == {"mqa_kernels.prefill.gluon_ws_sm90", None}


# Support code per kernel line: (mqa_cli + tests + tools, .py and .sh) / kernels' .py lines, as git tracks them.
# It may not grow: 5.35 at bca2513, 4.73 now; issue 51 asked for 5.0.
SUPPORT_PER_KERNEL_LINE = 4.73


def test_support_code_stays_within_its_share_of_the_kernels():
    def lines(folders: tuple, ends: tuple) -> int:
        r = subprocess.run(["git", "ls-files", *folders], cwd=ROOT, capture_output=True, text=True)
        files = [f for f in r.stdout.split() if f.endswith(ends) and (ROOT / f).exists()]
        return sum(len((ROOT / f).read_text().splitlines()) for f in files) if r.returncode == 0 else 0

    kernels = lines(("kernels",), (".py",))
    if not kernels:
        pytest.skip("not a git checkout")
    support = lines(("mqa_cli", "tests", "tools"), (".py", ".sh"))
    assert support / kernels <= SUPPORT_PER_KERNEL_LINE, (support, kernels, round(support / kernels, 3))


def test_every_cache_in_the_library_is_bounded():
    """A dict a module of mqa_cli fills at run time (NAME[key] = ...) starts over past a size (`len(NAME) >=` in the
    same module) or is keyed by device (as many entries as GPUs); no functools cache without a maxsize."""
    bad = []
    for path in (ROOT / "mqa_cli").rglob("*.py"):
        nodes = list(ast.walk(ast.parse(path.read_text())))
        names = lambda kind, test: {ast.unparse(n.value if kind is ast.Subscript else n.left.args[0])
                                    for n in nodes if isinstance(n, kind) and test(n)}
        filled = names(ast.Subscript, lambda n: isinstance(n.ctx, ast.Store) and not isinstance(n.slice, ast.Slice)
                       and ast.unparse(n.value).isupper())
        sized = names(ast.Compare, lambda n: ast.unparse(n.left).startswith("len("))
        bad += [f"{path.name}: {d}" for d in filled - sized - {"_DEVICE_SMS", "_DUMMIES", "_MEMORY", "_NO_META"}]
        bad += [f"{path.name}: {ast.unparse(d)}" for n in nodes if isinstance(n, ast.FunctionDef)
                for d in n.decorator_list if ast.unparse(d).endswith(("cache", "maxsize=None)"))]
    assert not bad, "unbounded caches:\n" + "\n".join(bad)
