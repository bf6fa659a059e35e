"""The indexer end to end: logits + top-k (k = 2048) on the H200, three ways, side by side in one process.

  (a)  fused   mqa_cli.api.topk.fp8_mqa_topk / fp8_paged_mqa_topk (bounded memory; sorted=False: the set, and
               sorted=True: by descending logit)
  (b)  ours    mqa_cli logits (clean) + torch.topk(k)
  (c)  dg      DeepGEMM logits + torch.topk(k), when `import deep_gemm` works (inside the anchor harness:
               PYTHONPATH=/tmp/DeepGEMM after .anchor/run.sh has built or unpacked it)
plus: the selection kernel alone on the same logits (tools/tune/sweep_topk.py sweeps its configs),
the rows each selection path took, recall of (a) against a float32 reference on sampled rows, and the
peak device memory of 1x131072 causal H64 through fp8_mqa_topk (goal < 8 GiB).
Times: triton.testing.do_bench medians (L2 flushed). Decode rows: DeepGEMM needs 2-D context lens and
clean_logits=False there, so (b) and (c) time clean_logits=False logits + torch.topk (time only: the
tails past each row are not masked). Each shape runs in its own try/except (one line on failure).

Usage: `mqa-logits bench --suite indexer [--csv F]`, or python3 -m mqa_cli.bench.indexer [--smoke] [--k 2048]
[--only NAME] [--no-dg] [--no-memory] [--csv F]. Without a GPU it runs tiny shapes on the
interpreter (times mean nothing). Writes $OUT/indexer.csv when OUT is set (or --csv).
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import time
import traceback

import torch

from ..api import topk as T
from ..api.logits import fp8_paged_mqa_logits, mqa_logits
from ..check.paged_reference import reference_paged
from ..check.reference import reference_logits
from ..launch import interpreter
from ..problem.paged import PagedSpec
from ..problem.paged_tensors import Paged, random_paged
from ..problem.tensors import Prefill, quantize_per_token
from . import timing

FP8 = torch.float8_e4m3fn
ROWS = []  # CSV rows


def say(*a):
    print(*a, flush=True)


def bench_us(fn, dev: str) -> float:
    return timing.time_fn(fn, dev == "cuda").median_us


def windows(kind: str, S: int, N: int, dev: str):
    """int32 ks, ke: causal (query p sees kv [0, p + 1)) or ratio4 (4 packed sequences of S/4 queries
    over N/4 compressed kv rows each: [b * N/4, b * N/4 + clamp((p + 1) // 4, 1, N/4)))."""
    i = torch.arange(S, device=dev, dtype=torch.int64)
    if kind == "causal":
        ks, ke = torch.zeros_like(i), i + 1
    else:
        sq, skv = S // 4, N // 4
        b, p = i // sq, i % sq
        ks = b * skv
        ke = ks + ((p + 1) // 4).clamp(1, skv)
    return ks.int(), ke.int()


def prefill(S: int, N: int, H: int, D: int, kind: str, dev: str, seed: int = 0) -> Prefill:
    """q randn -> e4m3 (made in row blocks: no [S, H, D] fp32 temporary), kv quantised per row,
    weights randn."""
    g = torch.Generator(device=dev).manual_seed(seed)
    q = torch.empty(S, H, D, dtype=FP8, device=dev)
    step = max(1, (1 << 26) // (H * D))
    for r0 in range(0, S, step):
        r1 = min(S, r0 + step)
        q[r0:r1] = torch.randn(r1 - r0, H, D, generator=g, device=dev).to(FP8)
    kv, sc = quantize_per_token(torch.randn(N, D, generator=g, device=dev))
    w = torch.randn(S, H, generator=g, device=dev)
    ks, ke = windows(kind, S, N, dev)
    return Prefill(q, kv, sc, w, ks, ke)


def import_dg(smoke: bool, off: bool):
    if smoke or off:
        return None
    try:
        import deep_gemm

        say(f"DeepGEMM: {os.path.dirname(deep_gemm.__file__)}")
        return deep_gemm
    except Exception as e:  # noqa: BLE001
        say(f"DeepGEMM not available ({type(e).__name__}: {e}): column (c) left empty")
        return None


def fmt(x, spec=".1f"):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def record(name, **kw):
    ROWS.append({"shape": name, **kw})
    a, a_s, b, c = kw.get("fused_us"), kw.get("fused_sorted_us"), kw.get("ours_topk_us"), kw.get("dg_topk_us")
    say(f"{name:<22} fused {fmt(a):>9}  fused+sort {fmt(a_s):>9}  ours+topk {fmt(b):>9}  dg+topk {fmt(c):>9}  "
        f"(a)/(c) {fmt(a / c if a and c else None, '.3f'):>6}  (a)/(b) {fmt(a / b if a and b else None, '.3f'):>6}  "
        f"select {fmt(kw.get('select_us')):>8}  torch.topk {fmt(kw.get('torch_topk_us')):>8}  "
        f"recall min {fmt(kw.get('recall_min'), '.4f')} mean {fmt(kw.get('recall_mean'), '.4f')}  "
        f"paths {kw.get('paths', '-')}")


def paths(logits, k, ks, ke) -> str:
    """Rows per selection path: registers / sampled candidates / exact passes / split over programs / torch."""
    stats = torch.empty(logits.shape[0], dtype=torch.int32, device=logits.device)
    T.topk_select(logits, k, ks, ke, stats=stats, values=False)
    return "/".join(str(int(c)) for c in torch.bincount(stats.long(), minlength=5).tolist())


def run_prefill(name, S, N, H, D, kind, k, dev, dg, sample_rows):
    t = prefill(S, N, H, D, kind, dev)
    q, kv, sc, w, ks, ke = t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke
    kk = min(k, N)
    fused = lambda: T.fp8_mqa_topk(q, kv, sc, w, ks, ke, k, sorted=False)  # noqa: E731
    fused_sorted = lambda: T.fp8_mqa_topk(q, kv, sc, w, ks, ke, k, sorted=True)  # noqa: E731
    ours = lambda: torch.topk(mqa_logits(q, kv, sc, w, ks, ke, clean_logits=True), kk, dim=1)  # noqa: E731
    r = {"fused_us": bench_us(fused, dev), "fused_sorted_us": bench_us(fused_sorted, dev),
         "ours_topk_us": bench_us(ours, dev)}
    logits = mqa_logits(q, kv, sc, w, ks, ke, clean_logits=True)
    r["ours_logits_us"] = bench_us(lambda: mqa_logits(q, kv, sc, w, ks, ke, clean_logits=True), dev)
    r["torch_topk_us"] = bench_us(lambda: torch.topk(logits, kk, dim=1), dev)
    r["select_us"] = bench_us(lambda: T.topk_select(logits, k, ks, ke, values=False), dev)
    r["paths"] = paths(logits, k, ks, ke)
    logits = None  # frees the matrix (every timing that reads it is done)
    if dg is not None:
        try:
            dgf = lambda: torch.topk(dg.fp8_mqa_logits(q, (kv, sc), w, ks, ke, clean_logits=True), kk, dim=1)  # noqa
            r["dg_topk_us"] = bench_us(dgf, dev)
            r["dg_logits_us"] = bench_us(lambda: dg.fp8_mqa_logits(q, (kv, sc), w, ks, ke, clean_logits=True), dev)
        except Exception as e:  # noqa: BLE001
            say(f"  {name}: DeepGEMM failed: {type(e).__name__}: {str(e)[:200]}")
    idx = fused()
    rows = torch.linspace(0, S - 1, min(S, sample_rows), device=dev).long().unique()
    sub = Prefill(q[rows], kv, sc, w[rows], ks[rows], ke[rows])
    ref = reference_logits(sub, dtype=torch.float32)
    r["recall_min"], r["recall_mean"] = T.topk_recall(idx[rows], ref, k, ks[rows], ke[rows])
    record(name, **r)


def run_paged(name, B, C, H, D, k, dev, dg, sample_seqs):
    t = random_paged(PagedSpec(batch=B, next_n=1, context_len=C, context_jitter=0.3, block_size=64, heads=H, dim=D),
                     device=dev)
    q, cache, w, ctx, table, maxlen = t.q, t.kv_cache, t.weights, t.context_lens, t.block_table, int(t.max_context_len)
    ctx2d = ctx[:, None].contiguous()
    kk = min(k, maxlen)
    fused = lambda: T.fp8_paged_mqa_topk(q, cache, w, ctx, table, maxlen, k, sorted=False)  # noqa: E731
    fused_sorted = lambda: T.fp8_paged_mqa_topk(q, cache, w, ctx, table, maxlen, k, sorted=True)  # noqa: E731
    ours = lambda: torch.topk(fp8_paged_mqa_logits(q, cache, w, ctx2d, table, None, maxlen, clean_logits=False),  # noqa
                              kk, dim=1)
    r = {"fused_us": bench_us(fused, dev), "fused_sorted_us": bench_us(fused_sorted, dev),
         "ours_topk_us": bench_us(ours, dev)}
    logits = fp8_paged_mqa_logits(q, cache, w, ctx2d, table, None, maxlen, clean_logits=False)
    ends = T.paged_row_ends(ctx, 1, maxlen)
    starts = torch.zeros_like(ends)
    r["torch_topk_us"] = bench_us(lambda: torch.topk(logits, kk, dim=1), dev)
    r["select_us"] = bench_us(lambda: T.topk_select(logits, k, starts, ends, values=False), dev)
    r["paths"] = paths(logits, k, starts, ends)
    logits = None  # frees the matrix (every timing that reads it is done)
    if dg is not None:
        try:
            meta = dg.get_paged_mqa_logits_metadata(ctx2d, 64, dg.get_num_sms())
            dgf = lambda: torch.topk(dg.fp8_paged_mqa_logits(q, cache, w, ctx2d, table, meta, maxlen,  # noqa: E731
                                                             clean_logits=False), kk, dim=1)
            r["dg_topk_us"] = bench_us(dgf, dev)
        except Exception as e:  # noqa: BLE001
            say(f"  {name}: DeepGEMM failed: {type(e).__name__}: {str(e)[:200]}")
    idx = fused()
    nb = min(B, sample_seqs)
    sub = Paged(q[:nb], cache, w[:nb], ctx[:nb], table[:nb], maxlen)
    ref = reference_paged(sub, dtype=torch.float32, clean_logits=True)
    r["recall_min"], r["recall_mean"] = T.topk_recall(idx[:nb], ref, k)
    record(name, **r)


def peak_memory(name, S, H, D, k, dev):
    """Peak device memory of fp8_mqa_topk on S x S causal (inputs included), and its time (one run)."""
    t = prefill(S, S, H, D, "causal", dev)
    if dev == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated() if dev == "cuda" else 0
    out = {}
    for label, srt in (("set", False), ("sorted", True)):
        t0 = time.perf_counter()
        idx = T.fp8_mqa_topk(t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke, k, sorted=srt)
        if dev == "cuda":
            torch.cuda.synchronize()
        out[label] = (time.perf_counter() - t0) * 1e3
        del idx
    plan = T.topk_memory(S, S, k)
    if dev == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2 ** 30
        say(f"{name}: peak device memory {peak:.2f} GiB (inputs {base / 2 ** 30:.2f} GiB; goal < 8 GiB: "
            f"{'MET' if peak < 8 else 'MISSED'}); wall {out['set']:.0f} ms (set), {out['sorted']:.0f} ms (sorted); "
            f"plan: {plan['blocks']} blocks of {plan['rows_per_block']} rows, {plan['total_bytes'] / 2 ** 30:.2f} GiB "
            f"beyond the inputs")
        ROWS.append({"shape": name, "peak_gib": round(peak, 3), "inputs_gib": round(base / 2 ** 30, 3),
                     "fused_us": out["set"] * 1e3, "fused_sorted_us": out["sorted"] * 1e3})
    else:
        say(f"{name}: ran in {out['set']:.0f} ms (interpreter; no device memory counter on the CPU); plan {plan}")


def main(argv: list | None = None) -> None:
    interpreter.enable_if_no_gpu(note=False)
    ROWS.clear()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU interpreter")
    ap.add_argument("--k", type=int, default=None)
    ap.add_argument("--only", default=None, help="run shapes whose name contains this text")
    ap.add_argument("--no-dg", action="store_true")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--csv", default=None, help="write the rows as CSV here (default $OUT/indexer.csv)")
    args = ap.parse_args(argv)
    dev = "cpu" if args.smoke or not torch.cuda.is_available() else "cuda"
    smoke = dev == "cpu"
    k = args.k or (8 if smoke else 2048)
    dg = import_dg(smoke, args.no_dg)
    if smoke:
        H, D = 16, 64
        pre = [("smoke 1x48 causal", 48, 48, "causal"), ("smoke ratio4", 64, 32, "ratio4")]
        paged = [("smoke paged B2 C200", 2, 200)]
        mem = ("smoke 1x64 causal", 64)
    else:
        H, D = 64, 128
        pre = [("1x4096 causal", 4096, 4096, "causal"), ("1x8192 causal", 8192, 8192, "causal"),
               ("4x8192 ratio 4", 32768, 8192, "ratio4"), ("1x32768 causal", 32768, 32768, "causal")]
        paged = [(f"paged B{b} C{c // 1024}K n1", b, c) for b in (64, 128) for c in (8192, 65536)]
        mem = ("1x131072 causal H64", 131072)
    say(f"device {torch.cuda.get_device_name() if dev == 'cuda' else 'cpu (interpreter)'}, k = {k}, H {H}, D {D}")
    for name, S, N, kind in pre:
        if args.only and args.only not in name:
            continue
        try:
            run_prefill(name, S, N, H, D, kind, k, dev, dg, 64 if smoke else 256)
        except Exception as e:  # noqa: BLE001
            say(f"{name}: FAILED {type(e).__name__}: {str(e)[:300]}")
            traceback.print_exc(limit=3)
        if dev == "cuda":
            torch.cuda.empty_cache()
    for name, B, C in paged:
        if args.only and args.only not in name:
            continue
        try:
            run_paged(name, B, C, H, D, k, dev, dg, 2 if smoke else 8)
        except Exception as e:  # noqa: BLE001
            say(f"{name}: FAILED {type(e).__name__}: {str(e)[:300]}")
            traceback.print_exc(limit=3)
        if dev == "cuda":
            torch.cuda.empty_cache()
    if not args.no_memory and (not args.only or args.only in mem[0]):
        try:
            peak_memory(mem[0], mem[1], H, D, k, dev)
        except Exception as e:  # noqa: BLE001
            say(f"{mem[0]}: FAILED {type(e).__name__}: {str(e)[:300]}")
    say("\nµs, do_bench medians. fused = fp8_mqa_topk (logits in bounded blocks + selection kernel), set order; "
        "fused+sort = sorted by logit; ours/dg+topk = logits then torch.topk; select = the selection kernel alone "
        "on the full logits; paths = rows in registers / sampled candidates / exact passes / split over programs / "
        "torch.topk.")
    path = args.csv or (os.path.join(os.environ["OUT"], "indexer.csv") if os.environ.get("OUT") else None)
    if path and ROWS:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        keys = sorted({key for row in ROWS for key in row}, key=lambda x: (x != "shape", x))
        with open(path, "w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=keys)
            wr.writeheader()
            wr.writerows(ROWS)
        say(f"wrote {path}")


if __name__ == "__main__":
    main()
