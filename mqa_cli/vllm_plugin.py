"""vLLM's plug-in: with MQA_LOGITS_AS_DEEP_GEMM=1, on a Hopper GPU (sm90) whose DeepGEMM loads, `import deep_gemm`
in every vLLM process gets this library's stand-in (mqa_cli.deep_gemm): DeepGEMM's MQA-logits names from here, the
rest from that DeepGEMM. With MQA_LOGITS_NATIVE_NEXT_N=1 too, vLLM runs next_n 1-8 natively (one pass over each
sequence's cache) instead of flattening 3 and 5-8 to one row per draft token, as it must with DeepGEMM on sm90.

vLLM calls each entry point of the group `vllm.general_plugins` (pyproject.toml names `register` as `mqa_logits`)
in every process it starts, before it builds the model and imports deep_gemm; with VLLM_PLUGINS unset it calls
every one installed, so this one does nothing, and says nothing, unless asked. Asked, it says in one line per
process what it did. It stands in only where it serves every call vLLM makes: on sm90 (vLLM's own platform query,
NVML on a CUDA build: no CUDA context), not on sm100 (MX scales, bf16 weights, varlen `indices=`: DeepGEMM's own
kernels), other cards or none; and only over a DeepGEMM that imports, since vLLM picks its GEMMs by
`has_deep_gemm()` / `is_deep_gemm_supported()`, which the stand-in would answer yes to.

Native next_n replaces vllm.utils.deep_gemm's gate (`native_next_n_supported`: 1-8) and schedule sizing
(`_paged_mqa_logits_schedule_slots`: a range per SM at every next_n, where vLLM builds num_sms // 2 at next_n 4 for
DeepGEMM's 2-SM clusters; the decode kernel reads a schedule only with a range per program,
mqa_cli.plan.build.reads_schedule), there and in every vLLM module that imported them by value (the DSA indexer's
metadata builder). A vLLM without those names (another release) is left as it is, and the line says so.

The line goes to the logger `vllm.plugins.mqa_logits`, inside the `vllm` tree that vLLM's log configuration covers.
"""
from __future__ import annotations

import logging
import os
import sys

ENV = "MQA_LOGITS_AS_DEEP_GEMM"
NATIVE_ENV = "MQA_LOGITS_NATIVE_NEXT_N"
SERVED_CARD = (9, 0)  # sm90: the calls vLLM makes there are the ones the stand-in serves
MAX_NEXT_N = 8  # the paged kernels' draft rows per sequence (mqa_cli.plan.dispatch: next_n in [1, 8])
GATE, SLOTS = "native_next_n_supported", "_paged_mqa_logits_schedule_slots"  # in vllm.utils.deep_gemm (0.34)
_log = logging.getLogger("vllm.plugins.mqa_logits")
_said = False  # the plug-in acts, and speaks, once per process


def register() -> None:
    """The entry point vLLM calls: with MQA_LOGITS_AS_DEEP_GEMM=1, the stand-in in place of deep_gemm where it
    serves vLLM's calls (module docstring), and one log line saying what was done; unset, empty or 0: nothing."""
    global _said
    value = os.environ.get(ENV, "")
    if value in ("", "0") or _said:
        return
    _said = True
    if value != "1":
        _log.warning("%s=%r is neither 1 nor 0: deep_gemm left as it is (set it to 1 to serve DeepGEMM's "
                     "MQA-logits names from mqa-logits)", ENV, value)
        return
    level, line = _act()
    _log.log(level, "%s", line)


def _act() -> tuple[int, str]:
    """Install where it serves, and the log line's level and text."""
    try:
        from vllm.platforms import current_platform
    except Exception as e:  # noqa: BLE001  (called by another loader, outside vLLM)
        return logging.WARNING, (f"mqa-logits left deep_gemm as it is ({ENV}=1): vLLM's platform query does not "
                                 f"import here ({_first_line(e)}); outside vLLM call mqa_cli.deep_gemm.install()")
    card, why_not = _card(current_platform)
    if why_not:
        return logging.INFO, f"mqa-logits left deep_gemm to vLLM ({ENV}=1): {why_not}"
    from . import deep_gemm as standin

    real, why = standin.real_deep_gemm()
    if real is None:
        return logging.WARNING, (f"mqa-logits left deep_gemm to vLLM ({ENV}=1) on this {card} GPU: DeepGEMM {why}, "
                                 "and the stand-in would forward vLLM's GEMMs to it; vLLM sees DeepGEMM as it is")
    standin.install(child_processes=False)  # vLLM calls this in each process it starts: no PYTHONPATH needed
    return logging.INFO, (f"mqa-logits stands in for deep_gemm ({ENV}=1) on this {card} GPU: it serves "
                          f"{', '.join(standin.SERVED)}; {standin.forwarded_to()}; {_next_n()}")


def _card(platform) -> tuple[str, str | None]:
    """('sm90', None) where the stand-in serves this card, else (its name, why not), from vLLM's platform."""
    try:
        cap = platform.get_device_capability() if platform.is_cuda() else None
    except Exception as e:  # noqa: BLE001  (the query failed: nothing known to serve)
        return "?", f"vLLM's device query failed ({_first_line(e)})"
    if cap is None:
        return "?", (f"vLLM runs on {type(platform).__name__}, not a CUDA GPU, and calls no DeepGEMM indexer kernel "
                     "there")
    card = f"sm{cap[0]}{cap[1]}"
    return card, None if (cap[0], cap[1]) == SERVED_CARD else (
        f"this GPU is {card}; the stand-in serves sm90's calls (on sm100 vLLM passes MX scales, bf16 weights and "
        "varlen indices, which need DeepGEMM's own kernels)")


def _next_n() -> str:
    """Native next_n 1-8 with MQA_LOGITS_NATIVE_NEXT_N=1, else vLLM's own choice; the log line's last clause."""
    value = os.environ.get(NATIVE_ENV, "")
    if value in ("", "0"):
        return f"next_n as vLLM runs it (1, 2, 4 native, 3 and 5-8 flattened; {NATIVE_ENV}=1 runs all natively)"
    if value != "1":
        return f"next_n as vLLM runs it ({NATIVE_ENV}={value!r} is neither 1 nor 0)"
    try:
        import vllm.utils.deep_gemm as vdg
    except Exception as e:  # noqa: BLE001
        return f"next_n as vLLM runs it: vllm.utils.deep_gemm does not import ({_first_line(e)})"
    old = {name: getattr(vdg, name, None) for name in (GATE, SLOTS)}
    missing = [name for name, f in old.items() if not callable(f)]
    if missing:
        return (f"next_n as vLLM runs it: this vLLM's vllm.utils.deep_gemm has no {' or '.join(missing)} "
                f"({NATIVE_ENV}=1 changes vLLM 0.34's)")
    where = _replace(old[GATE], native_next_n_supported) | _replace(old[SLOTS], paged_mqa_logits_schedule_slots)
    return (f"next_n 1-{MAX_NEXT_N} native ({NATIVE_ENV}=1: {GATE} and {SLOTS} replaced in "
            f"{', '.join(sorted(where))})")


def native_next_n_supported(next_n: int) -> bool:
    """vLLM's gate with the stand-in serving sm90: the paged logits take 1 to 8 draft rows per sequence in one
    pass over its cache."""
    return 1 <= next_n <= MAX_NEXT_N


def paged_mqa_logits_schedule_slots(num_sms: int, next_n: int) -> int:
    """vLLM's schedule sizing with the stand-in serving: a range per SM at every next_n, the schedule the decode
    kernel reads (one of fewer ranges is not read: the kernel computes its own split)."""
    return num_sms


def _replace(old, new) -> set:
    """Put `new` wherever a loaded vLLM module holds `old` under its name (the module defining it, and each that
    imported it by value before this ran); the modules' names."""
    where = set()
    for name, module in list(sys.modules.items()):
        held = getattr(module, "__dict__", {}).get(old.__name__)  # (no module __getattr__ runs)
        if (name == "vllm" or name.startswith("vllm.")) and held is old:
            setattr(module, old.__name__, new)
            where.add(name)
    return where


def _first_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:160]}"
