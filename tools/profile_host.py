"""Host time of an eager API call against launching the compiled kernel directly (GPU; issue 9).

Per case (paged decode B1 / B8 / B64 at C 8K, B8 with schedule_meta None and given; prefill 1x1024 and
1x4096), host µs per call, back-to-back with no sync (the best of 3 rounds):
  bare        the compiled kernel's C launcher with prebuilt arguments (what the API's fast path calls)
  api         fp8_paged_mqa_logits / fp8_mqa_logits, repeated with the same signature (the fast path), with
              MQA_LOGITS_CHECK=0 in the environment
  api unset   the same with MQA_LOGITS_CHECK unset
  deepgemm    DeepGEMM's API on the same inputs, when `import deep_gemm` works (its metadata made beforehand)
and the GPU time of one API call (triton.testing.do_bench on the replay of a CUDA graph of it). Goal: api - bare
<= 10 µs. The table goes to stdout and to $OUT/hostcost.txt (OUT defaults to /tmp/out).

    python3 tools/profile_host.py                 # on the GPU machine, repository root (< 90 s)
    PROFILE_SMOKE=1 python3 tools/profile_host.py # on CPU: tiny inputs through the interpreter; checks the
                                                    # script only (no fast path, no graphs: those columns are -)
PROFILE_TOP=N adds the N functions with the most own time in the API call (cProfile) per case.
"""
from __future__ import annotations

import cProfile
import io
import os
import pstats
import time

SMOKE = os.environ.get("PROFILE_SMOKE") == "1"
if SMOKE:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

import mqa_cli  # noqa: E402
from mqa_cli.api import logits as api, fastpath
from mqa_cli.bench import timing  # noqa: E402
from mqa_cli.problem.paged import PagedSpec  # noqa: E402
from mqa_cli.problem.paged_tensors import random_paged  # noqa: E402
from mqa_cli.problem.prefill import ProblemSpec  # noqa: E402
from mqa_cli.problem.tensors import random_prefill  # noqa: E402

DEV = "cpu" if SMOKE else "cuda"
OUT = os.environ.get("OUT") or "/tmp/out"
CALLS, ROUNDS, WARM = (2, 1, 1) if SMOKE else (200, 3, 5)
GOAL_US = 10.0


def sync() -> None:
    if not SMOKE:
        torch.cuda.synchronize()


def host_us(fn) -> float:
    """Host µs per call of back-to-back calls (no sync inside a round); the best of ROUNDS rounds."""
    return timing.host_us(fn, CALLS, ROUNDS, WARM, on_gpu=not SMOKE)


def env_check(value: str | None):
    """Run with MQA_LOGITS_CHECK set to `value` (None: unset), restoring it afterwards."""
    class Scope:
        def __enter__(self):
            self.old = os.environ.pop("MQA_LOGITS_CHECK", None)
            if value is not None:
                os.environ["MQA_LOGITS_CHECK"] = value

        def __exit__(self, *exc):
            os.environ.pop("MQA_LOGITS_CHECK", None)
            if self.old is not None:
                os.environ["MQA_LOGITS_CHECK"] = self.old

    return Scope()


def graph_us(fn) -> float | None:
    """GPU µs of one call: do_bench on the replay of a CUDA graph of it (None on CPU)."""
    return None if SMOKE else timing.time_kernel(fn)


def bare_launch(sig, ins):
    """The recorded entry's launcher with arguments built once (None when the call has no fast path)."""
    entry = fastpath.get(sig)
    if entry is None:
        return None
    out = torch.empty(entry.rows, entry.padded, dtype=entry.dtype, device=entry.device)
    r = entry.relaunch
    args = (*entry.rebuild(ins, out[:, :entry.cols]), *r.tail)
    stream = entry.stream()
    run, gx, gy, gz, function, packed = r.run, *r.grid, r.function, r.packed
    return lambda: run(gx, gy, gz, stream, function, packed, None, None, None, *args)


def deepgemm():
    if SMOKE:
        return None
    try:
        import deep_gemm

        return deep_gemm
    except Exception as e:  # noqa: BLE001
        print(f"deep_gemm not importable ({type(e).__name__}: {e}): no DeepGEMM column")
        return None


def paged_case(B: int, T: int, given: bool, dg):
    """(api call, bare launch, deepgemm call or None) of a paged decode case; context lens 2-D as engines pass."""
    C = 64 if SMOKE else 8192
    H, D = (8, 64) if SMOKE else (64, 128)
    t = random_paged(PagedSpec(batch=B, next_n=T, context_len=C, block_size=64, heads=H, dim=D, clean_logits=False),
                     device=DEV)
    steps = torch.arange(T, device=DEV)
    ctx = (t.context_lens[:, None] - T + steps[None, :] + 1).clamp_min(0).to(torch.int32).contiguous()
    meta = mqa_cli.get_paged_mqa_logits_metadata(ctx, 64, mqa_cli.get_num_sms()) if given else None
    ins = (t.q, t.kv_cache, t.weights, ctx, t.block_table, meta)
    f = mqa_cli.fp8_paged_mqa_logits
    call = lambda: f(t.q, t.kv_cache, t.weights, ctx, t.block_table, meta, t.max_context_len)  # noqa: E731
    call()
    bare = bare_launch(api._paged_signature(ins, t.max_context_len, False, False), ins)
    dg_call = None
    if dg is not None:
        dmeta = dg.get_paged_mqa_logits_metadata(ctx, 64, dg.get_num_sms())
        dg_call = lambda: dg.fp8_paged_mqa_logits(t.q, t.kv_cache, t.weights, ctx, t.block_table, dmeta,  # noqa
                                                  t.max_context_len, clean_logits=False)
    return call, bare, dg_call


def prefill_case(S: int, dg):
    H, D = (8, 32) if SMOKE else (64, 128)
    p = random_prefill(ProblemSpec(seq=S, heads=H, dim=D), device=DEV)
    ins = (p.q, p.kv, p.kv_scales, p.weights, p.ks, p.ke)
    f = mqa_cli.fp8_mqa_logits
    call = lambda: f(p.q, (p.kv, p.kv_scales), p.weights, p.ks, p.ke)  # noqa: E731
    call()
    bare = bare_launch(api._prefill_signature(ins, True, 0, False), ins)
    dg_call = None
    if dg is not None:
        dg_call = lambda: dg.fp8_mqa_logits(p.q, (p.kv, p.kv_scales), p.weights, p.ks, p.ke)  # noqa: E731
    return call, bare, dg_call


def top_functions(fn, n: int) -> str:
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(CALLS):
        fn()
    pr.disable()
    sync()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(n)
    return "\n".join(s.getvalue().splitlines()[6:8 + n])


def fmt(x) -> str:
    return "-" if x is None else f"{x:.1f}"


def main() -> None:
    t_start = time.time()
    dg = deepgemm()
    small = 2 if SMOKE else None
    cases = [
        ("paged B1 C8K n1, schedule given", lambda: paged_case(1, 1, True, dg)),
        ("paged B8 C8K n1, schedule None", lambda: paged_case(small or 8, 1, False, dg)),
        ("paged B8 C8K n1, schedule given", lambda: paged_case(small or 8, 1, True, dg)),
        ("paged B64 C8K n2, schedule given", lambda: paged_case(small or 64, 2, True, dg)),
        ("prefill 1x1024 causal", lambda: prefill_case(16 if SMOKE else 1024, dg)),
        ("prefill 1x4096 causal", lambda: prefill_case(24 if SMOKE else 4096, dg)),
    ]
    top = int(os.environ.get("PROFILE_TOP", "0"))
    rows, verdicts = [], []
    for name, make in cases:
        call, bare, dg_call = make()
        bare_us = host_us(bare) if bare is not None else None
        with env_check("0"):
            api_us = host_us(call)
        with env_check(None):
            unset_us = host_us(call)
        dg_us = host_us(dg_call) if dg_call is not None else None
        gpu_us = graph_us(call)
        over = None if bare_us is None else max(api_us, unset_us) - bare_us
        verdict = "-" if over is None else ("PASS" if over <= GOAL_US else "FAIL")
        verdicts.append(verdict)
        rows.append([name, fmt(bare_us), fmt(api_us), fmt(unset_us), fmt(dg_us), fmt(gpu_us),
                     "-" if over is None else f"{over:+.1f}", verdict])
        if top:
            print(f"\n=== {name}: top {top} functions by own time\n{top_functions(call, top)}")
        del call, bare, dg_call
        if not SMOKE:
            torch.cuda.empty_cache()
    headers = ["case", "bare µs", "api µs", "api µs (env unset)", "deepgemm µs", "gpu µs (graph)", "api - bare",
               f"<= {GOAL_US:.0f} µs"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    table = "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows])
    device = "CPU interpreter (smoke: times mean nothing)" if SMOKE else torch.cuda.get_device_name()
    import triton

    text = (f"host µs per call, back-to-back (best of {ROUNDS} x {CALLS}); {device}; torch {torch.__version__}, "
            f"triton {triton.__version__}\n{table}\n"
            f"bare: the compiled kernel's launcher with prebuilt arguments; api: the public call on its fast path "
            f"(MQA_LOGITS_CHECK=0 / unset); gpu: do_bench of a CUDA-graph replay of one call.\n"
            f"goal met on {verdicts.count('PASS')} of {len(verdicts)} cases ({verdicts.count('-')} without a fast "
            f"path); {time.time() - t_start:.0f} s.\n")
    print("\n" + text, end="")
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "hostcost.txt"), "w") as fh:
        fh.write(text)


if __name__ == "__main__":
    main()
