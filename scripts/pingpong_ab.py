"""The prefill kernel's two math warpgroups taking turns at the tensor cores, or not: its table config without
turns (PINGPONG 0), with turn mbarriers (1), and with named barriers (2), on the seed and head-count shapes.

Why: scripts/overlap_probe.py measured, with nothing but wgmma and the fp32 epilogue in the loop, two warpgroups
at N 256 at 0.66 of the tensor ceiling unordered and 0.73-0.74 taking turns by named barriers (two runs), where
the turn mbarriers of PINGPONG 1 had measured 2-4 % slower than no turns on this kernel (2026-11-30).

Each variant is checked first: bitwise equal to PINGPONG 0's logits (the same arithmetic in the same order), and
PINGPONG 0 against the float32 reference (exact -inf pattern, relative error < 2e-3). Then the three are timed
alone (graph replay after an L2 flush, `mqa_cli.timing.time_kernel`), in two interleaved rounds, the least of each
kept. Shapes whose table layout is not two warpgroups run PINGPONG 0 only.

    python3 scripts/pingpong_ab.py [--only TEXT,...]     (the H200; a markdown table on stdout, CSV under $OUT)
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(os.environ.get("OUT") or "/tmp/out")
REL_TOL = 2e-3
MODES = (0, 2, 1)


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT))
    import torch
    import triton

    from mqa_cli import launchers, matrix, source, timing
    from mqa_cli.reference import reference_logits
    from mqa_cli.verify import compare
    from mqa_kernels.gluon_ws_sm90.config import gluon_ws_sm90_config

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default=None, help="comma-separated texts: shapes whose name contains one of them")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    units = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{torch.cuda.get_device_name()}, {units} SMs, triton {triton.__version__}: prefill kernel alone, µs "
          "(least of two rounds)")
    print("| shape | layout | PINGPONG 0 | 2 (named) | 1 (mbarriers) | 2 / 0 | 1 / 0 | checks |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    benches = list(matrix.SUITES["seed"]) + list(matrix.SUITES["heads"])
    for b in benches:
        if args.only and not any(x in b.name for x in args.only.split(",")):
            continue
        t = source.from_spec(b.spec).materialise("cuda")
        prob_flop = source.from_spec(b.spec).counts.flop
        cfgs, outs, notes = {}, {}, []
        for mode in MODES:
            try:
                cfg = gluon_ws_sm90_config(heads=t.heads, dim=t.dim, S=t.S, N=t.N, clean=b.spec.clean_logits,
                                           units=units, override={"PINGPONG": mode})  # (0 too: the table may say 2)
            except ValueError as e:
                notes.append(f"{mode}: {e}"[:80])
                continue
            out = launchers.output_for(t, cfg)
            out.fill_(float("nan"))
            launchers.run(t, cfg, out)
            torch.cuda.synchronize()
            cfgs[mode], outs[mode] = cfg, out
        if 0 not in cfgs:  # not a shape this kernel's table takes
            print(f"| {b.name} | - | - | - | - | - | - | {'; '.join(notes)} |", flush=True)
            continue
        ref = reference_logits(t)
        cmp = compare(outs[0], ref, b.spec.clean_logits, rel_tol=REL_TOL)
        ok = cmp.ok
        notes.append(f"0 vs reference {'ok' if cmp.ok else 'WRONG'} ({cmp.rel_error:.1e})")
        for mode in cfgs:
            if mode and not torch.equal(torch.nan_to_num(outs[mode], nan=7.0), torch.nan_to_num(outs[0], nan=7.0)):
                notes.append(f"{mode} differs from 0")
                ok = False
        best = {}
        if ok:
            for _ in range(2):
                for mode, cfg in cfgs.items():
                    us = timing.time_kernel(lambda cfg=cfg, out=outs[mode]: launchers.run(t, cfg, out), rep_ms=60)
                    best[mode] = min(best.get(mode, us), us)
        groups = cfgs[0].constexprs["Q_GROUPS"], cfgs[0].constexprs["KV_GROUPS"]
        f = lambda m: f"{best[m]:.1f}" if m in best else "-"  # noqa: E731
        r = lambda m: f"{best[m] / best[0]:.3f}" if m in best and 0 in best else "-"  # noqa: E731
        print(f"| {b.name} | {groups} N {cfgs[0].constexprs['BLOCK_Q'] * t.heads} | {f(0)} | {f(2)} | {f(1)} | "
              f"{r(2)} | {r(1)} | {'; '.join(notes)} |", flush=True)
        rows.append([b.name, groups, f(0), f(2), f(1), r(2), r(1), prob_flop, "; ".join(notes)])
        del t, ref, outs
        torch.cuda.empty_cache()
    with open(OUT / "pingpong_ab.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["shape", "groups", "us_0", "us_2", "us_1", "ratio_2", "ratio_1", "flop", "checks"])
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
