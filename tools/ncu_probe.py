"""Launches one problem through the public API a few times, for Nsight Compute to profile one of the launches
(see tools/h200_check.sh, step `ncu`): what binds a kernel that stops short of its floor, read from the
hardware counters rather than guessed from instruction counts.

    python3 tools/ncu_probe.py prefill H D [S [FORM]] (1xS causal; FORM clean (default), noclean, compressed
                                                          ([S, S] logits, clean) or compressed-noclean (vLLM
                                                          0.33's form))
    python3 tools/ncu_probe.py paged B C NEXT_N       (H 64 D 128, block 64, no clean logits, as the harness)
    python3 tools/ncu_probe.py pagedmeta B C NEXT_N   (the API given get_paged_mqa_logits_metadata's split)
    python3 tools/ncu_probe.py pagedcfg B C NEXT_N KEY=V,...   (the decode row's config with these overrides,
                                                          launched directly: a variant beside the table's choice)
    python3 tools/ncu_probe.py dgpaged B C NEXT_N     (the same inputs through DeepGEMM, its metadata computed
                                                          first: `import deep_gemm` must work)
"""
from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    import torch

    import mqa_cli
    from mqa_cli.problem import source
    from mqa_cli.problem.paged import PagedSpec
    from mqa_cli.problem.paged_tensors import random_paged
    from mqa_cli.problem.prefill import ProblemSpec

    kind, *nums = argv
    if kind == "prefill":
        H, D, S = (int(x) for x in (nums + ["8192"])[:3])
        form = nums[3] if len(nums) > 3 else "clean"
        if form not in ("clean", "noclean", "compressed", "compressed-noclean"):
            raise SystemExit(f"unknown prefill form {form!r}: clean, noclean, compressed or compressed-noclean")
        t = source.from_spec(ProblemSpec(batch=1, seq=S, heads=H, dim=D, layout="causal")).materialise("cuda")
        kw = dict(clean_logits="noclean" not in form, max_seqlen_k=S if form.startswith("compressed") else 0)
        fn = lambda: mqa_cli.mqa_logits(t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke, **kw)  # noqa: E731
    elif kind in ("paged", "pagedmeta", "dgpaged", "pagedcfg"):
        B, C, T = (int(x) for x in nums[:3])
        t = random_paged(PagedSpec(batch=B, next_n=T, context_len=C, clean_logits=False), device="cuda")
        ctx = (t.context_lens[:, None] - T + 1 + torch.arange(T, device="cuda", dtype=torch.int32)[None, :])
        ctx = ctx.clamp_min(0).to(torch.int32).contiguous()  # 2-D, as the harness and vLLM pass them
        if kind == "pagedcfg":
            from mqa_cli.launch import families as launchers
            from mqa_cli.plan import dispatch, targets
            from mqa_cli.problem.paged_tensors import Paged

            shape = dispatch.Shape("paged", B * T, t.max_context_len, 64, 128, False, batch=B, next_n=T, block_size=64)
            cfg = dispatch.plan_spec(shape, targets.TARGETS["sm90"], f"paged_ws_sm90:{nums[3]}").config
            t2 = Paged(t.q, t.kv_cache, t.weights, ctx, t.block_table, t.max_context_len)
            fn = lambda: launchers.run(t2, cfg)  # noqa: E731
        elif kind in ("paged", "pagedmeta"):
            meta = mqa_cli.get_paged_mqa_logits_metadata(ctx, 64, mqa_cli.get_num_sms()) if kind == "pagedmeta" else None
            fn = lambda: mqa_cli.fp8_paged_mqa_logits(t.q, t.kv_cache, t.weights, ctx, t.block_table,  # noqa: E731
                                                      meta, t.max_context_len, clean_logits=False)
        else:
            import deep_gemm as dg

            meta = dg.get_paged_mqa_logits_metadata(ctx, 64, dg.get_num_sms())
            fn = lambda: dg.fp8_paged_mqa_logits(t.q, t.kv_cache, t.weights, ctx, t.block_table, meta,  # noqa: E731
                                                 t.max_context_len, clean_logits=False)
    else:
        raise SystemExit(f"unknown problem kind {kind!r}: prefill, paged, pagedmeta, pagedcfg or dgpaged")
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
