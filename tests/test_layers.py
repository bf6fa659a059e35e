"""The library's layers are folders, and imports point down them: a command may use everything below it, the
problem layer nothing but errors. A module importing upward (or sideways into a peer layer) fails here with the
edge; function-local imports count (tests/test_structure.py's walk)."""
from tests.test_structure import ROOT, _imports, _modules

# rank of each layer: a module may import its own folder and folders of a strictly lower rank only
RANKS = {"errors": 0, "problem": 1, "plan": 2, "launch": 3, "api": 4, "check": 5, "inspect": 5, "bench": 6, "cli": 7,
         # the two modules engines import by path (README, "Inside vLLM and SGLang"): they use the library, and
         # nothing in it uses them; vLLM's plug-in puts the first in place
         "deep_gemm": 8, "aiter": 8, "vllm_plugin": 9}
TOP_MODULES = {"__init__", "__main__", "errors", "deep_gemm", "aiter", "vllm_plugin"}
MAX_MODULES = 10


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "mqa_cli" and len(parts) > 1 else None


def _folders() -> set:
    return {p.name for p in (ROOT / "mqa_cli").iterdir() if (p / "__init__.py").exists()}


def test_every_module_lives_in_a_layer_folder():
    loose = sorted(p.name for p in (ROOT / "mqa_cli").glob("*.py") if p.stem not in TOP_MODULES)
    assert not loose, f"modules outside the layer folders: {loose}"
    assert _folders() == set(RANKS) - TOP_MODULES, f"layer folders {sorted(_folders())} != {sorted(set(RANKS) - TOP_MODULES)}"


def test_no_layer_folder_is_crowded():
    for layer in _folders():
        mods = sorted(p.name for p in (ROOT / "mqa_cli" / layer).rglob("*.py") if p.name != "__init__.py")
        assert len(mods) <= MAX_MODULES, f"mqa_cli/{layer}/ holds {len(mods)} modules (at most {MAX_MODULES}): {mods}"


def test_imports_point_down_the_layers():
    mods = _modules()
    known = set(mods)
    bad = []
    for name, path in mods.items():
        src = _layer(name)
        if src in (None, "__main__"):
            continue
        assert src in RANKS, f"{name} is in no layer"
        for dep in _imports(name, path, known):
            dst = _layer(dep)
            if dst is None or dst == src:
                continue
            assert dst in RANKS, f"{name} imports {dep}, which is in no layer"
            if RANKS[dst] >= RANKS[src]:
                bad.append(f"{name} -> {dep} ({src} may not import {dst})")
    assert not bad, "imports that point up or sideways:\n" + "\n".join(sorted(bad))


def test_kernels_import_nothing_of_the_library():
    mods = _modules()
    bad = [f"{name} -> {dep}" for name, path in mods.items() if name.startswith("mqa_kernels")
           for dep in _imports(name, path, set(mods)) if dep.startswith("mqa_cli")]
    assert not bad, "kernels importing mqa_cli:\n" + "\n".join(sorted(bad))


def test_kernels_are_grouped_by_op():
    ops = {p.name for p in (ROOT / "kernels").iterdir() if (p / "__init__.py").exists()}
    assert ops == {"prefill", "decode", "topk", "common"}, sorted(ops)
    loose = sorted(p.name for p in (ROOT / "kernels").glob("*.py") if p.name != "__init__.py")
    assert not loose, f"kernel modules outside the op folders: {loose}"
