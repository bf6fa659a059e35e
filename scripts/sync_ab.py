"""Two configs of the Gluon decode kernel, timed side by side.

By default: how its math warpgroups wait for and release their ring slots.

Each variant is the table's config for the shape with its override keys set (`--a`, `--b`: KEY=VALUE,... of
paged_ws_sm90's OVERRIDE_KEYS), launched directly (the API's config without its host work), checked bitwise against
the other (and against the float32 reference on every live entry where the reference fits), then timed: one
CUDA-graph replay after an L2 flush, median, in six rounds of alternating order (mqa_cli.timing.side_by_side):
each time the median over the rounds, each ratio the median of the rounds' ratios. DeepGEMM beside it when
importable. `--a X --b X` (one config twice) is the control: it measures the method's own bias. Inputs as the
harness builds them: 2-D context lengths, contexts uniform in [0.7C, 1.3C), a shuffled block table.
The default pair: triton's mbarrier ops (a 128-thread warpgroup barrier before each slot wait and before the
elected release) against PTX_SLOTS (the wait and the release in PTX at the ring barriers' offsets, every thread
arriving: no warpgroup barrier in the block loop).

    python3 scripts/sync_ab.py [--shapes B:C,...] [--next-n 1,2,3,6] [--a KEY=V,... --b KEY=V,...]
    (the H200; a Markdown table on stdout)
"""
from __future__ import annotations

import argparse
import sys

SHAPES = ((1, 8192), (8, 8192), (64, 8192), (128, 8192), (8, 65536), (64, 65536), (128, 65536), (4096, 8192))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=",".join(f"{b}:{c}" for b, c in SHAPES), help="B:C pairs, comma-separated")
    ap.add_argument("--next-n", default="1,2")
    ap.add_argument("--a", default="PTX_SLOTS=0", help="first variant's override keys")
    ap.add_argument("--b", default="PTX_SLOTS=1", help="second variant's override keys")
    ap.add_argument("--rounds", type=int, default=6, help="timing rounds, the order reversed every round")
    ap.add_argument("--reference-below", type=int, default=2 ** 25,
                    help="check against the float32 reference when B*next_n*max_len is below this")
    args = ap.parse_args(argv)
    shapes = [tuple(int(x) for x in s.split(":")) for s in args.shapes.split(",") if s]
    A, B_ = args.a, args.b
    from mqa_cli.compile import key_values

    variants = {"a": key_values(A), "b": key_values(B_)}  # (keyed a / b: --a X --b X is an A/A control)
    import torch

    import mqa_cli
    from mqa_cli import timing
    from mqa_cli.launch_paged_ws import paged_ws_args
    from mqa_cli.paged_reference import reference_paged
    from mqa_cli.paged_tensors import Paged
    from mqa_kernels.paged_ws_sm90.config import paged_ws_sm90_config

    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from decode_split_ab import _clock_power, _deep_gemm, copy_pct, harness_inputs, rel_err

    dg, why = _deep_gemm()
    sms = mqa_cli.get_num_sms()
    print(f"{torch.cuda.get_device_name()}: decode kernel, {A} / {B_}, launched directly "
          f"(µs, graph replay, cold L2){'' if dg else '; DeepGEMM not importable: ' + why}")
    print(f"| B | C | next_n | config | {A} | {B_} | b / a | DeepGEMM | a / DG "
          "| b / DG | b % of 4.3 TB/s | check | MHz, W |")
    print("|" + "---|" * 13)
    bad = 0
    for B, C in shapes:
        for n in (int(x) for x in args.next_n.split(",")):
            t, ctx, maxlen = harness_inputs(torch, B, C, n)
            t = Paged(t.q, t.kv_cache, t.weights, ctx, t.block_table, maxlen)
            calls, outs, name = {}, {}, ""
            for v, ov in variants.items():
                cfg = paged_ws_sm90_config(heads=64, dim=128, next_n=n, block_size=64, batch=B,
                                           max_context_len=maxlen, clean=False, units=sms, override=ov)
                name = name or cfg.name
                out = torch.full((B * n, maxlen), float("nan"), device="cuda")
                a = paged_ws_args(t, cfg, out, None)
                kern = cfg.jitted()
                calls[v] = (lambda k=kern, a=a: k[a.grid](*a.args, **a.constexprs, **a.options))
                outs[v] = out
            if dg is not None and n <= 2:  # DeepGEMM runs next_n 1-2 on sm90
                dmeta = dg.get_paged_mqa_logits_metadata(ctx, 64, sms)
                calls["dg"] = lambda: dg.fp8_paged_mqa_logits(t.q, t.kv_cache, t.weights, ctx, t.block_table, dmeta,
                                                              maxlen, clean_logits=False)
            for k, f in calls.items():
                r = f()
                if k == "dg":
                    outs["dg"] = r
            torch.cuda.synchronize()
            live = torch.arange(maxlen, device="cuda")[None, :] < ctx.reshape(-1, 1)
            base = outs["a"][live]
            notes = []
            if not torch.equal(outs["b"][live], base):
                notes.append(f"{B_} differs from {A}!")
            if B * n * maxlen < args.reference_below:
                ref = reference_paged(t, dtype=torch.float32, clean_logits=True)[live]
                rel = rel_err(base, ref)
                if not rel < 2e-3:
                    notes.append(f"off the reference: {rel:.1e}!")
                check = f"ref {rel:.1e}"
            else:
                check = "bitwise"
            if "dg" in outs:
                rel = rel_err(outs["dg"][live], base)
                if not rel < 2e-3:
                    notes.append(f"differs from DeepGEMM: {rel:.1e}!")
            bad += bool(notes)
            rounds = timing.side_by_side(calls, rounds=args.rounds)
            us = {k: timing.median_in_rounds(rounds, k) for k in calls}
            a, p = us["a"], us["b"]
            pct = copy_pct(ctx, B, n, maxlen, p)
            d = us.get("dg")
            r = lambda x, y: f"{timing.ratio_in_rounds(rounds, x, y):.3f}"  # noqa: E731
            dg_cols = "- | - | -" if d is None else f"{d:.2f} | {r('a', 'dg')} | {r('b', 'dg')}"
            print(f"| {B} | {C // 1024}K | {n} | {name.split('_NEXT_N_')[-1][:60]} | {a:.2f} | {p:.2f} | "
                  f"{r('b', 'a')} | {dg_cols} | {pct:.1f} | {check}{' ' + ' '.join(notes) if notes else ''} "
                  f"| {_clock_power(torch)} |", flush=True)
            del t, outs, calls
            torch.cuda.empty_cache()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
