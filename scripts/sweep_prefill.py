"""Config sweep of the Triton prefill kernels on the GPU: which tile shapes / warps / stages win per shape.

Usage (on the GPU): python scripts/sweep_prefill.py [--quick]  → a table, and $OUT/sweep.csv if $OUT is set.
"""
import csv
import os
import sys
from dataclasses import replace

import torch
import triton

from mqa_cli import launchers, matrix, source
from mqa_cli.reference import reference_logits
from mqa_cli.timing import tflops
from mqa_cli.verify import compare
from mqa_kernels.h64d128.config import h64d128_config
from mqa_kernels.tiled.config import tiled_config


def variants(spec, quick):
    """The dispatched config, then one knob at a time around it (order, -inf width, rows, warps, registers)."""
    clean = spec.clean_logits
    base = h64d128_config(heads=spec.heads, dim=spec.dim, S=spec.S, N=spec.N, clean=clean, target="sm90")
    yield "tiled", tiled_config(heads=spec.heads, dim=spec.dim, S=spec.S, N=spec.N, clean=clean, backend="cuda",
                                units=132)
    yield "h64d128 (dispatched)", base

    def vary(name, options=None, **constexprs):
        c = dict(base.constexprs, **constexprs)
        c["EVEN_S"] = spec.S % c["BLOCK_Q"] == 0
        return name, replace(base, constexprs=c, options=dict(base.options, **(options or {})))

    for order in (0, 1, 2):
        for dead in (1, 4, 8):
            if (order, dead) != (base.constexprs["ORDER"], base.constexprs["DEAD_MULT"]):
                yield vary(f"order{order} dead{dead}", ORDER=order, DEAD_MULT=dead)
    bq = base.constexprs["BLOCK_Q"]
    yield vary(f"q{bq // 2}", BLOCK_Q=bq // 2)
    yield vary(f"q{bq // 2} order2", BLOCK_Q=bq // 2, ORDER=2)
    yield vary("w8", {"num_warps": 8})
    yield vary("w8 maxnreg128", {"num_warps": 8, "maxnreg": 128})
    yield vary("s4", {"num_stages": 4})
    if not quick:
        yield vary("kv128 w8", {"num_warps": 8}, BLOCK_KV=128)


def main():
    quick = "--quick" in sys.argv
    rows = []
    for b in matrix.SEED_SUITE[:5]:
        prob = source.from_spec(b.spec)
        t = prob.materialise("cuda")
        out = launchers.output_for(t, next(variants(b.spec, quick))[1])
        ref = reference_logits(t)
        results = []
        for name, cfg in variants(b.spec, quick):
            try:
                fn = lambda: launchers.run(t, cfg, out)  # noqa: E731
                out.fill_(float("nan"))
                fn()
                check = compare(out, ref, b.spec.clean_logits)
                if not check.ok:  # a wrong config is never ranked
                    print(f"{b.name:20s} {name:32s} WRONG: {check.line()}", flush=True)
                    continue
                ms = triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")
            except Exception as e:  # a config that does not fit (smem, registers) is a result, not a crash
                print(f"{b.name:20s} {name:32s} failed: {type(e).__name__}: {str(e)[:80]}", flush=True)
                continue
            us = ms * 1e3
            results.append((us, name))
            rows.append({"shape": b.name, "variant": name, "us": round(us, 1),
                         "tflops": round(tflops(prob.counts.flop, us), 1)})
        results.sort()
        for us, name in results[:6]:
            print(f"{b.name:20s} {name:32s} {us:9.1f} µs {tflops(prob.counts.flop, us):7.1f} TF/s", flush=True)
        del t, out, ref
        torch.cuda.empty_cache()
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "sweep.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
