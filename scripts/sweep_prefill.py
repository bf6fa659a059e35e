"""Config sweep of the Triton prefill kernels on the GPU: which tile shapes / warps / stages win per shape.

Usage (on the GPU): python scripts/sweep_prefill.py [--quick]  → a table, and $OUT/sweep.csv if $OUT is set.
"""
import csv
import itertools
import os
import sys
from dataclasses import replace

import torch
import triton

from mqa_cli import launch, matrix, source
from mqa_cli.timing import tflops
from mqa_kernels import configs


def variants(spec, quick):
    clean = spec.clean_logits
    base_h = configs.h64d128_config(heads=spec.heads, dim=spec.dim, S=spec.S, clean=clean, target="sm90")
    base_t = configs.tiled_config(heads=spec.heads, dim=spec.dim, S=spec.S, N=spec.N, clean=clean, backend="cuda",
                                  units=132)
    yield "tiled", base_t
    bq_list = [2, 4, 8] if spec.heads == 32 else [2, 4]
    grid = itertools.product(bq_list, [64, 128], [4, 8], [2, 3, 4])
    for bq, bkv, warps, stages in grid:
        if quick and (bkv == 128 and warps == 4):
            continue
        if bq * spec.heads > 256 or (bkv == 128 and warps == 4 and bq * spec.heads == 256):
            continue
        c = dict(base_h.constexprs, BLOCK_Q=bq, BLOCK_KV=bkv, EVEN_S=spec.S % bq == 0)
        yield f"h64d128 q{bq} kv{bkv} w{warps} s{stages}", replace(
            base_h, constexprs=c, options={"num_warps": warps, "num_stages": stages})


def main():
    quick = "--quick" in sys.argv
    rows = []
    for b in matrix.SEED_SUITE[:5]:
        prob = source.from_spec(b.spec)
        t = prob.materialise("cuda")
        out = launch.alloc_logits(t.S, t.N, "cuda")
        results = []
        for name, cfg in variants(b.spec, quick):
            try:
                fn = lambda: launch.launch(t, cfg, out)  # noqa: E731
                fn()
                ms = triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")
            except Exception as e:  # a config that does not fit (smem, registers) is a result, not a crash
                print(f"{b.name:20s} {name:32s} failed: {type(e).__name__}: {str(e)[:80]}", flush=True)
                continue
            us = ms * 1e3
            results.append((us, name))
            rows.append({"shape": b.name, "variant": name, "us": round(us, 1),
                         "tflops": round(tflops(prob.counts.flop, us), 1)})
        results.sort()
        for us, name in results[:5]:
            print(f"{b.name:20s} {name:32s} {us:9.1f} µs {tflops(prob.counts.flop, us):7.1f} TF/s", flush=True)
        del t, out
        torch.cuda.empty_cache()
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "sweep.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
