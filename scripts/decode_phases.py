"""Where one small decode step's time goes, phase by phase: the decode kernel built with STAMPS reads the SM's clock
at each phase of every program and writes it into its schedule-metadata argument (unread with the split computed in
the kernel), one launch at a time from a cold L2.

Phases (cycles from the program's entry, median / 90th percentile over the programs that got a cache block):
split (the in-kernel schedule), setup (rings and barriers, before warp_specialize), the producer's start, its first
block ids, its first cache-block copy issued, the math warpgroup's start, q in shared memory, the first block in
shared memory, its wgmma done, its logits stored (issued), the math warpgroup's end. Also the programs' starts
against the first one and the span from the first start to the last end (ns, %globaltimer), beside the graph-replay
time of the same launch without the stamps and of DeepGEMM's (when importable).

    python3 scripts/decode_phases.py [--shapes B:C,...] [--next-n 1,2] [--launches 20] [--keys K=V,...]  (the H200)
next_n 2 runs with one wgmma a block and one accumulator (PIPE off): what STAMPS supports. --keys: more override keys
of the decode config (e.g. SPLIT_INSIDE=0: the range found before warp_specialize and handed to the partitions; the
producer's split then shows as the "split" phase of the prologue).
"""
from __future__ import annotations

import argparse
import sys

PHASES = (("split", 1), ("setup", 2), ("producer start", 3), ("first ids", 4), ("first copy issued", 5),
          ("math start", 6), ("q arrived", 14), ("first block in", 7), ("its wgmma done", 8),
          ("its logits stored", 9), ("math end", 10))


def _pct(xs, q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))] if xs else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="1:8192,8:8192", help="B:C pairs, comma-separated")
    ap.add_argument("--next-n", default="1,2")
    ap.add_argument("--launches", type=int, default=20, help="cold launches whose stamps are pooled")
    ap.add_argument("--keys", default="", help="more override keys of the decode config, K=V,...")
    args = ap.parse_args(argv)
    import torch

    import mqa_cli
    from mqa_cli import timing
    from mqa_cli.compile import key_values
    from mqa_cli.launch_paged_ws import paged_ws_args
    from mqa_cli.paged_tensors import Paged
    from mqa_kernels.paged_ws_sm90.config import paged_ws_sm90_config

    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from decode_split_ab import _clock_power, _deep_gemm, harness_inputs

    dg, why = _deep_gemm()
    sms = mqa_cli.get_num_sms()
    flush = torch.empty(256 * 2 ** 20, dtype=torch.int8, device="cuda")
    print(f"{torch.cuda.get_device_name()}: decode phases (cycles from a program's entry; median / p90 over the "
          f"programs with a block, {args.launches} cold launches){'' if dg else '; DeepGEMM not importable: ' + why}")
    for spec in args.shapes.split(","):
        B, C = (int(x) for x in spec.split(":"))
        for n in (int(x) for x in args.next_n.split(",")):
            t, ctx, maxlen = harness_inputs(torch, B, C, n)
            t = Paged(t.q, t.kv_cache, t.weights, ctx, t.block_table, maxlen)
            base = paged_ws_sm90_config(heads=64, dim=128, next_n=n, block_size=64, batch=B, max_context_len=maxlen,
                                        clean=False, units=sms)
            ov = {"PIPE": False, "MATH_WG": 1, "MMA_N": 0, **key_values(args.keys)}
            cfg = paged_ws_sm90_config(heads=64, dim=128, next_n=n, block_size=64, batch=B, max_context_len=maxlen,
                                       clean=False, units=sms, override={**ov, "STAMPS": True})
            plain = paged_ws_sm90_config(heads=64, dim=128, next_n=n, block_size=64, batch=B, max_context_len=maxlen,
                                         clean=False, units=sms, override=ov)
            out = torch.empty((B * n, maxlen), device="cuda")
            la = paged_ws_args(t, cfg, out, None)
            programs = la.grid[0]
            stamps = torch.zeros((programs, 16), dtype=torch.int32, device="cuda")
            la.args[6] = stamps
            kern = cfg.jitted()
            lp = paged_ws_args(t, plain, torch.empty_like(out), None)
            kp = plain.jitted()
            pooled = {name: [] for name, _ in PHASES}
            starts, spans = [], []
            for i in range(args.launches + 2):
                stamps.zero_()
                flush.zero_()
                kern[la.grid](*la.args, **la.constexprs, **la.options)
                torch.cuda.synchronize()
                if i < 2:
                    continue  # the first launches compile and warm the instruction caches
                s = stamps.cpu().to(torch.int64)
                live = s[:, 7] != 0
                rel = (s - s[:, :1]) % 2 ** 32
                for name, k in PHASES:
                    pooled[name] += rel[live, k].tolist()
                g0 = s[:, 11] % 2 ** 32
                starts += (g0 - g0.min()).tolist()
                ends = s[live, 12] % 2 ** 32
                spans.append(int((ends.max() - g0.min()) % 2 ** 32))
            us_plain = timing.time_kernel(lambda: kp[lp.grid](*lp.args, **lp.constexprs, **lp.options))
            us_stamps = timing.time_kernel(lambda: kern[la.grid](*la.args, **la.constexprs, **la.options))
            us_dg = None
            if dg is not None and n <= 2:
                meta = dg.get_paged_mqa_logits_metadata(ctx, 64, sms)
                us_dg = timing.time_kernel(lambda: dg.fp8_paged_mqa_logits(t.q, t.kv_cache, t.weights, ctx,
                                                                           t.block_table, meta, maxlen,
                                                                           clean_logits=False))
            print(f"\n## B {B} C {C} next_n {n}: {programs} programs ({plain.name.split('_NEXT_N_')[-1][:70]}; the "
                  f"table's config: {base.name.split('_NEXT_N_')[-1][:70]})")
            print(f"graph replay µs: this config {us_plain:.2f}, with the stamps {us_stamps:.2f}"
                  f"{'' if us_dg is None else f', DeepGEMM {us_dg:.2f}'}; MHz, W: {_clock_power(torch)}")
            print(f"program starts after the first (ns): median {_pct(starts, 0.5):.0f}, p90 {_pct(starts, 0.9):.0f}, "
                  f"max {max(starts):.0f}; first start to last math end (ns): median {_pct(spans, 0.5):.0f}")
            print("| phase | median cycles | p90 cycles |")
            print("|---|---|---|")
            for name, _ in PHASES:
                xs = pooled[name]
                print(f"| {name} | {_pct(xs, 0.5):.0f} | {_pct(xs, 0.9):.0f} |")
            del t, out, stamps
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
