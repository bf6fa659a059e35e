"""The checked, timed sweep of the Gluon paged decode kernel (mqa_kernels.decode.paged_ws_sm90) on the H200, beside
the portable paged kernel; `--write-table` writes the winners to kernels/decode/paged_ws_sm90/tuned.py.

    python3 tools/tune/paged_ws_experiment.py [--write-table]      (log and CSV under $OUT)
    python3 tools/tune/paged_ws_experiment.py --table-from paged_ws_sweep.csv [more.csv ...]   (no GPU)
    PAGED_WS_NEXT_N=3,4 python3 tools/tune/paged_ws_experiment.py    (those draft-row counts only)

What it checks, times and writes: docs/GPU-PLAN.md, "tools/tune".
"""
from __future__ import annotations

import csv
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
T0 = time.time()
BUDGET_S = float(os.environ.get("PAGED_WS_BUDGET_S", "420"))

import triton  # noqa: E402

from mqa_cli.bench import timing  # noqa: E402
from mqa_cli.check.paged_reference import reference_paged  # noqa: E402
from mqa_cli.launch import common as launch  # noqa: E402
from mqa_cli.launch.paged import paged_args  # noqa: E402
from mqa_cli.launch.paged_ws_sm90 import paged_ws_sm90_args  # noqa: E402
from mqa_cli.plan import targets  # noqa: E402
from mqa_cli.problem.paged import PagedSpec  # noqa: E402
from mqa_kernels.decode.paged.config import paged_config  # noqa: E402
from mqa_kernels.decode.paged_ws_sm90.config import paged_ws_sm90_config, regime, table_key  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sweep_common.py beside this file
import sweep_common  # noqa: E402

COPY_TBS, FP8_TFS = targets.TARGETS["sm90"].measured_bandwidth_tbs, targets.TARGETS["sm90"].measured_fp8_tflops
GPU = torch.cuda.is_available()
NUM_SMS = torch.cuda.get_device_properties(0).multi_processor_count if GPU else 132
DEVICE_NAME = os.environ.get("PAGED_WS_DEVICE") or (torch.cuda.get_device_name(0) if GPU else "NVIDIA H200")
say = sweep_common.Log("paged_ws.log")


def nbytes(t):
    ctx = t.context_lens.long()
    per_seq = ctx.max(dim=1).values if ctx.dim() == 2 else ctx  # a sequence's cache is read once for its rows
    return int(per_seq.sum()) * (t.dim + 4) + t.S * t.max_context_len * 4


def live_flop(t):
    return 2 * t.heads * t.dim * int(t.row_ends().sum())


def portable_runner(t, out):
    cfg = paged_config(heads=t.heads, dim=t.dim, next_n=t.next_n, block_size=64, batch=t.batch,
                       max_context_len=t.max_context_len, clean=False, backend="cuda", units=NUM_SMS)
    return sweep_common.jit_runner(cfg, paged_args(t, cfg, out, None))


# what a candidate leaves out: it is timed as labelled, never merged with the table's entry for the shape
COMPLETE = {"MATH_WG": 1, "PIPE": False, "Q_IN_LANES": False, "MMA_N": 0, "AHEAD": True, "PTX_SLOTS": False}
PARTS = [dict(STAGES=6, SUBS=1, MATH_WG=2, MMA_N=128), dict(STAGES=6, SUBS=1, MATH_WG=2, MMA_N=64),
         dict(STAGES=4, SUBS=1, MATH_WG=3, MMA_N=64)]
SWEEPS = {  # candidates by table key (live columns next_n x H); why these: docs/EXPERIMENTS.md
    64: [dict(STAGES=4, SUBS=3), dict(STAGES=4, SUBS=1), dict(STAGES=6, SUBS=2), dict(STAGES=6, SUBS=1, MATH_WG=3),
         dict(STAGES=8, SUBS=1, MATH_WG=2), dict(STAGES=4, SUBS=2, MATH_WG=2), dict(STAGES=5, SUBS=1, MATH_WG=4),
         dict(STAGES=6, SUBS=2, PIPE=True)],
    128: [dict(STAGES=5, SUBS=2, PIPE=True), dict(STAGES=5, SUBS=1, MATH_WG=3), dict(STAGES=6, SUBS=1, MATH_WG=3),
          dict(STAGES=8, SUBS=1, MATH_WG=2), dict(STAGES=4, SUBS=1, MATH_WG=4), dict(STAGES=5, SUBS=1, MATH_WG=4),
          dict(STAGES=6, SUBS=2, PIPE=True), dict(STAGES=4, SUBS=2, PIPE=True),
          dict(STAGES=5, SUBS=1, MATH_WG=3, Q_IN_LANES=True)],
    192: [dict(STAGES=6, SUBS=1, MATH_WG=2), dict(STAGES=8, SUBS=1, MMA_N=64), *PARTS,
          dict(STAGES=4, SUBS=1, MATH_WG=3, MMA_N=64, AHEAD=False)],
    256: [dict(STAGES=8, SUBS=1), dict(STAGES=6, SUBS=1, MATH_WG=2), dict(STAGES=8, SUBS=1, MATH_WG=2),
          dict(STAGES=8, SUBS=1, Q_IN_LANES=True), dict(STAGES=8, SUBS=1, MATH_WG=2, Q_IN_LANES=True),
          dict(STAGES=6, SUBS=1, MATH_WG=2, MMA_N=128), dict(STAGES=8, SUBS=1, MMA_N=128), *PARTS[1:]],
}
for _n in (5, 6, 7, 8):
    SWEEPS[64 * _n] = [dict(STAGES=4, SUBS=1, MATH_WG=2, MMA_N=128), dict(STAGES=4, SUBS=1, MATH_WG=2, MMA_N=64),
                       dict(STAGES=3, SUBS=1, MATH_WG=3, MMA_N=64), dict(STAGES=4, SUBS=1, MATH_WG=3, MMA_N=64),
                       dict(STAGES=3, SUBS=1, MATH_WG=3, MMA_N=128, AHEAD=False),
                       dict(STAGES=4, SUBS=1, MATH_WG=2, MMA_N=128, AHEAD=False),
                       dict(STAGES=4, SUBS=1, MATH_WG=3, MMA_N=64, AHEAD=False),
                       dict(STAGES=3, SUBS=1, MATH_WG=3, MMA_N=128, AHEAD=False, PTX_SLOTS=True),
                       dict(STAGES=4, SUBS=1, MATH_WG=3, MMA_N=64, AHEAD=False, PTX_SLOTS=True),
                       dict(STAGES=4, SUBS=1, MATH_WG=2, MMA_N=128, AHEAD=False, PTX_SLOTS=True)]


def label_of(ch: dict) -> str:
    return (f"st{ch['STAGES']}-sub{ch['SUBS']}" + ("-pipe" if ch.get("PIPE") else "")
            + (f"-wg{ch['MATH_WG']}" if ch.get("MATH_WG", 1) > 1 else "") + ("-lanes" if ch.get("Q_IN_LANES") else "")
            + (f"-mma{ch['MMA_N']}" if ch.get("MMA_N") else "") + ("-seq" if ch.get("AHEAD") is False else "")
            + ("-ptx" if ch.get("PTX_SLOTS") else ""))


SHAPES = [(B, C) for C in (65536, 8192) for B in (128, 64, 8, 1)] + [(4096, 8192)]


def sweep(write: bool):
    f = open(sweep_common.out_dir() / "paged_ws_sweep.csv", "w", newline="")
    wr = csv.writer(f)
    wr.writerow(["B", "C", "next_n", "config", "us", "pct_copy", "pct_floor", "rel_err", "portable_us"])
    totals: dict = {}
    summary = []
    runs = [(n, B, C) for n in (1, 2) for B, C in SHAPES] + [(n, B, C) for n in range(3, 9)
                                                            for B, C in ((64, 8192), (128, 65536))]
    only = os.environ.get("PAGED_WS_NEXT_N")  # e.g. "3,4": those draft-row counts only (a CSV to merge, no table)
    if only:
        runs = [r for r in runs if str(r[0]) in only.split(",")]
    for n, B, C in runs:
        if time.time() - T0 > BUDGET_S:
            say(f"budget reached before n{n} B{B} C{C}")
            break
        t = sweep_common.decode_step(B, C, n, "cuda", seed=B + C + n)
        ref = reference_paged(t, dtype=torch.float32, clean_logits=True)
        byts, flop = nbytes(t), live_flop(t)
        floor_us = max(byts / (COPY_TBS * 1e12), flop / (FP8_TFS * 1e12)) * 1e6
        out = launch.alloc_logits(t.S, t.max_context_len, "cuda")
        calls, checked = {}, {}  # the runners to time (the portable kernel's first), the checked candidates
        try:
            run = portable_runner(t, out)
            run()
            calls["portable"] = run
        except Exception as e:  # noqa: BLE001
            say(f"  portable ERROR {type(e).__name__}: {str(e)[:200]}")
        N = table_key(n, 64)
        for ch in SWEEPS[N]:
            label = label_of(ch)
            try:
                cfg = paged_ws_sm90_config(heads=64, dim=128, next_n=n, block_size=64, batch=B,
                                           max_context_len=t.max_context_len, clean=False, units=NUM_SMS,
                                           override={**COMPLETE, **ch})
                run = sweep_common.jit_runner(cfg, paged_ws_sm90_args(t, cfg, out, None))
            except Exception as e:  # noqa: BLE001  (a choice the config refuses is a result)
                say(f"  n{n} B{B} C{C} {label}: ERROR {type(e).__name__}: {str(e)[:200]}")
                continue
            ok, err, note = sweep_common.check(run, out, lambda o: sweep_common.live_error(o, ref))
            if not ok or err > 2e-3:
                say(f"  n{n} B{B} C{C} {label}: FAILED check {'' if err is None else f'{err:.2e}'} {note}")
                continue
            calls[label] = run
            checked[label] = (ch, err)
        medians, rounds = sweep_common.side_by_side(calls, rep_ms=25) if checked else ({}, [])
        port = timing.median_in_rounds(rounds, "portable") if rounds and "portable" in calls else float("nan")
        res = []
        for label, (ch, err) in checked.items():
            us = medians[label]
            pct = byts / (us * 1e-6) / (COPY_TBS * 1e12) * 100
            res.append((us, label, pct))
            wr.writerow([B, C, n, label, f"{us:.2f}", f"{pct:.1f}", f"{floor_us / us * 100:.1f}", f"{err:.1e}",
                         f"{port:.2f}"])
            f.flush()
            agg = totals.setdefault((N, regime(B, t.max_context_len)), {}).setdefault(tuple(sorted(ch.items())),
                                                                                     [0.0, 0])
            # relative to the portable kernel in the same rounds: every shape weighs alike
            agg[0] += timing.ratio_in_rounds(rounds, label, "portable") if port == port else 1.0
            agg[1] += 1
        if res:
            us, label, pct = min(res)
            summary.append((n, B, C, us, pct, floor_us / us * 100, label, port))
            say(f"n{n} B{B:5d} C{C // 1024:3d}K best {us:8.2f} us {pct:5.1f} % copy {floor_us / us * 100:5.1f} % floor "
                f"{label:10s} portable {port:8.2f} us ({port / us:.2f}x) | " + " ".join(f"{lb}={u:.1f}" for u, lb, _ in res))
        del t, out, ref
        torch.cuda.empty_cache()
    say("\n| next_n | B | C | Gluon µs (best) | % of 4.3 TB/s | % of floor | config | portable µs |")
    say("|---|---|---|---|---|---|---|---|")
    for n, B, C, us, pct, fl, label, port in summary:
        say(f"| {n} | {B} | {C // 1024}K | {us:.2f} | {pct:.1f} | {fl:.1f} | {label} | {port:.2f} |")
    if write:
        write_table(totals)


def write_table(totals: dict) -> None:
    """kernels/decode/paged_ws_sm90/tuned.py: per table key (config.table_key) and size class (config.regime), the checked choice with the least
    summed time relative to the portable kernel over the shapes where every candidate ran. The config reads it;
    nothing is copied by hand."""
    doc = ["The H200 (sm90) choices of the Gluon paged decode kernel, by live columns next_n x H (H 64 in the sweep;",
           "config.table_entry falls back to the padded N = NP x H for other head counts) and the size class",
           "(config.regime): written by `python3 tools/tune/paged_ws_experiment.py` on",
           f"{DEVICE_NAME}, {time.strftime('%Y-%m-%d')}, triton {triton.__version__}: every candidate checked against the",
           "reference, then timed by CUDA-graph replay from a cold L2 (2-D context lengths); kept:",
           "the least time summed over the swept shapes of the class (each relative to the portable kernel on that",
           "shape)."]
    body = ["CUDA_TUNED = {"]
    for N in sorted({n for n, _ in totals}):
        body.append(f"    {N}: {{")
        for reg in ("small", "large"):
            per = totals.get((N, reg))
            if not per:
                continue
            most = max(c for _, c in per.values())
            full = {k: v for k, v in per.items() if v[1] == most}
            items, (tot, cnt) = min(full.items(), key=lambda kv: kv[1][0])
            body.append(f"        {reg!r}: {dict(items)!r},  # {label_of(dict(items))}: mean {tot / cnt:.3f} of the "
                        f"portable kernel's time, {cnt} shapes")
        body.append("    },")
    body.append("}")
    table = os.environ.get("PAGED_WS_TABLE")
    sweep_common.write_table(Path(table or ROOT / "kernels" / "decode" / "paged_ws_sm90" / "tuned.py"), doc, body, say,
                             copy_as=None if table else "paged_ws_tuned.py")


def table_from_csv(paths: list[str]) -> None:
    """Rewrite the table from sweep CSVs (paged_ws_sweep.csv): the same rule as --write-table, for a sweep whose
    CSV came back but whose table did not. With several CSVs, a later one's rows replace an earlier one's for
    every draft-row count it holds (a sweep of some next_n merged into a full one: PAGED_WS_NEXT_N). Each row is
    relative to the portable kernel timed in its own run. The size class is recomputed from the seeded contexts."""
    rows: dict = {}
    for path in paths:
        with open(path) as f:
            got = list(csv.DictReader(f))
        for n in {r["next_n"] for r in got}:
            rows[n] = [r for r in got if r["next_n"] == n]
    totals: dict = {}
    choices = {label_of(ch): ch for cands in SWEEPS.values() for ch in cands}
    for row in (r for n in sorted(rows) for r in rows[n]):
        B, C, n = int(row["B"]), int(row["C"]), int(row["next_n"])
        ch = choices.get(row["config"])
        if ch is None or not row["us"] or not row["portable_us"]:
            continue
        spec = PagedSpec(batch=B, next_n=n, context_len=C, context_jitter=0.3, block_size=64, seed=B + C + n)
        N = table_key(n, 64)
        agg = totals.setdefault((N, regime(B, max(spec.context_lengths()))), {}).setdefault(
            tuple(sorted(ch.items())), [0.0, 0])
        agg[0] += float(row["us"]) / float(row["portable_us"])
        agg[1] += 1
    write_table(totals)


def main():
    if "--table-from" in sys.argv:
        table_from_csv([a for a in sys.argv[sys.argv.index("--table-from") + 1:] if not a.startswith("--")])
        return
    say(f"device {torch.cuda.get_device_name(0)}, {NUM_SMS} SMs, torch {torch.__version__}, triton {triton.__version__}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    sweep("--write-table" in sys.argv)
    say(f"total {time.time() - T0:.0f} s")


if __name__ == "__main__":
    main()
