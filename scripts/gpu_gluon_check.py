"""H200 check of the Gluon sm90 prefill kernel: correctness against the float32 reference, then timing.

Run on the GPU machine: `python scripts/gpu_gluon_check.py`; prints a table and writes it to
$OUT/gluon.txt (or ./gluon.txt). The portable Triton kernel ("tiled") is timed beside it, launched
directly with its dispatch config (no host-side validation in the timed region).
"""
from __future__ import annotations

import dataclasses
import os
import sys
import time
import traceback

import torch
import triton

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
try:  # installed: kernels/ is the package mqa_kernels
    import mqa_kernels  # noqa: F401
except ImportError:  # run from a plain checkout
    import kernels

    sys.modules["mqa_kernels"] = kernels

from mqa_cli import launch as mlaunch
from mqa_cli.launch_gluon import launch_gluon_sm90
from mqa_cli.problem import ProblemSpec
from mqa_cli.reference import reference_logits
from mqa_cli.tensors import live_mask, random_prefill
from mqa_kernels.config_gluon_sm90 import gluon_sm90_config
from mqa_kernels.configs import tiled_config

UNITS = torch.cuda.get_device_properties(0).multi_processor_count

# (label, spec kwargs, target µs for the full op or None, time it?)
SHAPES = [
    ("1000 causal H64", dict(seq=1000), None, False),
    ("1000 causal H32", dict(seq=1000, heads=32), None, False),
    ("1000 window128", dict(seq=1000, layout="window", window=128), None, False),
    ("cp 2x512", dict(batch=2, seq=512, layout="cp"), None, False),
    ("1x4096 causal", dict(seq=4096), 140, True),
    ("1x4096 causal H32", dict(seq=4096, heads=32), 90, True),
    ("1x8192 causal", dict(seq=8192), 540, True),
    ("4x8192 ratio 4", dict(batch=4, seq=8192, ratio=4), 600, True),
    ("S4096 N65536 full", dict(seq=4096, seq_kv=65536, layout="full"), 4100, True),
    ("1x32768 causal", dict(seq=32768), 8600, True),
]


def gluon_run(t, clean):
    cfg = gluon_sm90_config(heads=t.heads, dim=t.dim, S=t.S, N=t.N, clean=clean, units=UNITS)
    return lambda out=None: launch_gluon_sm90(t, cfg, out)


def tiled_run(t, clean):
    cfg = tiled_config(heads=t.heads, dim=t.dim, S=t.S, N=t.N, clean=clean, backend="cuda", units=UNITS)
    return lambda out=None: mlaunch.launch(t, cfg, out)


def gluon_variant(t, clean, **constexprs):
    cfg = gluon_sm90_config(heads=t.heads, dim=t.dim, S=t.S, N=t.N, clean=clean, units=UNITS)
    cfg = dataclasses.replace(cfg, constexprs={**cfg.constexprs, **constexprs})
    return lambda out=None: launch_gluon_sm90(t, cfg, out)


def check(t, clean, run):
    """Returns (ok, message)."""
    S, N = t.S, t.N
    bufs = []
    for _ in range(2):
        out = mlaunch.alloc_logits(S, N, "cuda")
        out.fill_(float("nan"))
        run(out)
        bufs.append(out)
    torch.cuda.synchronize()
    out, out2 = bufs
    ref = reference_logits(t, clean_logits=clean)
    live = live_mask(t.ks, t.ke, N)
    msgs = []
    ok = True
    if clean:
        nan = int(torch.isnan(out).sum())
        pattern = torch.equal(torch.isneginf(out), ~live)
        if nan or not pattern:
            ok = False
            msgs.append(f"nan={nan} -inf pattern {'ok' if pattern else 'WRONG'}")
    else:
        nan = int(torch.isnan(out[live]).sum())
        if nan:
            ok = False
            msgs.append(f"nan in live={nan}")
    fin = live & torch.isfinite(out)
    diff = (out[fin].double() - ref[fin].double()).norm()
    rel = float(diff / ref[live].double().norm().clamp_min(1e-30))
    if not (rel < 1e-3):
        ok = False
    same = torch.equal(out[live], out2[live]) if not clean else torch.equal(out, out2)
    if not same:
        ok = False
    msgs.append(f"rel={rel:.2e} repeat={'bitwise' if same else 'DIFFERS'}")
    del out, out2, ref, live, fin
    torch.cuda.empty_cache()
    return ok, " ".join(msgs)


def bench(fn):
    out = fn()  # compile + warm
    torch.cuda.synchronize()
    return triton.testing.do_bench(lambda: fn(out), warmup=25, rep=100, return_mode="median") * 1e3


def main():
    print(f"device {torch.cuda.get_device_name(0)}, {UNITS} SMs, torch {torch.__version__}, triton {triton.__version__}",
          flush=True)
    rows = []
    all_ok = True
    for label, kw, target, timed in SHAPES:
        spec = ProblemSpec(**kw)
        t0 = time.time()
        try:
            t = random_prefill(spec, device="cuda")
            live_n = int((t.ke.long() - t.ks.long()).clamp_min(0).sum())
            flop = 2 * t.heads * t.dim * live_n
            res = {"shape": label, "live": live_n, "target": target}
            for clean in (True, False):
                ok, msg = check(t, clean, gluon_run(t, clean))
                all_ok &= ok
                res[f"chk{int(clean)}"] = ("ok " if ok else "FAIL ") + msg
                print(f"{label:20s} clean={int(clean)} {'ok' if ok else 'FAIL'} {msg}", flush=True)
            if timed:
                for clean in (True, False):
                    g = bench(gluon_run(t, clean))
                    p = bench(tiled_run(t, clean))
                    res[f"g{int(clean)}"] = g
                    res[f"p{int(clean)}"] = p
                    print(f"{label:20s} clean={int(clean)} gluon {g:8.1f} us ({flop / g / 1e6:6.0f} TF/s)  "
                          f"tiled {p:8.1f} us ({flop / p / 1e6:6.0f} TF/s)", flush=True)
            rows.append((res, flop))
            del t
            torch.cuda.empty_cache()
        except Exception:
            all_ok = False
            traceback.print_exc()
            rows.append(({"shape": label, "error": True}, 0))
        print(f"  ({time.time() - t0:.1f} s)", flush=True)

    lines = ["| shape | live | gluon full op µs (TF/s) | gluon kernel-only µs (TF/s) | tiled full op µs | tiled kernel-only µs | target µs | check |",
             "|---|---|---|---|---|---|---|---|"]
    for res, flop in rows:
        if res.get("error"):
            lines.append(f"| {res['shape']} | error | | | | | | FAIL |")
            continue

        def cell(k):
            v = res.get(k)
            return f"{v:.1f} ({flop / v / 1e6:.0f})" if v else "-"

        chk = "ok" if res["chk1"].startswith("ok") and res["chk0"].startswith("ok") else "FAIL"
        rel = res["chk1"].split("rel=")[1].split()[0]
        lines.append(f"| {res['shape']} | {res['live']:,} | {cell('g1')} | {cell('g0')} | {cell('p1')} | {cell('p0')} | "
                     f"{res['target'] or '-'} | {chk} rel {rel} |")
    # STAGES sweep (full op), on two shapes, after the checks.
    sweep = []
    for label, kw in (("1x8192 causal", dict(seq=8192)), ("S4096 N65536 full", dict(seq=4096, seq_kv=65536, layout="full"))):
        try:
            t = random_prefill(ProblemSpec(**kw), device="cuda")
            for stages in (2, 3, 6):
                ok, msg = check(t, True, gluon_variant(t, True, STAGES=stages)) if label.startswith("1x8192") else (True, "")
                us = bench(gluon_variant(t, True, STAGES=stages))
                sweep.append(f"{label} STAGES={stages}: {us:.1f} us {'' if ok else 'CHECK FAILED ' + msg}")
                print(sweep[-1], flush=True)
            del t
            torch.cuda.empty_cache()
        except Exception:
            traceback.print_exc()
    lines += [""] + sweep
    table = "\n".join(lines)
    print(table)
    path = os.path.join(os.environ.get("OUT", "."), "gluon.txt")
    with open(path, "w") as f:
        f.write(table + "\n")
        for res, _ in rows:
            f.write(f"{res}\n")
    print("ALL OK" if all_ok else "SOME CHECKS FAILED")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
