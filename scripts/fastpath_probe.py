"""Whether the API's eager calls take the fast path (mqa_cli.fastpath), and what each costs the host.

For each decode call form an engine uses (with and without the schedule, next_n 1 and 2, 1-D and 2-D context
lengths), the call runs once (the full path records it), then: the recorded entry (a direct launch past triton's
wrapper, a fast path through it, or the full path on every call) and the host µs per call of 300 back-to-back
calls, the best of three rounds (mqa_cli.timing.host_us).

    python3 scripts/fastpath_probe.py        (the H200; a Markdown table on stdout)
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def verdict_of(sig) -> str:
    """The fast path's verdict on a recorded signature."""
    from mqa_cli import fastpath

    e = fastpath._ENTRIES.get(sig)
    if e is None:
        return "not recorded"
    if e is fastpath._NORMAL:
        return "full path every call"
    return "direct launch" if e.relaunch.direct is not None else "fast path through triton's launcher wrapper"


def main() -> int:
    import torch

    import mqa_cli
    from mqa_cli import api, fastpath, timing
    from mqa_cli.paged_problem import PagedSpec
    from mqa_cli.paged_tensors import random_paged

    rows = []
    for B, T, two_d, meta in ((1, 1, True, False), (8, 1, True, False), (8, 2, True, False), (8, 2, True, True),
                              (64, 1, False, False), (128, 2, True, False)):
        t = random_paged(PagedSpec(batch=B, next_n=T, context_len=8192, clean_logits=False), device="cuda")
        ctx = t.context_lens
        if two_d:
            ctx = (ctx[:, None] - T + 1 + torch.arange(T, device="cuda", dtype=torch.int32)[None, :])
            ctx = ctx.clamp_min(0).to(torch.int32).contiguous()
        sched = mqa_cli.get_paged_mqa_logits_metadata(ctx, 64, api.get_num_sms()) if meta else None
        args = (t.q, t.kv_cache, t.weights, ctx, t.block_table, sched, t.max_context_len)
        fn = lambda: mqa_cli.fp8_paged_mqa_logits(*args, clean_logits=False)  # noqa: E731
        fastpath.clear()
        fn()
        torch.cuda.synchronize()
        sig = api._paged_signature(args[:6], t.max_context_len, False, False)
        verdict = verdict_of(sig)
        host = timing.host_us(fn, calls=300, warm=20)
        rows.append((f"decode B{B} n{T} {'2-D' if two_d else '1-D'} ctx, schedule {'given' if meta else 'None'}",
                     verdict, host))
    print("| call | fast path | host µs per call |\n|---|---|---|")
    for name, verdict, host in rows:
        print(f"| {name} | {verdict} | {host:.1f} |")
    return 0 if all(v == "direct launch" for _, v, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
