"""Configs of the Gluon prefill kernel, timed side by side.

By default its two math warpgroups taking turns at the tensor cores or not: its table config without turns
(PINGPONG 0), with turn mbarriers (1), and with named barriers (2), on the seed and head-count shapes.
`--variants` names others: override-key sets separated by ';', the first the baseline (e.g. "STAGES=3;STAGES=4").

Why the default: scripts/overlap_probe.py measured, with nothing but wgmma and the fp32 epilogue in the loop, two
warpgroups at N 256 at 0.66 of the tensor ceiling unordered and 0.73-0.74 taking turns by named barriers (two runs),
where the turn mbarriers of PINGPONG 1 had measured 2-4 % slower than no turns on this kernel (2026-11-30).

Each variant is checked first: bitwise equal to the baseline's logits (the same arithmetic in the same order), and
the baseline against the float32 reference (exact -inf pattern, relative error < 2e-3). Then they are timed alone
(graph replay after an L2 flush, `mqa_cli.timing.time_kernel`) in six rounds of alternating order
(`mqa_cli.timing.side_by_side`): each time the median over the rounds, each ratio the median of the rounds' ratios.
A variant named twice ("X;X") is the control: it measures the method's own bias.
A variant the shape's layout cannot take (PINGPONG past two warpgroups) is left out of that row.

    python3 scripts/pingpong_ab.py [--only TEXT,...] [--variants "K=V,...;K=V,..."]
    (the H200; a markdown table on stdout, CSV under $OUT)
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
DEFAULT = "PINGPONG=0;PINGPONG=2;PINGPONG=1"


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT))
    import torch
    import triton

    from mqa_cli import launchers, matrix, source, timing
    from mqa_cli.compile import key_values
    from mqa_cli.reference import reference_logits
    from mqa_cli.verify import compare
    from mqa_kernels.gluon_ws_sm90.config import gluon_ws_sm90_config

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default=None, help="comma-separated texts: shapes whose name contains one of them")
    ap.add_argument("--variants", default=DEFAULT, help="override-key sets separated by ';', the first the baseline")
    args = ap.parse_args(argv)
    names = [v.strip() for v in args.variants.split(";") if v.strip()]
    OUT.mkdir(parents=True, exist_ok=True)
    units = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{torch.cuda.get_device_name()}, {units} SMs, triton {triton.__version__}: prefill kernel alone, µs "
          "(median of six rounds in alternating order)")
    print("| shape | layout | " + " | ".join(names) + " | " + " | ".join(f"{n} / base" for n in names[1:]) + " | checks |")
    print("|---|---|" + "---|" * (2 * len(names) - 1) + "---|")
    rows = []
    benches = list(matrix.SUITES["seed"]) + list(matrix.SUITES["heads"])
    for b in benches:
        if args.only and not any(x in b.name for x in args.only.split(",")):
            continue
        t = source.from_spec(b.spec).materialise("cuda")
        prob_flop = source.from_spec(b.spec).counts.flop
        cfgs, outs, notes = {}, {}, []
        for mode, text in enumerate(names):  # keyed by position: a variant may be named twice (the control)
            try:
                cfg = gluon_ws_sm90_config(heads=t.heads, dim=t.dim, S=t.S, N=t.N, clean=b.spec.clean_logits,
                                           units=units, override=key_values(text))
            except ValueError as e:
                notes.append(f"{text}: {e}"[:80])
                continue
            out = launchers.output_for(t, cfg)
            out.fill_(float("nan"))
            launchers.run(t, cfg, out)
            torch.cuda.synchronize()
            cfgs[mode], outs[mode] = cfg, out
        base = 0
        if base not in cfgs:  # not a shape this kernel's table takes
            print(f"| {b.name} | - | " + "- | " * (2 * len(names) - 1) + f"{'; '.join(notes)} |", flush=True)
            continue
        ref = reference_logits(t)
        cmp = compare(outs[base], ref, b.spec.clean_logits, rel_tol=REL_TOL)
        ok = cmp.ok
        notes.append(f"base vs reference {'ok' if cmp.ok else 'WRONG'} ({cmp.rel_error:.1e})")
        for mode in cfgs:
            if mode != base and not torch.equal(torch.nan_to_num(outs[mode], nan=7.0),
                                                torch.nan_to_num(outs[base], nan=7.0)):
                notes.append(f"{names[mode]} differs from the base")
                ok = False
        best, rounds = {}, []
        if ok:
            rounds = timing.side_by_side({m: (lambda cfg=cfg, out=outs[m]: launchers.run(t, cfg, out))
                                          for m, cfg in cfgs.items()})
            best = {m: timing.median_in_rounds(rounds, m) for m in cfgs}
        groups = cfgs[base].constexprs["Q_GROUPS"], cfgs[base].constexprs["KV_GROUPS"]
        f = lambda m: f"{best[m]:.1f}" if m in best else "-"  # noqa: E731
        r = lambda m: f"{timing.ratio_in_rounds(rounds, m, base):.3f}" if m in best and base in best else "-"  # noqa: E731
        times, ratios = [f(m) for m in range(len(names))], [r(m) for m in range(1, len(names))]
        print(f"| {b.name} | {groups} N {cfgs[base].constexprs['BLOCK_Q'] * t.heads} | " + " | ".join(times) + " | "
              + " | ".join(ratios) + f" | {'; '.join(notes)} |", flush=True)
        rows.append([b.name, groups, *times, *ratios, prob_flop, "; ".join(notes)])
        del t, ref, outs
        torch.cuda.empty_cache()
    with open(OUT / "pingpong_ab.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["shape", "groups", *(f"us {n}" for n in names), *(f"ratio {n}" for n in names[1:]), "flop",
                    "checks"])
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
