"""Checked, timed sweep of the portable paged decode kernel (mqa_kernels.decode.paged) on the GPU: every config checked
against the float32 reference, then a shape's checked configs and the default one timed side by side
(sweep_common: graph replay after an L2 flush, SWEEP_ROUNDS (4) rounds of alternating order); the inputs, argument list, output buffer and reference are the library's
(mqa_cli), so what is swept is what the API launches. This kernel runs where the Gluon decode kernel does not
(block 16/32, a cache stride TMA cannot describe, a triton the Gluon row does not take).

    python3 tools/tune/paged_experiment.py [--write-table]     (a log and a CSV under $OUT, default /tmp/out)

Bytes = sum(ctx) * (D + 4) + B * next_n * max_context_len * 4 (4 bytes per logit, as the reference figures
count them even for bf16); % is of the 4.3 TB/s copy rate measured on the H200.
"""
from __future__ import annotations

import csv
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # sweep_common.py beside this file
import sweep_common  # noqa: E402

T0 = time.time()
BUDGET_S = float(os.environ.get("PAGED_BUDGET_S", "235"))
SMOKE = os.environ.get("PAGED_SMOKE") == "1"  # CPU dry run through the interpreter (tiny shapes, no timing)
DEV = "cpu" if SMOKE else "cuda"
COPY_TBS = 4.3
NUM_SMS = 4 if SMOKE else torch.cuda.get_device_properties(0).multi_processor_count

if SMOKE:  # before any kernel module is imported
    from mqa_cli.launch import interpreter

    interpreter.enable_if_no_gpu(note=False)

import triton  # noqa: E402

from mqa_cli.check.paged_reference import reference_paged  # noqa: E402
from mqa_cli.launch import common as launch, schedule  # noqa: E402
from mqa_cli.launch.paged import paged_args  # noqa: E402
from mqa_cli.problem.paged import PagedSpec  # noqa: E402
from mqa_cli.problem.paged_tensors import random_paged  # noqa: E402
from mqa_kernels.decode.paged.config import paged_config  # noqa: E402


def make(B, C, next_n, H=64, D=128, bs=64, seed=0):
    """Contexts uniform in [0.7C, 1.3C), shuffled block table, kv quantised per token, randn q / weights."""
    return random_paged(PagedSpec(batch=B, next_n=next_n, context_len=C, context_jitter=0.3, block_size=bs,
                                  heads=H, dim=D, seed=seed), device=DEV)


def config_for(t, ov):
    return paged_config(heads=t.heads, dim=t.dim, next_n=t.next_n, block_size=t.block_size, batch=t.batch,
                        max_context_len=t.max_context_len, clean=False, backend="interpreter" if SMOKE else "cuda",
                        units=NUM_SMS, override=ov)


# (label, override) per dot width next_n x H. Run 1 (2026-11-30) measured register prefetch (2x slower than
# the pipeliner everywhere: dropped) and SUBS past the CTAs an SM holds (a late wave): these are the follow-ups.
SWEEPS = {
    64: [
        ("pl5-kv64-s4", {"BLOCK_KV": 64, "num_stages": 5, "SUBS": 4}),
        ("pl5-kv64-s5", {"BLOCK_KV": 64, "num_stages": 5, "SUBS": 5}),
        ("pl6-kv64-s5", {"BLOCK_KV": 64, "num_stages": 6, "SUBS": 5}),
        ("pl7-kv64-s4", {"BLOCK_KV": 64, "num_stages": 7, "SUBS": 4}),
        ("pl7-kv64-s5-r96", {"BLOCK_KV": 64, "num_stages": 7, "SUBS": 5, "maxnreg": 96}),
    ],
    128: [
        ("r2-pl6-kv128-s2", {"BLOCK_KV": 128, "num_stages": 6, "SUBS": 2}),
        ("r1-pl5-kv64-s4", {"ROWS": 1, "BLOCK_KV": 64, "num_stages": 5, "SUBS": 4}),
        ("r1-pl7-kv64-s4", {"ROWS": 1, "BLOCK_KV": 64, "num_stages": 7, "SUBS": 4}),
        ("r1-pl6-kv128-s3", {"ROWS": 1, "BLOCK_KV": 128, "num_stages": 6, "SUBS": 3}),
        ("r1-pl5-kv64-s5-r96", {"ROWS": 1, "BLOCK_KV": 64, "num_stages": 5, "SUBS": 5, "maxnreg": 96}),
    ],
    256: [
        ("r4-pl5-kv64-s2", {"BLOCK_KV": 64, "num_stages": 5, "SUBS": 2}),
        ("r2-pl5-kv64-s2", {"ROWS": 2, "BLOCK_KV": 64, "num_stages": 5, "SUBS": 2}),
        ("r2-pl7-kv64-s2", {"ROWS": 2, "BLOCK_KV": 64, "num_stages": 7, "SUBS": 2}),
        ("r2-pl5-kv64-s3-r168", {"ROWS": 2, "BLOCK_KV": 64, "num_stages": 5, "SUBS": 3, "maxnreg": 168}),
    ],
}

SHAPES = [(B, C) for C in (65536, 8192) for B in (128, 64, 8, 1)] + [(4096, 8192)]
if SMOKE:
    SHAPES = [(3, 200), (1, 130)]


def main():
    say = sweep_common.Log("paged_experiment.log")
    say(f"device {'cpu (smoke)' if SMOKE else torch.cuda.get_device_name(0)}, {NUM_SMS} SMs, "
        f"torch {torch.__version__}, triton {triton.__version__}")
    csv_f = open(sweep_common.out_dir() / "paged_sweep.csv", "w", newline="")
    wr = csv.writer(csv_f)
    wr.writerow(["B", "C", "next_n", "config", "us", "pct_copy", "rel_err", "note"])
    rows_by_n = {}  # dot width -> config label -> total µs and shapes timed (for --write-table)
    for next_n in (1, 2, 4):
        for B, C in SHAPES:
            if time.time() - T0 > BUDGET_S:
                say(f"budget reached at next_n {next_n} B {B} C {C}: stopping the sweep")
                break
            t = make(B, C, next_n, seed=B + C + next_n)
            ref = reference_paged(t, dtype=torch.float32, clean_logits=True)
            meta = schedule.get_paged_mqa_logits_metadata(t.context_lens, t.block_size, NUM_SMS)
            byts = int(t.context_lens.long().sum()) * (t.dim + 4) + t.S * t.max_context_len * 4
            n_key = min(k for k in SWEEPS if k >= next_n * t.heads)
            # every candidate checked first, then the checked ones and the default config side by side
            calls, checked = {}, {}
            for label, ov in SWEEPS[n_key] + [("(default)", None)]:  # (default): what paged_config picks itself
                try:
                    cfg = config_for(t, ov)
                    out = launch.alloc_logits(t.S, t.max_context_len, DEV, torch.float32)
                    run = sweep_common.jit_runner(cfg, paged_args(t, cfg, out, meta))
                except Exception as e:  # noqa: BLE001  (a config the rule refuses is reported, not fatal)
                    say(f"  n{next_n} B{B} C{C} {label}: ERROR {type(e).__name__}: {str(e)[:200]}")
                    continue
                ok, err, note = sweep_common.check(run, out, lambda o: sweep_common.live_error(o, ref))
                if not ok or err > 2e-3:
                    wr.writerow([B, C, next_n, label, "", "", "" if err is None else f"{err:.2e}",
                                 note or "error too large"])
                    say(f"  n{next_n} B{B} C{C} {label}: FAILED check {'' if err is None else f'{err:.2e}'} {note}")
                    continue
                calls[label], checked[label] = run, err
            us_of = {k: 1.0 for k in calls} if SMOKE else sweep_common.side_by_side(calls)[0]
            dus = us_of.pop("(default)", float("nan"))
            checked.pop("(default)", None)
            res = []
            for label, err in checked.items():
                us = us_of[label]
                pct = byts / (us * 1e-6) / (COPY_TBS * 1e12) * 100
                res.append((us, label))
                agg = rows_by_n.setdefault(n_key, {}).setdefault(label, {"total": 0.0, "count": 0})
                agg["total"] += us
                agg["count"] += 1
                wr.writerow([B, C, next_n, label, f"{us:.2f}", f"{pct:.1f}", f"{err:.2e}", ""])
                csv_f.flush()
            if res:
                us, label = min(res)
                say(f"n{next_n} B{B:5d} C{C // 1024:3d}K  best {us:8.1f} us {label:18s} default {dus:8.1f} us | "
                    + " ".join(f"{lb}={u:.1f}" for u, lb in sorted(res, key=lambda r: r[1])))
            del t, ref
            if not SMOKE:
                torch.cuda.empty_cache()
    say(f"total {time.time() - T0:.0f} s")
    if "--write-table" in sys.argv and not SMOKE:
        write_table(rows_by_n, say)


def write_table(rows_by_n: dict, say) -> None:
    """kernels/decode/paged/tuned.py: per dot width N (next_n x H), the checked config with the least total time over
    the swept shapes. The config reads this table; nothing is copied by hand."""
    table = {}
    for n, per_label in sorted(rows_by_n.items()):
        full = {lb: v for lb, v in per_label.items() if v["count"] == max(x["count"] for x in per_label.values())}
        label = min(full, key=lambda lb: full[lb]["total"])
        table[n] = (label, dict(SWEEPS[n])[label] if n in SWEEPS else {}, full[label]["total"], full[label]["count"])
    path = Path(os.environ.get("PAGED_TABLE") or ROOT / "kernels" / "decode" / "paged" / "tuned.py")
    doc = ["The H200 (sm90) configs of the paged decode kernel, by the dot's width N = next_n x H: written by",
           f"`python3 tools/tune/paged_experiment.py --write-table` on {torch.cuda.get_device_name(0)}, "
           f"{time.strftime('%Y-%m-%d')}, triton {triton.__version__}.",
           "Each config was checked against the reference before it was timed (a shape's checked configs side by",
           "side, CUDA-graph replay after an L2 flush); the one with the least total time over the swept shapes is kept."]
    body = ["CUDA_TUNED = {"] + [f"    {n}: {ov!r},  # {label}: {total:.1f} us over {count} shapes"
                                 for n, (label, ov, total, count) in table.items()] + ["}"]
    sweep_common.write_table(path, doc, body, say, copy_as="paged_tuned.py")

if __name__ == "__main__":
    main()
