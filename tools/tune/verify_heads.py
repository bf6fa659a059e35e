"""Every (heads, dim) shape the Gluon prefill table dispatches, checked against the float32 reference in four output
forms, in one process (one CUDA context, each kernel compiled once): causal with clean logits; a window without
clean logits; compressed logits (columns from each row's ks, --max-seqlen-k at the longest row); bf16 logits.
Exact -inf pattern and the relative-error bound of `mqa-logits verify`, two runs into NaN-poisoned buffers, bitwise
equal. Prints one line per check and `verify_heads: N passed, M failed`; exit 1 on any failure.

    python3 tools/tune/verify_heads.py [--seq 2048]        (the H200; the GPU script's headsverify step)
"""
from __future__ import annotations

import argparse
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=2048)
    args = ap.parse_args()
    import torch

    from mqa_cli.check.verify import verify
    from mqa_cli.plan import dispatch, targets
    from mqa_cli.problem import source, suites
    from mqa_cli.problem.prefill import ProblemSpec
    from mqa_kernels.prefill.gluon_ws_sm90.config import tuned_shapes

    tgt = targets.resolve(None)
    forms = {"causal clean": ({}, False, False), "window no-clean": ({"layout": "window", "window": 700,
                                                                       "clean_logits": False}, False, False),
             "compressed": ({}, True, False), "bf16": ({}, False, True)}
    passed = failed = 0
    for H, D in tuned_shapes():
        for name, (kw, compressed, bf16) in forms.items():
            spec = ProblemSpec(seq=args.seq, heads=H, dim=D, **kw)
            prob = source.from_spec(spec, tgt.fp8, suites.longest_row(spec) if compressed else 0, bf16)
            plan = dispatch.plan(prob.shape, tgt)
            try:
                r = verify(prob.materialise(targets.device_for(tgt)), plan.config, prob.shape.clean_logits, prob.label,
                           max_seqlen_k=prob.max_seqlen_k)
                ok, line = r.ok, f"rel err {r.comparison.rel_error:.2e}, bitwise repeat {r.bitwise_repeat}"
            except Exception as e:  # noqa: BLE001  (a crash is a failed check, reported)
                ok, line = False, f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
            passed += ok
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} H{H:<3d} D{D:<3d} {name:16s} {plan.chosen.row.name:14s} {line}",
                  flush=True)
            torch.cuda.empty_cache()
    print(f"verify_heads: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
