"""Compressed logits on the ratio-4 shape (4x8192, DeepSeek V4 indexer): our full and compressed calls beside
DeepGEMM's, same inputs, one process (DeepGEMM importable: run after the anchor harness's build)."""
from __future__ import annotations

import torch
import triton

import mqa_cli
from mqa_cli.problem import ProblemSpec
from mqa_cli.reference import compress_logits, reference_logits
from mqa_cli.suites import longest_row
from mqa_cli.tensors import random_prefill


def us(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e3


def main():
    spec = ProblemSpec(batch=4, seq=8192, ratio=4, heads=64, dim=128)
    t = random_prefill(spec, device="cuda")
    M = longest_row(spec)
    calls = {
        "ours full clean": lambda: mqa_cli.fp8_mqa_logits(t.q, (t.kv, t.kv_scales), t.weights, t.ks, t.ke),
        "ours full no-clean": lambda: mqa_cli.fp8_mqa_logits(t.q, (t.kv, t.kv_scales), t.weights, t.ks, t.ke, False),
        "ours compressed": lambda: mqa_cli.fp8_mqa_logits(t.q, (t.kv, t.kv_scales), t.weights, t.ks, t.ke, False, M),
    }
    try:
        import deep_gemm as dg

        calls["DeepGEMM full clean"] = lambda: dg.fp8_mqa_logits(t.q, (t.kv, t.kv_scales), t.weights, t.ks, t.ke)
        calls["DeepGEMM compressed"] = lambda: dg.fp8_mqa_logits(t.q, (t.kv, t.kv_scales), t.weights, t.ks, t.ke,
                                                                 clean_logits=False, max_seqlen_k=M)
    except Exception as e:  # noqa: BLE001
        print(f"DeepGEMM not importable: {type(e).__name__}: {e}")
    # correctness of our compressed logits on 64 sampled rows against float32
    rows = torch.randperm(t.S, generator=torch.Generator().manual_seed(0))[:64].cuda()
    out = calls["ours compressed"]()[rows].float()
    sub = type(t)(t.q[rows], t.kv, t.kv_scales, t.weights[rows], t.ks[rows], t.ke[rows])
    ref = compress_logits(reference_logits(sub), sub.ks, sub.ke, M)
    live = torch.isfinite(ref)
    rel = float((out[live] - ref[live]).norm() / ref[live].norm())
    print(f"4x8192 ratio 4, max_seqlen_k {M}: our compressed rel err {rel:.2e} on 64 rows")
    times = {}
    for _ in range(2):  # alternate, keep the min of the two medians
        for name, fn in calls.items():
            fn()
            times[name] = min(times.get(name, float("inf")), us(fn))
    for name, v in times.items():
        print(f"{name:24s} {v:9.1f} µs")
    if "DeepGEMM compressed" in times:
        print(f"ours compressed / DeepGEMM compressed: {times['ours compressed'] / times['DeepGEMM compressed']:.3f}; "
              f"ours compressed / ours full clean: {times['ours compressed'] / times['ours full clean']:.3f}")


if __name__ == "__main__":
    main()
