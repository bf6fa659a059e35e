"""DeepGEMM 54e2261's own MQA-logits tests (tests/test_attention.py: test_mqa_logits, test_paged_mqa_logits)
run against this project's public API, with only the import swapped (issue 9's "Done when").

The test module is imported as it is; on the `deep_gemm` module object its entry points (API_NAMES) become
mqa_cli's, and a name the project lacks raises, so DeepGEMM's own kernel never stands in for ours. Its helpers
(deep_gemm.testing, deep_gemm.utils) and every assertion stay. Only bench_kineto changes: it looks kernels up by
DeepGEMM's names, so here the whole call is timed with CUDA events ('clean' names, a kernel the project fuses,
get NaN: the tests only print them). Each case runs alone (sample_mqa_cases returns one), so one failure does not
stop the rest.

    python3 tools/deepgemm_tests.py      # all cases (216 on sm90), shuffled, within the time budget
Env: DGT_CASES (a seeded sample of N cases per test; default all), DGT_KINDS ("prefill,paged" or one of them),
DGT_BUDGET_S (540: no new case after it), DG_ROOT (DeepGEMM's sources; else /tmp/DeepGEMM, .anchor/DeepGEMM,
../shared/anchors/deepgemm/DeepGEMM). Writes $OUT/deepgemm.txt (a line per case). Exit 0 when every chosen case
ran and passed, 1 otherwise, 2 when it cannot run.
"""
from __future__ import annotations

import contextlib
import importlib
import io
import os
import random
import sys
import time
import traceback
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.environ.get("OUT") or "/tmp/out"
API_NAMES = ("fp8_fp4_mqa_logits", "fp8_fp4_paged_mqa_logits", "fp8_mqa_logits", "fp8_paged_mqa_logits",
             "get_paged_mqa_logits_metadata", "get_num_sms")
PREFILL_FIELDS = ("is_fp4", "logits_dtype", "weights_dtype", "compressed_logits", "clean_logits", "seq_len",
                  "seq_len_kv", "num_heads", "head_dim", "disable_cp")
PAGED_FIELDS = ("is_varlen", "is_fp4", "logits_dtype", "weights_dtype", "block_kv", "use_2d_context_lens",
                "clean_logits", "batch_size", "next_n", "max_tokens_per_batch", "num_heads", "head_dim", "avg_kv")


def say(msg: str = "") -> None:
    print(msg, flush=True)


def find_dg_root() -> str | None:
    cands = [os.environ.get("DG_ROOT"), "/tmp/DeepGEMM", os.path.join(ROOT, ".anchor", "DeepGEMM"),
             os.path.join(ROOT, "..", "shared", "anchors", "deepgemm", "DeepGEMM")]
    for c in cands:
        if c and os.path.isfile(os.path.join(c, "tests", "test_attention.py")):
            return os.path.abspath(c)
    return None


def import_deep_gemm(root: str):
    """The real deep_gemm when its extension imports; else its Python parts over a stub extension.

    The stub is enough: every entry point the tests call is replaced by the project's, and the helpers the
    tests use (deep_gemm.testing, deep_gemm.utils casts) are plain torch."""
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        import deep_gemm  # noqa: F401

        say(f"deep_gemm: the real package from {os.path.dirname(deep_gemm.__file__)}")
        return deep_gemm, "real"
    except Exception as e:  # noqa: BLE001  (no _C built here, or it does not load)
        for k in [k for k in sys.modules if k == "deep_gemm" or k.startswith("deep_gemm.")]:
            del sys.modules[k]
        say(f"deep_gemm: the extension does not import ({type(e).__name__}: {str(e).splitlines()[0][:160]}); "
            f"using its Python sources from {root}/deep_gemm over a stub extension (the API under test is the "
            f"project's either way)")

    def missing(name):
        def f(*a, **k):
            raise RuntimeError(f"deep_gemm._C.{name} is a stub here (DeepGEMM's extension is not loaded)")
        f.__name__ = name
        return f

    c = types.ModuleType("deep_gemm._C")
    c.__getattr__ = lambda name: missing(name) if not name.startswith("__") else (_ for _ in ()).throw(
        AttributeError(name))
    pkg = types.ModuleType("deep_gemm")
    pkg.__path__ = [os.path.join(root, "deep_gemm")]
    pkg.__file__ = os.path.join(root, "deep_gemm", "__init__.py")
    pkg._C = c
    sys.modules["deep_gemm"] = pkg
    sys.modules["deep_gemm._C"] = c
    pkg.testing = importlib.import_module("deep_gemm.testing")
    pkg.utils = importlib.import_module("deep_gemm.utils")
    return pkg, "stub"


def swap_api(dg) -> list[str]:
    """Point deep_gemm's entry points at mqa_cli's. Returns the names mqa_cli lacks (they raise)."""
    import mqa_cli

    lacking = []
    for name in API_NAMES:
        fn = getattr(mqa_cli, name, None)
        if fn is None:
            lacking.append(name)

            def fn(*a, _n=name, **k):
                raise AttributeError(f"mqa_cli has no {_n} (the test calls deep_gemm.{_n})")
        setattr(dg, name, fn)
    return lacking


def event_bench_kineto(fn, kernel_names, num_tests: int = 30, suppress_kineto_output: bool = False, **_):
    """Stands in for deep_gemm.testing.bench_kineto: the whole call timed with CUDA events (mean of a few
    calls after one warm-up). Names of a separate clean kernel get NaN: the project fuses the -inf fill."""
    import torch

    names = (kernel_names,) if isinstance(kernel_names, str) else tuple(kernel_names)
    fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(5):
        fn()
    b.record()
    torch.cuda.synchronize()
    t = a.elapsed_time(b) / 5 / 1e3
    times = tuple(float("nan") if "clean" in nm else t for nm in names)
    return times if not isinstance(kernel_names, str) else times[0]


def label(kind: str, case: tuple) -> str:
    fields = PREFILL_FIELDS if kind == "prefill" else PAGED_FIELDS
    parts = []
    for k, v in zip(fields, case):
        if k in ("is_fp4", "is_varlen", "weights_dtype", "max_tokens_per_batch", "use_2d_context_lens", "block_kv"):
            continue  # constant on sm90
        if hasattr(v, "itemsize"):  # a torch dtype
            v = {2: "bf16", 4: "fp32"}.get(v.itemsize, str(v))
        short = {"logits_dtype": "out", "compressed_logits": "cmp", "clean_logits": "clean", "seq_len": "S",
                 "seq_len_kv": "SK", "num_heads": "H", "head_dim": "D", "disable_cp": "nocp", "batch_size": "B",
                 "next_n": "n", "avg_kv": "L"}.get(k, k)
        parts.append(f"{short}={int(v) if isinstance(v, bool) else v}")
    return f"{kind} " + " ".join(parts)


def main() -> int:
    root = find_dg_root()
    if root is None:
        say("deepgemm tests: SKIP (DeepGEMM's sources not found: set DG_ROOT, or carry .anchor)")
        return 2
    import torch

    dg, how = import_deep_gemm(root)
    tests_dir = os.path.join(root, "tests")
    if tests_dir not in sys.path:
        sys.path.insert(0, tests_dir)
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    try:
        mod = importlib.import_module("test_attention")
    except Exception as e:  # noqa: BLE001
        say(f"deepgemm tests: SKIP (cannot import {tests_dir}/test_attention.py: {type(e).__name__}: {e})")
        traceback.print_exc()
        return 2
    if not torch.cuda.is_available():
        say("deepgemm tests: SKIP (no CUDA device)")
        return 2
    arch = mod.get_arch_major()

    # 1. Collect the cases: sample_mqa_cases captures the enumerated list and runs none.
    found: dict[str, list] = {}

    def capture(name, cases):
        found[name] = list(cases)
        return []

    mod.sample_mqa_cases = capture
    with contextlib.redirect_stdout(io.StringIO()):
        mod.test_mqa_logits()
        mod.test_paged_mqa_logits()
    total_all = sum(len(v) for v in found.values())
    say(f"DeepGEMM tests/test_attention.py (sm{arch}0 branch): prefill {len(found.get('prefill', []))} cases, "
        f"paged {len(found.get('paged', []))} cases, {total_all} in all")

    # 2. Choose and order.
    kinds = [k.strip() for k in os.environ.get("DGT_KINDS", "prefill,paged").split(",") if k.strip()]
    n_env = os.environ.get("DGT_CASES")
    chosen = []
    for kind in kinds:
        cases = found.get(kind, [])
        if n_env:
            cases = random.Random(0 if kind == "prefill" else 100000).sample(cases, min(int(n_env), len(cases)))
        chosen += [(kind, c) for c in cases]
    # shuffled, so that a run cut short by the budget is still a spread over every parameter
    random.Random(0).shuffle(chosen)
    budget = float(os.environ.get("DGT_BUDGET_S", "540"))

    # 3. Swap the API; keep DeepGEMM's helpers; replace only the kernel-name profiling.
    lacking = swap_api(dg)
    if lacking:
        say(f"NOTE: mqa_cli lacks {', '.join(lacking)}: cases that call them fail")
    mod.bench_kineto = event_bench_kineto
    say(f"running {len(chosen)} cases ({'sample of ' + n_env + ' per test' if n_env else 'all'}), "
        f"budget {budget:.0f} s, device {torch.cuda.get_device_name()}, deep_gemm {how}")

    os.makedirs(OUT, exist_ok=True)
    rep = open(os.path.join(OUT, "deepgemm.txt"), "w")
    rep.write(f"# DeepGEMM test_attention.py against mqa_cli; {len(chosen)} of {total_all} cases chosen\n")
    t_start = time.time()
    passed, failed, ran, failures, dead = 0, 0, 0, [], None
    slowest = {"prefill": 0.0, "paged": 0.0}
    for i, (kind, case) in enumerate(chosen):
        elapsed = time.time() - t_start
        if elapsed + max(2.0, slowest[kind]) > budget:
            say(f"time budget: stopping after {ran} cases ({elapsed:.0f} s of {budget:.0f})")
            break
        name = label(kind, case)
        mod.sample_mqa_cases = lambda _n, _c, _case=case: [_case]
        torch.manual_seed(i)
        random.seed(i)
        buf = io.StringIO()
        t0 = time.time()
        err = None
        try:
            with contextlib.redirect_stdout(buf):
                (mod.test_mqa_logits if kind == "prefill" else mod.test_paged_mqa_logits)()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001  (an assertion of the test, or an error of the API)
            tb = traceback.extract_tb(e.__traceback__)
            where = next((f for f in reversed(tb) if f.filename.endswith("test_attention.py")), tb[-1] if tb else None)
            loc = f"{os.path.basename(where.filename)}:{where.lineno} `{(where.line or '').strip()[:120]}`" if where else ""
            msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
            err = f"{type(e).__name__}: {msg} at {loc}"
            if "CUDA error" in str(e) or "illegal memory access" in str(e) or "CUDA-capable" in str(e):
                dead = err
        dt = time.time() - t0
        ran += 1
        slowest[kind] = max(slowest[kind], dt)
        perf = next((ln.strip() for ln in buf.getvalue().splitlines() if ln.strip().startswith(">") and "running" not in ln), "")
        if err is None:
            passed += 1
            rep.write(f"PASS {name} | {dt:.1f} s | {perf}\n")
            say(f"[{ran:3d}] PASS {name} ({dt:.1f} s) {perf[perf.find(':') + 1:].strip()[:90]}")
        else:
            failed += 1
            failures.append((name, err))
            rep.write(f"FAIL {name} | {dt:.1f} s | {err}\n")
            say(f"[{ran:3d}] FAIL {name} ({dt:.1f} s): {err}")
        rep.flush()
        torch.cuda.empty_cache()
        if dead:
            say(f"the CUDA context is lost ({dead}); the remaining cases cannot run in this process")
            break
    not_run = len(chosen) - ran
    summary = (f"deepgemm tests: {passed} passed, {failed} failed of {len(chosen)}"
               + (f" ({not_run} not run: {'CUDA context lost' if dead else 'time budget'})" if not_run else "")
               + (f"; the full sm90 set is {total_all}" if len(chosen) != total_all else "")
               + f" [{time.time() - t_start:.0f} s]")
    rep.write(summary + "\n")
    rep.close()
    if failures:
        say("first failures:")
        for name, err in failures[:10]:
            say(f"  {name}: {err}")
    say(summary)
    return 0 if failed == 0 and not_run == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
