"""H200 check of the warp-specialised Gluon sm90 prefill kernel: correctness, then timing beside h64d128_sm90 and tiled.

Run on the GPU machine: `PYTHONUNBUFFERED=1 python3 scripts/gpu_gluon_ws_check.py [--long] [--variants]`.
Everything printed is appended to $OUT/report_ws.txt (or ./report_ws.txt). --long adds the 1x32768 causal
shape; --variants times the constexpr overrides listed in VARIANTS. Reference kernels run through
dispatch.plan(kernel=NAME, force=True) + launch.launch (no host-side validation in the timed region).
"""
from __future__ import annotations

import argparse
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

from mqa_cli import dispatch
from mqa_cli import launch as mlaunch
from mqa_cli.api import shape_of, target_for
from mqa_cli.launch_gluon_ws import launch_gluon_ws_sm90
from mqa_cli.problem import ProblemSpec
from mqa_cli.reference import reference_logits
from mqa_cli.tensors import live_mask, random_prefill
from mqa_kernels.config_gluon_ws_sm90 import gluon_ws_sm90_config

UNITS = torch.cuda.get_device_properties(0).multi_processor_count
REPORT = os.path.join(os.environ.get("OUT", "."), "report_ws.txt")

# (label, spec kwargs, target µs for the full op or None, time it?)
CHECKS = [
    ("1000 causal H64", dict(seq=1000), None, False),
    ("1000 causal H32", dict(seq=1000, heads=32), None, False),
    ("1000 window 128", dict(seq=1000, layout="window", window=128), None, False),
    ("3x1000 ratio 4", dict(batch=3, seq=1000, ratio=4), None, False),
    ("cp 2x512", dict(batch=2, seq=512, layout="cp"), None, False),
]
ANCHORS = [
    ("1x4096 causal", dict(seq=4096), 140, True),
    ("1x4096 causal H32", dict(seq=4096, heads=32), 90, True),
    ("1x8192 causal", dict(seq=8192), 540, True),
    ("4x8192 ratio 4", dict(batch=4, seq=8192, ratio=4), 600, True),
    ("S4096 N65536 full", dict(seq=4096, seq_kv=65536, layout="full"), 4100, True),
]
LONG = [("1x32768 causal", dict(seq=32768), 8600, True)]
# --variants: (label, spec, constexpr overrides timed beside the default, full op, each checked first)
VARIANTS = [
    ("1x4096 causal H32", dict(seq=4096, heads=32), [{"STAGES": 6}]),
    ("1x8192 causal", dict(seq=8192), [{"PINGPONG": True}, {"STAGES": 3}]),
    ("4x8192 ratio 4", dict(batch=4, seq=8192, ratio=4), [{"PINGPONG": True}]),
]


def log(msg=""):
    print(msg, flush=True)
    with open(REPORT, "a") as f:
        f.write(msg + "\n")


def ws_run(t, clean, **override):
    cfg = gluon_ws_sm90_config(heads=t.heads, dim=t.dim, S=t.S, N=t.N, clean=clean, units=UNITS)
    if override:
        cfg = dataclasses.replace(cfg, constexprs={**cfg.constexprs, **override})
    return lambda out=None: launch_gluon_ws_sm90(t, cfg, out)


def ref_run(t, clean, name):
    """A dispatch row's kernel launched through the JIT (its argument builder, no validation)."""
    cfg = dispatch.plan(shape_of(t, clean), target_for(t.q.device), kernel=name, force=True).config
    kernel = mlaunch.kernel_object(cfg, False)
    build = mlaunch.args_builder(cfg.module) if hasattr(mlaunch, "args_builder") else mlaunch.ARGS[cfg.module]

    def run(out=None):
        out = mlaunch.alloc_logits(t.S, t.N, t.q.device) if out is None else out
        a = build(t, cfg, out)
        kernel[a.grid](*a.args, **a.constexprs, **a.options)
        return out

    return run


def check(t, clean, run, ref):
    """(ok, message): exact -inf pattern (clean), NaN-poisoned output fully written, rel err, bitwise repeat."""
    S, N = t.S, t.N
    bufs = []
    for _ in range(2):
        out = mlaunch.alloc_logits(S, N, "cuda")
        out.fill_(float("nan"))
        run(out)
        bufs.append(out)
    torch.cuda.synchronize()
    out, out2 = bufs
    live = live_mask(t.ks, t.ke, N)
    ok, msgs = True, []
    if clean:
        nan = int(torch.isnan(out).sum())
        pattern = torch.equal(torch.isneginf(out), ~live)
        if nan or not pattern:
            ok = False
            msgs.append(f"nan={nan} -inf pattern {'ok' if pattern else 'WRONG'} "
                        f"(-inf in live {int((torch.isneginf(out) & live).sum())}, "
                        f"finite in dead {int((torch.isfinite(out) & ~live).sum())})")
    else:
        nan = int(torch.isnan(out[live]).sum())
        if nan:
            ok = False
            msgs.append(f"nan in live={nan}")
    fin = live & torch.isfinite(out)
    diff = (out[fin].double() - ref[fin].double()).norm()
    rel = float(diff / ref[live].double().norm().clamp_min(1e-30))
    if not (rel < 1e-3) or int(fin.sum()) != int(live.sum()):
        ok = False
    same = torch.equal(out, out2) if clean else torch.equal(out[live], out2[live])
    ok &= same
    msgs.append(f"rel={rel:.2e} repeat={'bitwise' if same else 'DIFFERS'}")
    del out, out2, live, fin
    return ok, " ".join(msgs)


def bench(fn, rep):
    out = fn()  # compile + warm
    torch.cuda.synchronize()
    return triton.testing.do_bench(lambda: fn(out), warmup=5, rep=rep, return_mode="median") * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--long", action="store_true", help="add the 1x32768 causal shape")
    ap.add_argument("--variants", action="store_true", help="time the VARIANTS constexpr overrides")
    ap.add_argument("--no-ref", action="store_true", help="skip timing h64d128_sm90 and tiled")
    ap.add_argument("--rep", type=int, default=30, help="do_bench rep (ms)")
    a = ap.parse_args()
    log(f"==== {time.strftime('%Y-%m-%d %H:%M:%S')} device {torch.cuda.get_device_name(0)}, {UNITS} SMs, "
        f"torch {torch.__version__}, triton {triton.__version__}")
    all_ok = True
    rows = []
    for label, kw, target, timed in CHECKS + ANCHORS + (LONG if a.long else []):
        t0 = time.time()
        try:
            t = random_prefill(ProblemSpec(**kw), device="cuda")
            live_n = int((t.ke.long() - t.ks.long()).clamp_min(0).sum())
            flop = 2 * t.heads * t.dim * live_n
            res = {"shape": label, "live": live_n, "target": target}
            for clean in (True, False):
                ref = reference_logits(t, clean_logits=clean)
                ok, msg = check(t, clean, ws_run(t, clean), ref)
                del ref
                torch.cuda.empty_cache()
                all_ok &= ok
                res[f"chk{int(clean)}"] = ok
                res["rel"] = msg.split("rel=")[1].split()[0]
                log(f"{label:18s} clean={int(clean)} {'ok' if ok else 'FAIL'} {msg}")
            if timed:
                for clean in (True, False):
                    res[f"ws{int(clean)}"] = bench(ws_run(t, clean), a.rep)
                    if not a.no_ref:
                        res[f"h{int(clean)}"] = bench(ref_run(t, clean, "h64d128_sm90"), a.rep)
                        res[f"t{int(clean)}"] = bench(ref_run(t, clean, "tiled"), a.rep)
                    log(f"{label:18s} clean={int(clean)} ws {res[f'ws{int(clean)}']:8.1f} us "
                        f"({flop / res[f'ws{int(clean)}'] / 1e6:5.0f} TF/s)  h64d128 {res.get(f'h{int(clean)}', 0):8.1f}"
                        f"  tiled {res.get(f't{int(clean)}', 0):8.1f}")
                rows.append((res, flop))
            del t
            torch.cuda.empty_cache()
        except Exception:
            all_ok = False
            log(traceback.format_exc())
        log(f"  ({time.time() - t0:.1f} s)")

    def cell(res, k, flop):
        v = res.get(k)
        return f"{v:.1f} ({flop / v / 1e6:.0f})" if v else "-"

    log("")
    log("| shape | ws full op µs (TF/s) | h64d128 full | tiled full | ws kernel-only | h64d128 k-only | tiled k-only "
        "| target full | check |")
    log("|---|---|---|---|---|---|---|---|---|")
    for res, flop in rows:
        chk = "ok" if res.get("chk1") and res.get("chk0") else "FAIL"
        log(f"| {res['shape']} | {cell(res, 'ws1', flop)} | {cell(res, 'h1', flop)} | {cell(res, 't1', flop)} | "
            f"{cell(res, 'ws0', flop)} | {cell(res, 'h0', flop)} | {cell(res, 't0', flop)} | "
            f"≤{res['target']} | {chk} rel {res['rel']} |")

    if a.variants:
        for label, kw, overrides in VARIANTS:
            try:
                t = random_prefill(ProblemSpec(**kw), device="cuda")
                for override in [{}] + overrides:
                    msg = ""
                    if override:
                        ok, msg = check(t, True, ws_run(t, True, **override), reference_logits(t, clean_logits=True))
                        all_ok &= ok
                        msg = ("check ok " if ok else "CHECK FAILED ") + msg
                    us = bench(ws_run(t, True, **override), a.rep)
                    log(f"variant {label} {override or 'default'}: {us:.1f} us {msg}")
                del t
                torch.cuda.empty_cache()
            except Exception:
                all_ok = False
                log(traceback.format_exc())
    log("ALL OK" if all_ok else "SOME CHECKS FAILED")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
