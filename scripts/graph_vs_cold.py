"""Why `bench --graph` times decode above the sweeps: the same API call timed both ways, with the SM clock.

`bench --graph` (mqa_cli.timing.time_graph) replays the call back to back, as triton's do_bench_cudagraph does;
the sweeps and scripts/sync_ab.py (mqa_cli.timing.time_kernel) replay it once after each L2 flush. A large decode
step reads more than the L2 holds either way, so a difference there is the card's state: a 700 W cap lowers the
clock under sustained load, and the flush gives it pauses. Each call is timed both ways in alternating order, with
the SM clock and board power NVML reads right after; then the dispatched config launched directly on the same
inputs (no host work, as the sweeps launch it) once per L2 flush, and the GPU kernels one API call runs
(torch.profiler), so that any GPU work the API adds around the kernel shows.

    python3 scripts/graph_vs_cold.py [--shapes B:C:next_n,...]      (the H200; a Markdown table on stdout)
"""
from __future__ import annotations

import argparse
import sys

SHAPES = ((128, 65536, 1), (128, 65536, 2), (128, 65536, 3), (128, 65536, 6))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=",".join(":".join(map(str, s)) for s in SHAPES))
    args = ap.parse_args(argv)
    import torch

    import mqa_cli
    from mqa_cli import timing
    from mqa_cli.paged_problem import PagedSpec
    from mqa_cli.paged_tensors import random_paged

    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from decode_split_ab import _clock_power

    print(f"{torch.cuda.get_device_name()}: the API's decode call timed back to back (bench --graph) and once per L2 "
          "flush (the sweeps), µs, with MHz and W after each")
    print("| B | C | next_n | round | back to back | MHz, W | after a flush | MHz, W | ratio | direct, after a flush "
          "| MHz, W |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    from torch.profiler import ProfilerActivity, profile

    from mqa_cli import dispatch, launch, targets
    from mqa_cli.launchers import args_builder
    for spec in args.shapes.split(","):
        B, C, n = (int(x) for x in spec.split(":"))
        t = random_paged(PagedSpec(batch=B, next_n=n, context_len=C, context_jitter=0.3, clean_logits=False,
                                   seed=B + C), device="cuda")

        def call():
            return mqa_cli.fp8_paged_mqa_logits(t.q, t.kv_cache, t.weights, t.context_lens, t.block_table, None,
                                                t.max_context_len, clean_logits=False)

        shape = dispatch.Shape("paged", t.S, t.max_context_len, t.heads, t.dim, False, batch=B, next_n=n,
                               block_size=t.block_size)
        cfg = dispatch.plan(shape, targets.detect()).config
        out = launch.alloc_logits(t.S, t.max_context_len, "cuda")
        a = args_builder(cfg)(t, cfg, out, None)
        kern = cfg.jitted()

        def direct():
            kern[a.grid](*a.args, **a.constexprs, **a.options)

        call()
        torch.cuda.synchronize()
        for rnd in range(2):
            res = {}
            for how in (("graph", "cold", "direct") if rnd == 0 else ("direct", "cold", "graph")):
                us = (timing.time_graph(call) if how == "graph" else
                      timing.time_kernel(call if how == "cold" else direct, rep_ms=100))
                res[how] = (us, _clock_power(torch))
            g, c, d = res["graph"], res["cold"], res["direct"]
            print(f"| {B} | {C // 1024}K | {n} | {rnd + 1} | {g[0]:.1f} | {g[1]} | {c[0]:.1f} | {c[1]} | "
                  f"{g[0] / c[0]:.3f} | {d[0]:.1f} | {d[1]} |", flush=True)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize()
        kernels = [(e.name, e.device_time) for e in prof.events() if e.device_time > 0]
        print(f"  one API call runs {len(kernels)} GPU kernels: "
              + "; ".join(f"{nm[:70]} {us:.1f} µs" for nm, us in kernels), flush=True)
        del t
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
