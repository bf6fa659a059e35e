"""Decode beside DeepGEMM, and what the in-kernel split costs: the public API with schedule_meta=None (each program
computes its share of the (sequence, block) work from the context lengths, as the harness calls it), the same call
given get_paged_mqa_logits_metadata's split computed beforehand, and DeepGEMM's fp8_paged_mqa_logits given its
own metadata (when `import deep_gemm` works: h200_check.sh's `splitab` step puts it in place). Shapes: the
harness's small batches, plus B 128 C 64K and B 4096 C 8K (DeepGEMM's test size, which the harness leaves out).

Inputs as the harness builds them: 2-D context lengths [B, next_n] (row t of sequence b sees k < ctx_b - next_n
+ t + 1), contexts uniform in [0.7C, 1.3C), a shuffled block table, max_context_len = max(ctx). Times: one
CUDA-graph replay after an L2 flush, median (mqa_cli.timing.time_kernel), in six rounds of alternating order
(mqa_cli.timing.side_by_side): each time the median over the rounds, each ratio the median of the rounds' ratios;
H 64 D 128, block 64, no clean logits. Outputs of the three calls are compared on every live entry.
Last columns: the SM clock (MHz) and board power (W) NVML reads right after the shape's timings (the card's 700 W
cap lowers the clock under sustained load), and each call's least and greatest time over the rounds.

    python3 scripts/decode_split_ab.py [--shapes B:C,...] [--next-n 1,2]      (the H200)
"""
from __future__ import annotations

import argparse
import sys

SHAPES = ((1, 8192), (8, 8192), (64, 8192), (8, 65536), (128, 65536), (4096, 8192))
COPY_TBS = 4.3


def _deep_gemm():
    try:
        import deep_gemm

        return deep_gemm, ""
    except Exception as e:  # noqa: BLE001  (not in place on this machine: the column stays empty)
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:120]}" if str(e) else type(e).__name__


def _clock_power(torch) -> str:
    try:
        return f"{torch.cuda.clock_rate()}, {torch.cuda.power_draw() / 1000:.0f}"
    except Exception:  # noqa: BLE001  (no NVML here)
        return "-"


def harness_inputs(torch, B: int, C: int, n: int):
    """(paged tensors, 2-D context lengths [B, n], max_context_len) as the harness builds a decode step: contexts
    uniform in [0.7C, 1.3C), a shuffled block table, row t of sequence b seeing k < ctx_b - n + t + 1."""
    from mqa_cli.paged_problem import PagedSpec
    from mqa_cli.paged_tensors import random_paged

    t = random_paged(PagedSpec(batch=B, next_n=n, context_len=C, context_jitter=0.3, clean_logits=False,
                               seed=B + C), device="cuda")
    ctx = (t.context_lens[:, None] - n + 1 + torch.arange(n, device="cuda", dtype=torch.int32)[None, :])
    return t, ctx.clamp_min(0).to(torch.int32).contiguous(), t.max_context_len


def copy_pct(ctx, B: int, n: int, maxlen: int, us: float, dim: int = 128) -> float:
    """% of the 4.3 TB/s copy rate for a decode step of `us`: each sequence's cache (fp8 rows + fp32 scales) up to its
    largest row end (ctx [B, n]) read once, and the [B * n, maxlen] fp32 logits written."""
    nbytes = int(ctx.long().max(dim=1).values.sum()) * (dim + 4) + B * n * maxlen * 4
    return nbytes / (us * 1e-6) / (COPY_TBS * 1e12) * 100


def rel_err(got, ref) -> float:
    """||got - ref|| / ||ref|| in float64."""
    return float((got - ref).double().norm() / ref.double().norm().clamp_min(1e-30))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=",".join(f"{b}:{c}" for b, c in SHAPES), help="B:C pairs, comma-separated")
    ap.add_argument("--next-n", default="1,2")
    args = ap.parse_args(argv)
    shapes = [tuple(int(x) for x in s.split(":")) for s in args.shapes.split(",") if s]
    import torch

    import mqa_cli
    from mqa_cli import timing

    dg, why = _deep_gemm()
    sms = mqa_cli.get_num_sms()
    print(f"{torch.cuda.get_device_name()}: decode through the API, split in the kernel / given, beside DeepGEMM "
          f"(µs, graph replay, cold L2){'' if dg else '; DeepGEMM not importable: ' + why}")
    print("| B | C | next_n | split in kernel | split given | difference | DeepGEMM | ours / DeepGEMM | ours % of 4.3 TB/s | MHz, W | least-greatest µs over the rounds |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    bad = 0
    for B, C in shapes:
        for n in (int(x) for x in args.next_n.split(",")):
            t, ctx, maxlen = harness_inputs(torch, B, C, n)
            meta = mqa_cli.get_paged_mqa_logits_metadata(ctx, 64, sms)

            def ours(m):
                return lambda: mqa_cli.fp8_paged_mqa_logits(t.q, t.kv_cache, t.weights, ctx, t.block_table, m,
                                                            maxlen, clean_logits=False)

            calls = {"self": ours(None), "given": ours(meta)}
            if dg is not None:
                dmeta = dg.get_paged_mqa_logits_metadata(ctx, 64, sms)
                calls["dg"] = lambda: dg.fp8_paged_mqa_logits(t.q, t.kv_cache, t.weights, ctx, t.block_table, dmeta,
                                                              maxlen, clean_logits=False)
            outs = {k: f() for k, f in calls.items()}
            torch.cuda.synchronize()
            live = torch.arange(maxlen, device="cuda")[None, :] < ctx.reshape(-1, 1)
            ref = outs["self"][live]
            notes = []
            if not torch.equal(ref, outs["given"][live]):
                notes.append("split given differs!")
            if "dg" in outs:
                rel = rel_err(outs["dg"][live], ref)
                if not rel < 2e-3:
                    notes.append(f"differs from DeepGEMM: {rel:.1e}!")
            bad += bool(notes)
            rounds = timing.side_by_side(calls)
            us = {k: timing.median_in_rounds(rounds, k) for k in calls}
            spread = " / ".join(f"{k} {min(r[k] for r in rounds):.1f}-{max(r[k] for r in rounds):.1f}" for k in calls)
            dg_us = us.get("dg")
            dg_col = "- | -" if dg_us is None else f"{dg_us:.2f} | {timing.ratio_in_rounds(rounds, 'self', 'dg'):.3f}"
            pct = copy_pct(ctx, B, n, maxlen, us["self"])
            print(f"| {B} | {C // 1024}K | {n} | {us['self']:.2f} | {us['given']:.2f} | {us['self'] - us['given']:+.2f} | "
                  f"{dg_col} | {pct:.1f}{' ' + ' '.join(notes) if notes else ''} | {_clock_power(torch)} | {spread} |", flush=True)
            del t, outs, calls
            torch.cuda.empty_cache()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
