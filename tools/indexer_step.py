"""The indexer step as engines pay for it (logits, then a top-k of 2048), timed on the card in one process.

Each row times, on the same inputs, CUDA-graph replay after an L2 flush (median of alternating rounds):
  fused   - this project's fp8_paged_mqa_topk / fp8_mqa_topk (compressed, as vLLM's prefill), sorted=False;
  ours    - this project's logits alone (the form the engine calls);
  DG      - DeepGEMM's logits alone (the DeepGEMM importable as `deep_gemm`);
  DG+FI   - DeepGEMM's logits, then FlashInfer's ragged top-k (vLLM 0.34's `flashinfer` indexer backend), when the
            FlashInfer top-k instrument (../shared/anchors/flashinfer-topk, built with its build.sh) is importable
            as `fi_topk` (--fi DIR puts DIR on the path);
  DG+t    - DeepGEMM's logits, masked to each row's window, then torch.topk.
Every selection is checked before it is timed against the exact top-k of the logits its own call computes: the
selected values equal, as a multiset, the k largest live values, every index is inside its row's window and
distinct, and -1 fills the rest.

Usage (on the card, DeepGEMM and the project importable):
  python3 tools/indexer_step.py decode [--shapes B:C,...] [--next-n 1,2] [--heads 64,32] [--fi DIR]
  python3 tools/indexer_step.py prefill [--only TEXT] [--fi DIR]
A Markdown table on stdout and in $OUT/indexer_<form>.md; exit 1 when a selection is not exact.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch

K, D, PAGE = 2048, 128, 64
DEV = "cuda"


def graph(fn):
    """fn captured in a CUDA graph after a warm-up on a side stream."""
    fn()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def timed(graphs: dict, rounds: int) -> dict:
    """µs per replay, the median over rounds that alternate the order, each round the median of 5 flushed replays."""
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=DEV)
    res = {k: [] for k in graphs}
    names = list(graphs)
    for r in range(rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            ts = []
            for _ in range(5):
                flush.zero_()
                a, b = torch.cuda.Event(True), torch.cuda.Event(True)
                a.record()
                graphs[n].replay()
                b.record()
                b.synchronize()
                ts.append(a.elapsed_time(b) * 1000)
            res[n].append(statistics.median(ts))
    return {n: statistics.median(v) for n, v in res.items()}


def masked(L, offs, lens):
    """L [R, M] with every column c >= lens[r] set to -inf (offs unused: the columns are already relative)."""
    cols = torch.arange(L.shape[1], device=L.device)
    return L.masked_fill(cols[None, :] >= lens[:, None], float("-inf"))


def exact(idx, L, offs, lens, block=512) -> int:
    """Rows whose selection is not the exact top-k of L [R, M] (column c of row r is position offs[r] + c, live
    for c < lens[r]); idx [R, k] holds positions or -1."""
    bad = 0
    for r0 in range(0, idx.shape[0], block):
        i, x = idx[r0:r0 + block].long(), L[r0:r0 + block].float()
        o, n = offs[r0:r0 + block].long()[:, None], lens[r0:r0 + block].long()[:, None]
        rel = torch.where(i >= 0, i - o, i)
        valid = i >= 0
        inside = (~valid | ((rel >= 0) & (rel < n))).all(1)
        got = torch.where(valid, x.gather(1, rel.clamp(0, x.shape[1] - 1)), float("-inf")).sort(1, True).values
        live = masked(x, None, n[:, 0])
        kk = min(K, x.shape[1])
        want = torch.full_like(got, float("-inf"))
        want[:, :kk] = live.topk(kk, 1).values
        s = torch.where(valid, rel, -1 - torch.arange(K, device=i.device)[None, :]).sort(1).values
        distinct = (s[:, 1:] != s[:, :-1]).all(1)
        count = valid.sum(1) == n[:, 0].clamp(max=K)
        ok = inside & distinct & count & (got == want).all(1)
        bad += int((~ok).sum())
    return bad


def paged_inputs(B, C, T, H, g):
    ctx = (torch.full((B, T), C, dtype=torch.int32, device=DEV) - (T - 1)
           + torch.arange(T, device=DEV, dtype=torch.int32))
    nblk = (C + PAGE - 1) // PAGE
    kv = torch.empty(B * nblk, PAGE, 1, D + 4, dtype=torch.uint8, device=DEV)
    flat = kv.view(B * nblk, -1)
    flat[:, : PAGE * D] = (torch.randn(B * nblk, PAGE * D, device=DEV, generator=g) * 0.5).to(
        torch.float8_e4m3fn).view(torch.uint8)
    flat[:, PAGE * D:] = (torch.rand(B * nblk, PAGE, device=DEV, generator=g) + 0.5).view(torch.uint8)
    bt = torch.randperm(B * nblk, device=DEV, generator=g).to(torch.int32).view(B, nblk)
    q = (torch.randn(B, T, H, D, device=DEV, generator=g) * 0.5).to(torch.float8_e4m3fn)
    w = torch.randn(B * T, H, device=DEV, generator=g)
    return q, kv, w, ctx, bt, nblk * PAGE


def decode(a, dg, fi, mqa_cli) -> list:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    g = torch.Generator(device=DEV).manual_seed(7)
    rows = []
    for H in (int(x) for x in a.heads.split(",")):
        for spec in a.shapes.split(","):
            B, C = (int(x) for x in spec.split(":"))
            for T in (int(x) for x in a.next_n.split(",")):
                q, kv, w, ctx, bt, M = paged_inputs(B, C, T, H, g)
                lens = ctx.reshape(-1)
                zeros = torch.zeros_like(lens)
                meta_dg = dg.get_paged_mqa_logits_metadata(ctx, PAGE, sms)
                meta = mqa_cli.get_paged_mqa_logits_metadata(ctx, PAGE, sms)
                out = {}
                calls = {
                    "fused": lambda: out.__setitem__("fused", mqa_cli.fp8_paged_mqa_topk(
                        q, kv, w, ctx, bt, M, K, schedule_meta=meta, sorted=False)),
                    "ours": lambda: out.__setitem__("ours", mqa_cli.fp8_paged_mqa_logits(
                        q, kv, w, ctx, bt, meta, M, clean_logits=False)),
                    "DG": lambda: out.__setitem__("DG", dg.fp8_paged_mqa_logits(
                        q, kv, w, ctx, bt, meta_dg, M, clean_logits=False)),
                    "DG+t": lambda: out.__setitem__("DG+t", masked(dg.fp8_paged_mqa_logits(
                        q, kv, w, ctx, bt, meta_dg, M, clean_logits=False), zeros, lens).topk(K, 1).indices),
                }
                if fi is not None:
                    calls["DG+FI"] = lambda: out.__setitem__("DG+FI", fi.ragged(dg.fp8_paged_mqa_logits(
                        q, kv, w, ctx, bt, meta_dg, M, clean_logits=False), zeros, lens, K))
                for f in calls.values():
                    f()
                torch.cuda.synchronize()
                Lo, Ld = out["ours"], out["DG"]
                dg_pick = torch.where(masked(Ld, zeros, lens).gather(1, out["DG+t"].long()) > float("-inf"),
                                      out["DG+t"], -1)
                bad = {"fused": exact(out["fused"], Lo, zeros, lens), "DG+t": exact(dg_pick, Ld, zeros, lens)}
                if fi is not None:
                    bad["DG+FI"] = exact(out["DG+FI"], Ld, zeros, lens)
                t = timed({n: graph(f) for n, f in calls.items()}, a.rounds)
                rows.append(dict(form="decode", shape=f"H{H} B{B} C{C // 1024}K n{T}", t=t, bad=bad))
                print(rows[-1], flush=True)
                del out, Lo, Ld
                torch.cuda.empty_cache()
    return rows


def prefill(a, dg, fi, mqa_cli) -> list:
    from mqa_cli.problem import matrix
    from mqa_cli.problem.suites import longest_row
    from mqa_cli.problem.tensors import random_prefill

    cases = [(b.name, random_prefill(b.spec, device=DEV), longest_row(b.spec)) for b in matrix.SUITES["seed"]
             if not a.only or a.only in b.name]
    if not a.only or "chunk" in a.only:  # a chunked prefill: the last 8K query rows of a 64K sequence
        from mqa_cli.problem.prefill import ProblemSpec

        t = random_prefill(ProblemSpec(seq=8192, heads=64, dim=128), device=DEV)
        N = 65536
        from mqa_cli.problem.tensors import quantize_per_token

        kv, sc = quantize_per_token(torch.randn(N, D, device=DEV), "e4m3fn")
        ke = (N - 8192 + 1 + torch.arange(8192, device=DEV)).to(torch.int32)
        t = type(t)(t.q, kv, sc, t.weights, torch.zeros_like(ke), ke)
        cases.append(("8K rows chunk of 64K causal", t, N))
    rows = []
    for name, t, M in cases:
        kv = (t.kv, t.kv_scales)
        lens = t.ke - t.ks
        out = {}
        calls = {
            "fused": lambda: out.__setitem__("fused", mqa_cli.fp8_mqa_topk(
                t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke, K, max_seqlen_k=M, sorted=False)),
            "ours": lambda: out.__setitem__("ours", mqa_cli.fp8_fp4_mqa_logits((t.q, None), kv, t.weights, t.ks, t.ke,
                                                                              M)),
            "DG": lambda: out.__setitem__("DG", dg.fp8_fp4_mqa_logits((t.q, None), kv, t.weights, t.ks, t.ke,
                                                                        clean_logits=False, max_seqlen_k=M)),
            "DG+t": lambda: out.__setitem__("DG+t", masked(dg.fp8_fp4_mqa_logits(
                (t.q, None), kv, t.weights, t.ks, t.ke, clean_logits=False, max_seqlen_k=M), None, lens).topk(
                    min(K, M), 1).indices),
        }
        if fi is not None:
            calls["DG+FI"] = lambda: out.__setitem__("DG+FI", fi.ragged(dg.fp8_fp4_mqa_logits(
                (t.q, None), kv, t.weights, t.ks, t.ke, clean_logits=False, max_seqlen_k=M), t.ks, lens, K))
        for f in calls.values():
            f()
        torch.cuda.synchronize()
        Lo, Ld = out["ours"], out["DG"]
        pick = out["DG+t"]
        pick = torch.where(masked(Ld, None, lens).gather(1, pick.long()) > float("-inf"), pick + t.ks[:, None], -1)
        if pick.shape[1] < K:
            pick = torch.cat([pick, pick.new_full((pick.shape[0], K - pick.shape[1]), -1)], 1)
        bad = {"fused": exact(out["fused"], Lo, t.ks, lens), "DG+t": exact(pick, Ld, t.ks, lens)}
        if fi is not None:
            bad["DG+FI"] = exact(out["DG+FI"], Ld, t.ks, lens)
        del Lo, Ld, pick
        tm = timed({n: graph(f) for n, f in calls.items()}, a.rounds)
        out.clear()
        rows.append(dict(form="prefill compressed", shape=name, t=tm, bad=bad))
        print(rows[-1], flush=True)
        torch.cuda.empty_cache()
    return rows


def table(rows, head) -> str:
    names = [n for n in ("fused", "ours", "DG", "DG+FI", "DG+t") if any(n in r["t"] for r in rows)]
    md = [head, "", "| form | shape | " + " | ".join(f"{n} µs" for n in names)
          + " | fused / DG+FI | fused / DG+t | fused / ours logits | checks |", "|---" * (len(names) + 6) + "|"]
    for r in rows:
        t = r["t"]
        ratio = lambda x: f"{t['fused'] / t[x]:.3f}" if x in t else "-"
        checks = ", ".join(f"{n} {'exact' if not b else f'{b} rows off'}" for n, b in r["bad"].items())
        md.append(f"| {r['form']} | {r['shape']} | " + " | ".join(f"{t[n]:.1f}" for n in names)
                  + f" | {ratio('DG+FI')} | {ratio('DG+t')} | {ratio('ours')} | {checks} |")
    return "\n".join(md)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("form", choices=("decode", "prefill"))
    ap.add_argument("--shapes", default="1:8192,1:32768,1:65536,8:8192,8:32768,8:65536,64:8192,64:65536,"
                    "128:8192,128:65536")
    ap.add_argument("--next-n", default="1,2")
    ap.add_argument("--heads", default="64")
    ap.add_argument("--only", default="", help="prefill: shapes whose name holds this text")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--fi", default="", help="folder holding the built fi_topk extension")
    a = ap.parse_args()
    import deep_gemm as dg

    import mqa_cli

    fi = None
    if a.fi:
        sys.path.insert(0, a.fi)
        import fi_topk as fi
    import triton

    head = (f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
            f"DeepGEMM {getattr(dg, '__version__', '?')}, k {K}, D {D}, page {PAGE}")
    print(head, flush=True)
    rows = (decode if a.form == "decode" else prefill)(a, dg, fi, mqa_cli)
    text = table(rows, head)
    print(text)
    out = os.environ.get("OUT", "/tmp")
    with open(os.path.join(out, f"indexer_{a.form}.md"), "w") as f:
        f.write(text + "\n")
    return 1 if any(any(r["bad"].values()) for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
