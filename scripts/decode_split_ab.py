"""What the decode kernel's in-kernel split costs at small batches: the public API with schedule_meta=None (each
program computes its share of the (sequence, block) work from the context lengths, as the harness calls it) beside
the same call given get_paged_mqa_logits_metadata's split computed beforehand (the kernel reads its two entries).
The difference is the split's share of a decode step's latency. Times: one CUDA-graph replay after an L2 flush,
median (mqa_cli.timing.time_kernel), H 64 D 128, block 64, no clean logits, as the harness.

    python3 scripts/decode_split_ab.py      (the H200)
"""
from __future__ import annotations

import sys


def main() -> int:
    import torch

    import mqa_cli
    from mqa_cli import timing
    from mqa_cli.paged_problem import PagedSpec
    from mqa_cli.paged_tensors import random_paged

    sms = mqa_cli.get_num_sms()
    print(f"{torch.cuda.get_device_name()}: decode, schedule computed in the kernel vs given (µs, graph replay, cold L2)")
    print("| B | C | next_n | split in kernel | split given | difference |")
    print("|---|---|---|---|---|---|")
    for B, C in ((1, 8192), (8, 8192), (64, 8192), (8, 65536)):
        for n in (1, 2):
            t = random_paged(PagedSpec(batch=B, next_n=n, context_len=C, clean_logits=False), device="cuda")
            meta = mqa_cli.get_paged_mqa_logits_metadata(t.context_lens, 64, sms)

            def call(m):
                return lambda: mqa_cli.fp8_paged_mqa_logits(t.q, t.kv_cache, t.weights, t.context_lens, t.block_table,
                                                            m, t.max_context_len, clean_logits=False)

            a = call(None)()
            b = call(meta)()
            torch.cuda.synchronize()
            ends = (t.context_lens.long()[:, None] - n + 1 + torch.arange(n, device="cuda")[None, :]).reshape(-1, 1)
            live = torch.arange(a.shape[1], device="cuda")[None, :] < ends  # entries past a row's end are unwritten
            same = torch.equal(a[live], b[live])
            self_us = timing.time_kernel(call(None), rep_ms=60)
            given_us = timing.time_kernel(call(meta), rep_ms=60)
            print(f"| {B} | {C // 1024}K | {n} | {self_us:.2f} | {given_us:.2f} | {self_us - given_us:+.2f}"
                  f"{'' if same else ' (outputs differ!)'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
