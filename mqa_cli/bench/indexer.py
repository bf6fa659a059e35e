"""The indexer step as engines pay for it (logits, then a top-k of 2048), timed in one process on the same inputs.

Columns (µs, CUDA-graph replay after an L2 flush, the median of rounds that alternate the order):
  fused   - this project's fp8_paged_mqa_topk (decode) / fp8_mqa_topk (compressed, as vLLM's prefill), sorted=False;
  ours    - this project's logits alone (the form the engine calls);
  DG      - DeepGEMM's logits alone, when `import deep_gemm` works;
  DG+FI   - DeepGEMM's logits, then FlashInfer's ragged top-k (vLLM's `flashinfer` indexer backend): the installed
            `flashinfer`, else the FlashInfer top-k instrument importable as `fi_topk` (--fi DIR puts DIR on the path);
  DG+t    - DeepGEMM's logits, masked to each row's window, then torch.topk.
Every selection is checked (`exact`) before it is timed against the exact top-k of the logits its own call computes.
Without a GPU: tiny shapes through the Triton interpreter, our columns only, one plain call each (the checks hold;
the times mean nothing). A Markdown table on stdout, the rows as CSV with --csv F or in $OUT/indexer.csv; exit 1
when a selection is not exact. Usage: `mqa-logits bench --suite indexer [--csv F]`, or python3 -m
mqa_cli.bench.indexer [--form decode|prefill|both] [--shapes B:C,...] [--next-n 1,2] [--heads 64,32] [--only TEXT]
[--rounds 4] [--fi DIR] [--csv F].
"""
from __future__ import annotations

import argparse
import csv
import importlib
import os
import sys

import torch

from . import timing

PAGE = 64
# Per device: k, head dim, decode shapes / next_n / heads, and the chunked prefill (query rows, kv rows, heads).
SETUP = {"cuda": dict(k=2048, dim=128, shapes="1:8192,1:32768,1:65536,8:8192,8:32768,8:65536,64:8192,64:65536,"
                      "128:8192,128:65536", next_n="1,2", heads="64", chunk=(8192, 65536, 64)),
         "cpu": dict(k=8, dim=64, shapes="2:200", next_n="1,2", heads="16", chunk=(16, 80, 16))}


def timed(calls: dict, rounds: int, dev: str) -> dict:
    """µs a call: on a GPU the median over rounds of timing.side_by_side (each call one CUDA-graph replay after an L2
    flush, the order reversed every round); on the CPU one plain call each."""
    if dev != "cuda":
        return {n: timing.time_fn(f, on_gpu=False).median_us for n, f in calls.items()}
    rounds_ = timing.side_by_side(calls, rounds=rounds)
    return {n: timing.median_in_rounds(rounds_, n) for n in calls}


def masked(L, lens):
    """L [R, M] with every column c >= lens[r] set to -inf (the columns are relative to each row's start)."""
    cols = torch.arange(L.shape[1], device=L.device)
    return L.masked_fill(cols[None, :] >= lens[:, None], float("-inf"))


def exact(idx, L, offs, lens, block=512) -> int:
    """Rows whose selection is not the exact top-k of L [R, M] (column c of row r is position offs[r] + c, live
    for c < lens[r]); idx [R, k] holds positions or -1. Exact: the selected values equal, as a multiset, the k largest
    live values, every index is inside its row's window and distinct, and -1 fills the rest."""
    bad, K = 0, idx.shape[1]
    for r0 in range(0, idx.shape[0], block):
        i, x = idx[r0:r0 + block].long(), L[r0:r0 + block].float()
        o, n = offs[r0:r0 + block].long()[:, None], lens[r0:r0 + block].long()[:, None]
        rel = torch.where(i >= 0, i - o, i)
        valid = i >= 0
        inside = (~valid | ((rel >= 0) & (rel < n))).all(1)
        got = torch.where(valid, x.gather(1, rel.clamp(0, x.shape[1] - 1)), float("-inf")).sort(1, True).values
        kk = min(K, x.shape[1])
        want = torch.full_like(got, float("-inf"))
        want[:, :kk] = masked(x, n[:, 0]).topk(kk, 1).values
        s = torch.where(valid, rel, -1 - torch.arange(K, device=i.device)[None, :]).sort(1).values
        distinct = (s[:, 1:] != s[:, :-1]).all(1)
        count = valid.sum(1) == n[:, 0].clamp(max=K)
        ok = inside & distinct & count & (got == want).all(1)
        bad += int((~ok).sum())
    return bad


def paged_inputs(B, C, T, H, D, g, dev):
    ctx = (torch.full((B, T), C, dtype=torch.int32, device=dev) - (T - 1)
           + torch.arange(T, device=dev, dtype=torch.int32))
    nblk = (C + PAGE - 1) // PAGE
    kv = torch.empty(B * nblk, PAGE, 1, D + 4, dtype=torch.uint8, device=dev)
    flat = kv.view(B * nblk, -1)
    flat[:, : PAGE * D] = (torch.randn(B * nblk, PAGE * D, device=dev, generator=g) * 0.5).to(
        torch.float8_e4m3fn).view(torch.uint8)
    flat[:, PAGE * D:] = (torch.rand(B * nblk, PAGE, device=dev, generator=g) + 0.5).view(torch.uint8)
    bt = torch.randperm(B * nblk, device=dev, generator=g).to(torch.int32).view(B, nblk)
    q = (torch.randn(B, T, H, D, device=dev, generator=g) * 0.5).to(torch.float8_e4m3fn)
    w = torch.randn(B * T, H, device=dev, generator=g)
    return q, kv, w, ctx, bt, nblk * PAGE


def step(form, shape, fused, ours, dgl, offs, lens, M, a, fi, dev, K) -> dict:
    """One row: each call run once, its selection checked, then all timed. fused/ours/dgl make the tensors; column
    c of a logits row is position offs + c, live for c < lens."""
    fns = {"fused": fused, "ours": ours}
    if a.select:  # the same fused call with another selection kind (the A/B of a kind not in the tables yet)
        fns[f"fused {a.select}"] = with_kind(fused, a.select)
    if dgl is not None:
        fns["DG"] = dgl
        fns["DG+t"] = lambda: masked(dgl(), lens).topk(min(K, M), 1).indices
        if fi is not None:
            fns["DG+FI"] = lambda: fi(dgl(), offs, lens, K)
    out = {}
    calls = {n: (lambda n=n, f=f: out.__setitem__(n, f())) for n, f in fns.items()}
    for f in calls.values():
        f()
    if dev == "cuda":
        torch.cuda.synchronize()
    bad = {n: exact(out[n], out["ours"], offs, lens) for n in fns if n.startswith("fused")}
    if dgl is not None:
        Ld, pick = out["DG"], out["DG+t"]
        pick = torch.where(masked(Ld, lens).gather(1, pick.long()) > float("-inf"), pick + offs[:, None], -1)
        pick = torch.nn.functional.pad(pick, (0, K - pick.shape[1]), value=-1)  # torch.topk gives min(K, M) columns
        bad["DG+t"] = exact(pick, Ld, offs, lens)
        if fi is not None:
            bad["DG+FI"] = exact(out["DG+FI"], Ld, offs, lens)
        del Ld, pick
    t = timed(calls, a.rounds, dev)
    out.clear()
    row = dict(form=form, shape=shape, t=t, bad=bad)
    print(row, flush=True)
    if dev == "cuda":
        torch.cuda.empty_cache()
    return row


def with_kind(fn, kind: str):
    """fn with the selection kind `kind` in force while it runs (mqa_cli.api.topk.TUNING)."""
    from ..api import topk

    def call():
        topk.TUNING["kind"] = kind
        try:
            return fn()
        finally:
            topk.TUNING.pop("kind", None)
    return call


def decode(a, dg, fi, dev, cfg) -> list:
    import mqa_cli

    K, sms = cfg["k"], torch.cuda.get_device_properties(0).multi_processor_count if dev == "cuda" else 4
    g = torch.Generator(device=dev).manual_seed(7)
    rows = []
    for H in (int(x) for x in a.heads.split(",")):
        for spec in a.shapes.split(","):
            B, C = (int(x) for x in spec.split(":"))
            for T in (int(x) for x in a.next_n.split(",")):
                q, kv, w, ctx, bt, M = paged_inputs(B, C, T, H, cfg["dim"], g, dev)
                lens = ctx.reshape(-1)
                meta = mqa_cli.get_paged_mqa_logits_metadata(ctx, PAGE, sms)
                meta_dg = dg.get_paged_mqa_logits_metadata(ctx, PAGE, sms) if dg else None
                rows.append(step(
                    "decode", f"H{H} B{B} C{kib(C)} n{T}",
                    lambda: mqa_cli.fp8_paged_mqa_topk(q, kv, w, ctx, bt, M, K, schedule_meta=meta, sorted=False),
                    lambda: mqa_cli.fp8_paged_mqa_logits(q, kv, w, ctx, bt, meta, M, clean_logits=False),
                    dg and (lambda: dg.fp8_paged_mqa_logits(q, kv, w, ctx, bt, meta_dg, M, clean_logits=False)),
                    torch.zeros_like(lens), lens, M, a, fi, dev, K))
    return rows


def kib(n: int) -> str:
    return f"{n // 1024}K" if n % 1024 == 0 else str(n)


def prefill(a, dg, fi, dev, cfg) -> list:
    import mqa_cli
    from mqa_cli.api.topk import topk_memory
    from mqa_cli.problem import matrix
    from mqa_cli.problem.prefill import ProblemSpec
    from mqa_cli.problem.suites import longest_row
    from mqa_cli.problem.tensors import random_prefill

    (K, D), (S, N, H) = (cfg["k"], cfg["dim"]), cfg["chunk"]
    specs = ([(b.name, b.spec) for b in matrix.SUITES["seed"]] if dev == "cuda" else
             [("1x48 causal", ProblemSpec(seq=48, heads=16, dim=D)),
              ("2x64 ratio 4", ProblemSpec(batch=2, seq=64, ratio=4, heads=16, dim=D))])
    # a chunked prefill: the last S query rows of a causal sequence of N
    specs.append((f"{kib(S)} rows chunk of {kib(N)} causal", ProblemSpec(seq=S, seq_kv=N, heads=H, dim=D)))
    rows = []
    for name, spec in [(n, s) for n, s in specs if a.only in n]:  # --only: the shapes whose name holds it
        t, M = random_prefill(spec, device=dev), longest_row(spec)
        kv = (t.kv, t.kv_scales)
        rows.append(step(
            "prefill compressed", name,
            lambda: mqa_cli.fp8_mqa_topk(t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke, K, max_seqlen_k=M,
                                         sorted=False),
            lambda: mqa_cli.fp8_fp4_mqa_logits((t.q, None), kv, t.weights, t.ks, t.ke, M),
            dg and (lambda: dg.fp8_fp4_mqa_logits((t.q, None), kv, t.weights, t.ks, t.ke, clean_logits=False,
                                                  max_seqlen_k=M)),
            t.ks, t.ke - t.ks, M, a, fi, dev, K))
        rows[-1]["fused_mib"] = round(topk_memory(t.q.shape[0], t.kv.shape[0], K, max_seqlen_k=M, sorted=False)
                                      ["total_bytes"] / 2 ** 20, 1)
    return rows


def table(rows, head) -> str:
    other = sorted({n for r in rows for n in r["t"] if n.startswith("fused ")})  # --select's column
    names = [n for n in ("fused", *other, "ours", "DG", "DG+FI", "DG+t") if any(n in r["t"] for r in rows)]
    md = [head, "", "| form | shape | " + " | ".join(f"{n} µs" for n in names) + " | fused / DG+FI | "
          + "".join(f"{n} / DG+FI | " for n in other) + "fused / DG+t | fused / ours logits | checks |",
          "|---" * (len(names) + len(other) + 6) + "|"]
    for r in rows:
        t = r["t"]
        ratio = lambda x, y="fused": f"{t[y] / t[x]:.3f}" if x in t and y in t else "-"  # noqa: E731
        checks = ", ".join(f"{n} {'exact' if not b else f'{b} rows off'}" for n, b in r["bad"].items())
        md.append(f"| {r['form']} | {r['shape']} | " + " | ".join(f"{t[n]:.1f}" if n in t else "-" for n in names)
                  + f" | {ratio('DG+FI')} | " + "".join(f"{ratio('DG+FI', n)} | " for n in other)
                  + f"{ratio('DG+t')} | {ratio('ours')} | {checks} |")
    mem = [f"{r['shape']} {r['fused_mib']} MiB" for r in rows if "fused_mib" in r]
    if mem:
        md += ["", "fused prefill memory beyond its inputs (mqa_cli.api.topk.topk_memory): " + "; ".join(mem)]
    return "\n".join(md)


def engine_topk(fi_dir: str):
    """FlashInfer's ragged top-k as a call (logits, offsets, lengths, k) -> int32 [R, k]: the installed flashinfer,
    else the fi_topk instrument (fi_dir on the path); or None, and why not."""
    if fi_dir:
        sys.path.insert(0, fi_dir)
    why = []
    for name, attr in (("flashinfer.topk", "top_k_ragged_transform"), ("fi_topk", "ragged")):
        try:
            m = importlib.import_module(name)
            return getattr(m, attr), f"{name}.{attr} from {os.path.dirname(m.__file__)}"
        except Exception as e:  # noqa: BLE001
            why.append(f"{name}: {type(e).__name__}: {e}")
    return None, "; ".join(why)


def main(argv: list | None = None) -> int:
    from ..launch import interpreter

    interpreter.enable_if_no_gpu(note=False)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    cfg = SETUP[dev]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--form", choices=("decode", "prefill", "both"), default="both")
    ap.add_argument("--shapes", default=cfg["shapes"], help="decode: B:C,...")
    ap.add_argument("--next-n", default=cfg["next_n"])
    ap.add_argument("--heads", default=cfg["heads"], help="decode")
    ap.add_argument("--only", default="", help="prefill: shapes whose name holds this text")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--fi", default="", help="folder holding the built fi_topk extension")
    ap.add_argument("--select", default="", help="also time the fused call with this selection kind (e.g. radix)")
    ap.add_argument("--csv", default=None, help="write the rows as CSV here (default $OUT/indexer.csv)")
    a = ap.parse_args(argv)
    import triton

    dg = fi = None
    if dev == "cuda":
        try:
            import deep_gemm as dg
        except Exception as e:  # noqa: BLE001
            print(f"DeepGEMM columns left out: {type(e).__name__}: {e}", flush=True)
        if dg is not None:
            fi, why = engine_topk(a.fi)
            print(f"DG+FI: {why}" if fi else f"DG+FI column left out ({why})", flush=True)
    head = (f"{torch.cuda.get_device_name()}, DeepGEMM {getattr(dg, '__version__', '?') if dg else 'absent'}"
            if dev == "cuda" else "cpu (Triton interpreter): tiny shapes, our columns only, one plain call each, times "
            "mean nothing") + f", torch {torch.__version__}, triton {triton.__version__}, k {cfg['k']}, D {cfg['dim']}"
    print(head, flush=True)
    rows = (decode(a, dg, fi, dev, cfg) if a.form != "prefill" else []) + (
        prefill(a, dg, fi, dev, cfg) if a.form != "decode" else [])
    print(table(rows, head))
    path = a.csv or (os.path.join(os.environ["OUT"], "indexer.csv") if os.environ.get("OUT") else None)
    if path and rows:
        flat = [{"form": r["form"], "shape": r["shape"], **{f"{n}_us": round(v, 2) for n, v in r["t"].items()},
                 **{f"{n}_rows_off": b for n, b in r["bad"].items()}, "fused_mib": r.get("fused_mib", "")}
                for r in rows]
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for row in flat for k in row)), restval="")
            w.writeheader()
            w.writerows(flat)
        print(f"wrote {path}")
    return 1 if any(any(r["bad"].values()) for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
