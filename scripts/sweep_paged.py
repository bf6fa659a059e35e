"""Config sweep of the paged decode kernel on the GPU (memory-bound: bytes in flight decide).

Usage (on the GPU): python3 scripts/sweep_paged.py [--wide] → a table, and $OUT/sweep_paged.csv if $OUT is set.
--wide adds 256-token tiles, 8 warps and more pipeline depths, and checks every config's logits against
the reference (a config that computes something else is reported, never ranked).
"""
import csv
import itertools
import os
from dataclasses import replace

import torch
import triton

import sys

from mqa_cli import dispatch, launch, paged, targets
from mqa_cli.verify import compare

BW = 4.3e12  # measured device-to-device copy rate on the H200


def main():
    tgt = targets.detect()
    rows = []
    wide = "--wide" in sys.argv
    shapes = [(64, 65536, 1), (64, 65536, 2), (8, 65536, 1), (128, 65536, 1)] if wide else \
        [(64, 65536, 1), (64, 65536, 2), (8, 65536, 1), (128, 8192, 1)]
    grid = list(itertools.product((128, 256), (3, 5), (4, 8), (1, 2))) if wide else \
        list(itertools.product((64, 128), (3, 5), (4, 8), (1, 2)))
    for B, C, T in shapes:
        spec = paged.PagedSpec(batch=B, next_n=T, context_len=C, context_jitter=0.3, block_size=64, heads=64,
                               dim=128, clean_logits=False)
        prob = paged.problem_from_spec(spec)
        t = prob.materialise("cuda")
        base = dispatch.plan(prob.shape, tgt).config
        out = launch.alloc_logits(t.S, t.N, "cuda")
        ref = t.reference(clean_logits=True) if wide else None  # -inf marks the dead entries compare skips
        results = []
        for bkv, stages, warps, split_scale in list(grid):
            tiles = base.schedule["tiles_per_split"] * base.constexprs["BLOCK_KV"] // bkv * split_scale
            cfg = replace(base, constexprs=dict(base.constexprs, BLOCK_KV=bkv),
                          options=dict(base.options, num_stages=stages, num_warps=warps),
                          schedule=dict(base.schedule, tiles_per_split=max(1, tiles)))
            name = f"kv{bkv} s{stages} w{warps} split{split_scale}"
            try:
                fn = lambda: launch.launch(t, cfg, out)  # noqa: E731
                out.fill_(float("nan"))  # poison: a config that writes nothing must not pass on stale logits
                fn()
                if ref is not None:
                    c = compare(out, ref, False)
                    if not (c.ok and c.unwritten == 0):
                        print(f"B{B} C{C} T{T} {name}: WRONG rel {c.rel_error:.2e} unwritten {c.unwritten}", flush=True)
                        continue
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
        del t, out, ref
        torch.cuda.empty_cache()
        if os.environ.get("OUT") and rows:  # after every shape: a run cut short keeps what it measured
            with open(os.path.join(os.environ["OUT"], "sweep_paged.csv"), "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)


if __name__ == "__main__":
    main()
