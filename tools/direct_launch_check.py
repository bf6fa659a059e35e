"""The fast path's direct launch (mqa_cli.launch.direct) against the full path, and what each costs the host.

A decode call (B 8, next_n 2, 2-D context lengths) is recorded once; then calls alternate two q tensors, pass q
at a new address, at a reused address with new data, and a cache copied to a new address and then zeroed in
place. Each result must equal the full path's on every live entry (bitwise). Then the host µs a call, back to
back, with the direct launch and with triton's own launcher wrapper, in three rounds.

    python3 tools/direct_launch_check.py        (the H200; exit 1 when a result differs)
"""
import sys

import torch

import mqa_cli
from mqa_cli.api import logits as api, fastpath
from mqa_cli.bench import timing
from mqa_cli.problem.paged import PagedSpec
from mqa_cli.problem.paged_tensors import random_paged


def main() -> int:
    t = random_paged(PagedSpec(batch=8, next_n=2, context_len=8192, clean_logits=False), device="cuda")
    t2 = random_paged(PagedSpec(batch=8, next_n=2, context_len=8192, clean_logits=False, seed=5), device="cuda")
    T = 2
    ctx = (t.context_lens[:, None] - T + 1 + torch.arange(T, device="cuda", dtype=torch.int32)[None, :])
    ctx = ctx.clamp_min(0).int().contiguous()

    def call(q, cache=t.kv_cache):
        return mqa_cli.fp8_paged_mqa_logits(q, cache, t.weights, ctx, t.block_table, None, t.max_context_len,
                                            clean_logits=False)

    qa, qb = t.q, t2.q.clone()
    fastpath.clear()
    rb_full = call(qb).clone()
    fastpath.clear()
    ra_full = call(qa).clone()  # recorded: later calls take the fast path
    live = torch.arange(ra_full.shape[1], device="cuda")[None, :] < ctx.view(-1)[:, None]

    def same(x, r):
        torch.cuda.synchronize()
        return torch.equal(torch.where(live, x, 0), torch.where(live, r, 0))

    assert not same(ra_full, rb_full)
    ok = True
    for _ in range(6):  # two q addresses in turn
        ok &= same(call(qa), ra_full) and same(call(qb), rb_full)
    qc = torch.empty_like(qa)
    qc.copy_(qb)
    ok &= same(call(qc), rb_full)  # a new q tensor
    del qc
    qd = torch.empty_like(qa)
    qd.copy_(qa)
    ok &= same(call(qd), ra_full)
    qd.copy_(qb)
    ok &= same(call(qd), rb_full)  # the same address, new data
    cache2 = t.kv_cache.clone()
    ok &= same(call(qa, cache2), ra_full)  # a cache at a new address
    cache2.zero_()
    xf = call(qa, cache2)
    torch.cuda.synchronize()
    ok &= bool((xf[ctx.view(-1) > 0, :64] == 0).all())  # the same cache, zeroed in place
    sig = api._paged_signature((qa, t.kv_cache, t.weights, ctx, t.block_table, None), t.max_context_len, False, False)
    e = fastpath._ENTRIES[sig]
    r = e.relaunch
    direct = r.direct
    print(f"direct launch in use: {direct is not None}; equal to the full path across q and cache changes: {ok}")
    for rnd in range(3):
        r.direct = direct
        a = timing.host_us(lambda: call(qa), calls=500, rounds=1, warm=30)
        r.direct = None
        b = timing.host_us(lambda: call(qa), calls=500, rounds=1, warm=30)
        print(f"round {rnd}: B 8 next_n 2, host µs a call: direct {a:.1f}, triton's wrapper {b:.1f}")
    r.direct = direct
    x = torch.zeros(4, device="cuda")
    print(f"for scale, one torch.add_ on this host: {timing.host_us(lambda: x.add_(1), calls=500):.1f} µs")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
