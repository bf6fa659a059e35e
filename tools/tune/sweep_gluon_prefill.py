"""Checked, timed sweep on the H200 of the Gluon prefill kernel's warpgroup layouts (mqa_kernels.prefill.gluon_ws_sm90).

    python3 tools/tune/sweep_gluon_prefill.py [--write-table] [--only 1x8192]   (the H200; log and CSV under $OUT)
    python3 tools/tune/sweep_gluon_prefill.py --table-from gluon_sweep.csv       (the table from a run's CSV; no GPU)

What it checks, times and writes: docs/GPU-PLAN.md, "tools/tune"; why these candidates: docs/EXPERIMENTS.md.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # sweep_common.py, sweep_heads.py beside this file
import sweep_common  # noqa: E402
import sweep_heads  # noqa: E402  (the Gluon kernel's table writer, shared with the head sweep)

BUDGET_S = float(os.environ.get("GLUON_SWEEP_BUDGET_S", "400"))
REL_TOL = 2e-3
NOISE = 0.02
CANDIDATES = [  # (groups, stages, q_in_lanes, kv splits, tma_store, chains); the first is the baseline
    ((2, 1), 4, False, 1, False, 1), ((2, 1), 4, True, 1, False, 1), ((2, 1), 3, True, 1, False, 1),
    ((2, 1), 3, True, 2, False, 1), ((2, 1), 3, True, 1, True, 1), ((2, 1), 3, True, 1, False, 4),
    ((1, 3), 5, False, 1, False, 1),
]
BASE = CANDIDATES[0]


def label(groups, stages, q_in_lanes=False, splits=1, tma_store=False, chains=1) -> str:
    return (f"g{groups[0]}x{groups[1]}-st{stages}" + ("-lanes" if q_in_lanes else "") + (f"-x{splits}" if splits > 1 else "")
            + ("-tma" if tma_store else "") + (f"-c{chains}" if chains > 1 else ""))


def main() -> int:
    sys.path.insert(0, str(ROOT))
    import torch
    import triton

    from mqa_cli.bench import timing
    from mqa_cli.check.reference import reference_logits
    from mqa_cli.check.verify import compare
    from mqa_cli.launch import families as launchers
    from mqa_cli.problem import matrix, source
    from mqa_kernels.prefill.gluon_ws_sm90.config import gluon_ws_sm90_config

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write-table", action="store_true")
    ap.add_argument("--only", default=None, help="shapes whose name contains this text")
    ap.add_argument("--table-from", default=None, metavar="CSV",
                    help="rewrite tuned.py from a GPU run's gluon_sweep.csv (no GPU; GLUON_WS_TABLE=FILE writes elsewhere)")
    args = ap.parse_args()
    if args.table_from:
        table_from_csv(Path(args.table_from))
        return 0
    say = sweep_common.Log("gluon_sweep.log")
    T0 = time.time()
    units = torch.cuda.get_device_properties(0).multi_processor_count
    say(f"device {torch.cuda.get_device_name()}, {units} SMs, triton {triton.__version__}, torch {torch.__version__}")
    f = open(sweep_common.out_dir() / "gluon_sweep.csv", "w", newline="")
    wr = csv.writer(f)
    wr.writerow(["shape", "clean", "H", "config", "us", "tflops", "rel_err", "status"])
    runs: dict = {}  # (shape, clean, H) -> {candidate: µs}
    for b in matrix.SUITES["seed"]:
        if args.only and args.only not in b.name:
            continue
        for clean in (True, False):
            if time.time() - T0 > BUDGET_S:
                say(f"budget reached before {b.name} clean={clean}")
                break
            spec = b.spec.with_(clean_logits=clean)
            prob = source.from_spec(spec)
            t = prob.materialise("cuda")
            ref = reference_logits(t)
            res, calls, checked, outs = {}, {}, {}, {}

            def row(lab, us, err, status):
                tf = None if us is None else timing.tflops(prob.counts.flop, us)
                say(f"  {b.name:22s} clean={int(clean)} {lab:12s} "
                    f"{'-' if us is None else f'{us:9.1f} us {tf:6.0f} TF/s'} {'' if status == 'ok' else status}")
                wr.writerow([b.name, int(clean), t.heads, lab, "" if us is None else f"{us:.2f}",
                             "" if tf is None else f"{tf:.1f}", "" if err is None else f"{err:.2e}", status])
                f.flush()

            for cand in CANDIDATES:
                groups, stages, lanes, splits, tma_store, chains = cand
                try:
                    cfg = gluon_ws_sm90_config(heads=t.heads, dim=t.dim, S=t.S, N=t.N, clean=clean, units=units,
                                               groups=groups, stages=stages, q_in_lanes=lanes, splits=splits,
                                               tma_store=tma_store, chains=chains)
                    out = launchers.output_for(t, cfg)
                except Exception as e:  # noqa: BLE001  (a layout that does not fit is a result)
                    row(label(*cand), None, None, f"ERROR {type(e).__name__}: {str(e).splitlines()[0][:160]}")
                    continue
                out = outs.setdefault((tuple(out.shape), tuple(out.stride()), out.dtype), out)  # one per form
                run = lambda t=t, cfg=cfg, out=out: launchers.run(t, cfg, out)  # noqa: E731

                def cmp(o, clean=clean, ref=ref):
                    c = compare(o, ref, clean, rel_tol=REL_TOL)
                    return c.rel_error, "" if c.ok else "WRONG: " + c.line()

                ok, err, problem = sweep_common.check(run, out, cmp)
                if ok:
                    calls[cand], checked[cand] = run, err
                else:
                    row(label(*cand), None, err, problem)
            medians, _ = sweep_common.side_by_side(calls, rep_ms=40)
            for cand, err in checked.items():
                res[cand] = medians[cand]
                row(label(*cand), res[cand], err, "ok")
            runs[(b.name, clean, t.heads)] = res
            del t, ref
            torch.cuda.empty_cache()
    table = choose(relative(runs), say)
    if args.write_table:
        write_table(table, say, torch.cuda.get_device_name())
    say(f"total {time.time() - T0:.0f} s")
    return 0


def relative(runs: dict) -> dict:
    """(H, candidate) -> [sum over the runs of its time / BASE's time, runs], from (shape, clean, H) -> {cand: µs}."""
    rel: dict = {}
    for (_, _, H), res in runs.items():
        if BASE in res:
            for key, us in res.items():
                agg = rel.setdefault((H, key), [0.0, 0])
                agg[0] += us / res[BASE]
                agg[1] += 1
    return rel


def choose(rel: dict, say) -> dict:
    """Per head count: the candidate with the least mean time relative to BASE over the runs every candidate
    made, when it beats BASE by more than NOISE; else BASE. rel: (H, candidate) -> [sum of ratios, runs]."""
    table = {}
    for H in sorted({h for h, _ in rel}):
        full = max(n for (h, _), (_, n) in rel.items() if h == H)
        cands = {k: s / n for (h, k), (s, n) in rel.items() if h == H and n == full}
        best = min(cands, key=cands.get)
        say(f"H {H}: mean time relative to (2, 1) st4 over {full} runs: "
            + ", ".join(f"{label(*k)} {v:.3f}" for k, v in sorted(cands.items(), key=lambda kv: kv[1])))
        table[H] = (best if cands[best] < 1 - NOISE else BASE, cands[best], full)
    return table


def table_from_csv(path: Path) -> None:
    """Rewrite tuned.py from a GPU run's gluon_sweep.csv (for a run whose table file did not come back)."""
    by_label = {label(*c): c for c in CANDIDATES}
    runs: dict = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["status"] == "ok" and r["us"] and r["config"] in by_label:
                runs.setdefault((r["shape"], r["clean"], int(r["H"])), {})[by_label[r["config"]]] = float(r["us"])
    write_table(choose(relative(runs), print), print, f"the run of {path.name}")


def write_table(table: dict, say, device: str) -> None:
    """This sweep's keys ((H, 128) for the swept head counts) into the kernel's table (sweep_heads.write_gluon_table)."""
    day = time.strftime("%Y-%m-%d")
    entries = {(H, 128): ({"groups": tuple(groups), "stages": stages, "q_in_lanes": lanes,
                           **({"splits": splits} if splits > 1 else {}), **({"tma_store": True} if tma else {}),
                           **({"chains": chains} if chains > 1 else {})},
                          f"sweep_gluon_prefill {day}: mean {r:.3f} of (2, 1) st4 over {n} runs")
               for H, ((groups, stages, lanes, splits, tma, chains), r, n) in table.items()}
    sweep_heads.write_gluon_table(entries, device, say)


if __name__ == "__main__":
    raise SystemExit(main())
