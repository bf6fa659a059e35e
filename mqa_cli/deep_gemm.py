"""A stand-in for the `deep_gemm` module: DeepGEMM's MQA-logits names from this library, every other name from the
real DeepGEMM when it is installed.

Engines call DeepGEMM on the module object (`deep_gemm.<name>`), so replacing the module is the whole integration
(README, "Inside vLLM and SGLang"). Served here, every generation's names: fp8_mqa_logits, fp8_paged_mqa_logits
(54e2261, 0.2.3.post2), fp8_fp4_mqa_logits, fp8_fp4_paged_mqa_logits (all three), get_paged_mqa_logits_metadata,
get_num_sms, set_num_sms (set_num_sms is passed on to the real DeepGEMM too, whose GEMMs then follow it). Any other
name (the GEMMs, deep_gemm.utils, ...) is looked up on the real module, imported on first such use; without one it
is an AttributeError that names what is missing. The real DeepGEMM is an installed `deep_gemm`, else, in a process
that has imported vLLM, vLLM's vendored copy (`vllm.third_party.deep_gemm`, what vLLM itself imports when no
`deep_gemm` is installed), so that vLLM's GEMMs keep theirs.

Three ways in, each before the engine imports deep_gemm:
- vLLM's plug-in (mqa_cli.vllm_plugin, an entry point of the wheel): with MQA_LOGITS_AS_DEEP_GEMM=1, on a Hopper
  GPU whose DeepGEMM loads, `install(child_processes=False)` in every process vLLM starts;
- `install()` in the process that starts the engine: sys.modules["deep_gemm"] is then this module, and the
  processes it starts (vLLM's and SGLang's workers, forked or spawned) find it through a one-file shim directory put
  first on sys.path and PYTHONPATH;
- `export PYTHONPATH="$(python -m mqa_cli.deep_gemm)..."` before a command line (`vllm serve`, `python -m
  sglang.launch_server`): the same shim directory, printed (written on first use).
Nothing happens at import time.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import tempfile

SERVED = ("fp8_mqa_logits", "fp8_paged_mqa_logits", "fp8_fp4_mqa_logits", "fp8_fp4_paged_mqa_logits",
          "get_paged_mqa_logits_metadata", "get_num_sms", "set_num_sms")
_MARK = "# mqa-logits: the deep_gemm stand-in's shim"
_SHIM = f'''{_MARK} (written by mqa_cli.deep_gemm.shim_dir; `import deep_gemm` gets mqa_cli.deep_gemm)
import sys

import mqa_cli.deep_gemm as _standin

sys.modules[__name__] = _standin
'''

_VENDORED = "vllm.third_party.deep_gemm"  # vLLM's own copy of DeepGEMM (0.33 and later)
_real_module = None  # the real deep_gemm, once imported
_why_not: str | None = None  # why there is none ("is not installed", "failed to import: ...")
__all__ = list(SERVED)


def __getattr__(name: str):
    if name in SERVED:
        from .api import logits as api

        value = globals()[name] = getattr(api, name)  # later lookups find it directly
        return value
    if name.startswith("__") and name != "__path__":  # __path__: DeepGEMM's submodules (deep_gemm.utils, ...)
        raise AttributeError(name)
    real = _real()
    if real is None:
        raise AttributeError(f"deep_gemm (the mqa-logits stand-in) has no {name!r}: it serves {', '.join(SERVED)} "
                             f"and forwards other names to DeepGEMM, which {_why_not}")
    return getattr(real, name)


def __dir__():
    return sorted(set(globals()) | set(SERVED) | (set(dir(_real_module)) if _real_module is not None else set()))


def set_num_sms(num_sms: int) -> None:
    """DeepGEMM's set_num_sms: this library's kernels follow it, and so do the real DeepGEMM's when installed."""
    from .api import logits as api

    api.set_num_sms(num_sms)
    real = _real()
    if real is not None and hasattr(real, "set_num_sms"):
        real.set_num_sms(num_sms)


def _is_shim_dir(path: str) -> bool:
    try:
        with open(os.path.join(path or ".", "deep_gemm.py"), encoding="utf-8") as f:
            return f.read(len(_MARK)) == _MARK
    except OSError:
        return False


def _real_spec():
    """The real DeepGEMM's spec, found without running it: an installed deep_gemm (shim directories skipped), else,
    where vLLM is imported already, vLLM's vendored copy; None without either."""
    spec = importlib.machinery.PathFinder.find_spec("deep_gemm", [p for p in sys.path if not _is_shim_dir(p)])
    if spec is not None and spec.loader is not None:
        return spec
    if "vllm" not in sys.modules:  # finding a submodule imports its parents: vLLM is never imported from here
        return None
    try:
        spec = importlib.util.find_spec(_VENDORED)
    except Exception:  # no vllm.third_party in this vLLM, or it fails to import: no vendored copy
        return None
    return spec if spec is not None and spec.loader is not None else None


def _real():
    """The real deep_gemm module, imported once under its own name (this stand-in keeps sys.modules["deep_gemm"]);
    None when there is none (then _why_not says why)."""
    global _real_module, _why_not
    if _real_module is not None or _why_not is not None:
        return _real_module
    spec = _real_spec()
    if spec is None:
        _why_not = "is not installed"
        return None
    held = sys.modules.get("deep_gemm")
    try:
        if spec.name == _VENDORED:  # a submodule of vLLM, imported as vLLM imports it
            module = importlib.import_module(_VENDORED)
        else:
            module = importlib.util.module_from_spec(spec)
            sys.modules["deep_gemm"] = module  # its own `from . import ...` and `deep_gemm.x` imports resolve to it
            spec.loader.exec_module(module)
    except Exception as e:  # installed but not importable here: the served names still work
        first = (str(e).strip().splitlines() or [""])[0]
        _why_not = f"failed to import ({type(e).__name__}: {first})"
        return None
    finally:
        if held is not None:
            sys.modules["deep_gemm"] = held
        else:
            sys.modules.pop("deep_gemm", None)
    _real_module = module
    return module


def real_deep_gemm():
    """(the real DeepGEMM this stand-in forwards to, imported now, None) or (None, why there is none): a deep_gemm
    imported before the stand-in took its name, else what `_real` finds. vLLM's plug-in asks before it installs:
    a stand-in over a DeepGEMM that cannot load would make vLLM count on GEMMs that are not there."""
    _adopt_held()
    real = _real()
    return (real, None) if real is not None else (None, _why_not)


def _adopt_held() -> None:
    """A real deep_gemm imported before the stand-in takes its name stays the one forwarded to."""
    global _real_module
    held = sys.modules.get("deep_gemm")
    if held is not None and held is not sys.modules[__name__] and _real_module is None:
        _real_module = held


def forwarded_to() -> str:
    """Where the names this stand-in does not serve go, as a clause for a log line; DeepGEMM is not imported here."""
    if _real_module is not None and _real_module.__name__ == _VENDORED:
        return f"every other name goes to vLLM's vendored DeepGEMM ({_VENDORED})"
    if _real_module is not None:
        where = os.path.dirname(getattr(_real_module, "__file__", None) or "") or _real_module.__name__
        return f"every other name goes to DeepGEMM ({where})"
    spec = _real_spec()
    if spec is None:
        return "no DeepGEMM is installed, so every other name is missing"
    if spec.name == _VENDORED:
        return f"every other name goes to vLLM's vendored DeepGEMM ({_VENDORED})"
    where = os.path.dirname(spec.origin) if spec.origin else next(iter(spec.submodule_search_locations or []), "?")
    return f"every other name goes to DeepGEMM ({where})"


def shim_dir(path: str | None = None) -> str:
    """A directory holding `deep_gemm.py`, a shim that makes `import deep_gemm` return this stand-in, for sys.path or
    PYTHONPATH; written when missing or stale. Default: a per-user directory under the system's temp directory."""
    if path is None:
        user = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
        path = os.path.join(tempfile.gettempdir(), f"mqa-logits-deep_gemm-{user}")
    path = os.path.abspath(path)
    os.makedirs(path, mode=0o700, exist_ok=True)
    if hasattr(os, "getuid") and os.stat(path).st_uid != os.getuid():
        raise PermissionError(f"{path} belongs to another user; pass a directory of your own")
    file = os.path.join(path, "deep_gemm.py")
    try:
        with open(file, encoding="utf-8") as f:
            current = f.read()
    except OSError:
        current = None
    if current != _SHIM:
        tmp = f"{file}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(_SHIM)
        os.replace(tmp, file)
    return path


def install(*, child_processes: bool = True):
    """Make `import deep_gemm` return this stand-in, in this process and (child_processes) in the processes it
    starts. Call it before the engine is imported; a real deep_gemm imported earlier stays the one forwarded to.
    Returns the stand-in module."""
    me = sys.modules[__name__]
    _adopt_held()
    sys.modules["deep_gemm"] = me
    if child_processes:
        d = shim_dir()
        if d not in sys.path:
            sys.path.insert(0, d)
        parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if d not in parts:
            os.environ["PYTHONPATH"] = os.pathsep.join([d, *parts])
    return me


if __name__ == "__main__":  # python -m mqa_cli.deep_gemm [DIR]: print the shim directory for PYTHONPATH
    print(shim_dir(sys.argv[1] if len(sys.argv) > 1 else None))
