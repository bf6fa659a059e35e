"""Config sweep of the paged decode kernel on the GPU (memory-bound: bytes in flight decide).

Usage (on the GPU): python3 scripts/sweep_paged.py → a table, and $OUT/sweep_paged.csv if $OUT is set.
"""
import csv
import itertools
import os
from dataclasses import replace

import torch
import triton

from mqa_cli import dispatch, launch, paged, targets

BW = 4.3e12  # measured device-to-device copy rate on the H200


def main():
    tgt = targets.detect()
    rows = []
    shapes = [(64, 65536, 1), (64, 65536, 2), (8, 65536, 1), (128, 8192, 1)]
    for B, C, T in shapes:
        spec = paged.PagedSpec(batch=B, next_n=T, context_len=C, context_jitter=0.3, block_size=64, heads=64,
                               dim=128, clean_logits=False)
        prob = paged.problem_from_spec(spec)
        t = prob.materialise("cuda")
        base = dispatch.plan(prob.shape, tgt).config
        out = launch.alloc_logits(t.S, t.N, "cuda")
        results = []
        for bkv, stages, warps, split_scale in itertools.product((64, 128), (3, 5), (4, 8), (1, 2)):
            tiles = base.schedule["tiles_per_split"] * 64 // bkv * split_scale
            cfg = replace(base, constexprs=dict(base.constexprs, BLOCK_KV=bkv),
                          options=dict(base.options, num_stages=stages, num_warps=warps),
                          schedule=dict(base.schedule, tiles_per_split=max(1, tiles)))
            name = f"kv{bkv} s{stages} w{warps} split{split_scale}"
            try:
                fn = lambda: launch.launch(t, cfg, out)  # noqa: E731
                fn()
                us = triton.testing.do_bench_cudagraph(fn, rep=30, return_mode="median") * 1e3
            except Exception as e:  # a config that does not fit is a result, not a crash
                print(f"B{B} C{C} T{T} {name}: failed {type(e).__name__}: {str(e)[:80]}", flush=True)
                continue
            frac = prob.counts.bytes / (us * 1e-6) / BW
            results.append((us, name, frac))
            rows.append({"B": B, "C": C, "next_n": T, "variant": name, "us": round(us, 2), "bw_frac": round(frac, 3)})
        results.sort()
        for us, name, frac in results[:4]:
            print(f"B{B:<4d} C{C:<6d} T{T}  {name:24s} {us:8.1f} µs  {100 * frac:5.1f} % of 4.3 TB/s", flush=True)
        del t, out
        torch.cuda.empty_cache()
    if os.environ.get("OUT") and rows:
        with open(os.path.join(os.environ["OUT"], "sweep_paged.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
