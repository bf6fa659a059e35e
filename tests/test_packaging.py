"""The wheel holds the whole product: every package folder of mqa_cli/ and kernels/ (installed as mqa_kernels) and
every project module any source file imports. An editable install reads the source tree and hides a package the
build leaves out; engines install the wheel, so it is built here from a copy of the sources and read back."""
import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.test_structure import PACKAGES as FOLDERS, ROOT, _modules, import_froms


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory) -> set:
    """The file names in a wheel built from a copy of the sources (no build isolation: this venv's setuptools)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for folder in ("mqa_cli", "kernels"):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "-w", str(out), str(src)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (whl,) = out.glob("mqa_logits-*.whl")
    return set(zipfile.ZipFile(whl).namelist())


def _wheel_path(module: str, files: set) -> str | None:
    base = module.replace(".", "/")
    for cand in (f"{base}.py", f"{base}/__init__.py"):
        if cand in files:
            return cand
    return None


def test_every_package_folder_is_in_the_wheel(wheel_files):
    folders = {p.parent for folder in FOLDERS.values() for p in folder.rglob("*.py") if "__pycache__" not in p.parts}
    missing = []
    for folder in sorted(folders):
        pkg, root = next((k, v) for k, v in FOLDERS.items() if folder == v or v in folder.parents)
        name = "/".join([pkg, *folder.relative_to(root).parts])
        assert (folder / "__init__.py").exists(), f"{folder} holds modules but no __init__.py: it would not be packaged"
        if f"{name}/__init__.py" not in wheel_files:
            missing.append(name)
    assert not missing, f"package folders missing from the wheel: {missing}"


def test_every_imported_project_module_is_in_the_wheel(wheel_files):
    mods = _modules()
    missing = set()
    for name, path in mods.items():
        for mod, names in import_froms(name, path):
            for t in [mod] + [f"{mod}.{n}" for n in names]:
                if t.split(".")[0] not in FOLDERS:
                    continue
                # `from pkg import name` names a module or an attribute: a module must be packaged
                if t in mods and _wheel_path(t, wheel_files) is None:
                    missing.add(f"{t} (imported by {name})")
                elif t not in mods and t.count(".") and t.rsplit(".", 1)[0] not in mods:
                    missing.add(f"{t} (imported by {name}: no such source module)")
    assert not missing, sorted(missing)
    assert _wheel_path("mqa_kernels.decode.paged_ws_sm90.kernel", wheel_files)  # the one an explicit list once left out
