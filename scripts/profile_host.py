"""Where an eager API call spends its host time (GPU): cProfile of back-to-back decode calls, with and without
schedule_meta, and a prefill call; prints per-call µs and the top functions by own time."""
from __future__ import annotations

import cProfile
import io
import pstats
import time

import torch

import mqa_cli
from mqa_cli.paged_problem import PagedSpec
from mqa_cli.paged_tensors import random_paged
from mqa_cli.problem import ProblemSpec
from mqa_cli.tensors import random_prefill


def per_call_us(fn, n=300):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    host = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    return host


def profile(name, fn, n=300):
    host = per_call_us(fn, n)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        fn()
    pr.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(14)
    print(f"\n=== {name}: host {host:.1f} µs per call (back-to-back, no sync)")
    print("\n".join(s.getvalue().splitlines()[6:26]))


def main():
    t = random_paged(PagedSpec(batch=8, next_n=1, context_len=8192, block_size=64, clean_logits=False), device="cuda")
    meta = mqa_cli.get_paged_mqa_logits_metadata(t.context_lens, 64, mqa_cli.get_num_sms())
    args = (t.q, t.kv_cache, t.weights, t.context_lens, t.block_table)
    profile("paged B8 C8K n1, schedule_meta None",
            lambda: mqa_cli.fp8_paged_mqa_logits(*args, None, t.max_context_len))
    profile("paged B8 C8K n1, schedule_meta given",
            lambda: mqa_cli.fp8_paged_mqa_logits(*args, meta, t.max_context_len))
    profile("get_paged_mqa_logits_metadata", lambda: mqa_cli.get_paged_mqa_logits_metadata(t.context_lens, 64, 132))
    p = random_prefill(ProblemSpec(seq=1024, heads=64, dim=128), device="cuda")
    profile("prefill 1x1024 (gluon_ws_sm90)", lambda: mqa_cli.fp8_mqa_logits(p.q, (p.kv, p.kv_scales), p.weights, p.ks, p.ke))
    profile("torch.empty", lambda: torch.empty(8, 8192, device="cuda"))


if __name__ == "__main__":
    main()
