"""The top-k selection sweep (k = 2048) on the GPU: every candidate config of the selection kernels checked on the
fp32 logits it selects from, then timed; `--write-table` rewrites kernels/topk/tuned.py.

  python3 tools/tune/sweep_topk.py [--write-table] [--only TEXT]
  TOPK_SMOKE=1 python3 tools/tune/sweep_topk.py        # tiny shapes through the Triton interpreter (CPU)
  python3 tools/tune/sweep_topk.py --table-from topk_sweep.log topk_summary.csv   # the table from a run's files

What it checks, times and writes: docs/GPU-PLAN.md, "tools/tune".
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import re
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # sweep_common.py beside this file
import sweep_common  # noqa: E402

SMOKE = os.environ.get("TOPK_SMOKE") == "1"
OUT = Path(os.environ.get("OUT") or "/tmp/out")

# Candidates. Compile keys: num_warps, tile, maxnreg, narrow (programs_per_unit and parts are launch-only).
ROWS = [{"num_warps": 4, "tile": 1024}, {"num_warps": 4, "tile": 512}, {"num_warps": 4, "tile": 2048},
        {"num_warps": 8, "tile": 1024}, {"num_warps": 8, "tile": 2048}, {"num_warps": 4, "tile": 1024, "maxnreg": 96},
        {"num_warps": 4, "tile": 1024, "maxnreg": 96, "narrow": 256}, {"num_warps": 4, "tile": 512, "narrow": 256},
        {"num_warps": 4, "tile": 512, "narrow": 1024}]
ROWS_PPU = (2, 4, 8)
SPLIT = [{"kind": "split", "num_warps": 8, "tile": 1024}, {"kind": "split", "num_warps": 8, "tile": 2048},
         {"kind": "split", "num_warps": 8, "tile": 2048, "maxnreg": 128},
         {"kind": "split", "num_warps": 4, "tile": 1024},
         {"kind": "split", "num_warps": 8, "tile": 2048, "maxnreg": 128, "narrow": 256},
         {"kind": "split", "num_warps": 8, "tile": 1024, "narrow": 1024}]
SPLIT_PPU = (2, 4, 8)
DECODE_OTHERS = [{"kind": "rows", "num_warps": 4, "tile": 1024, "programs_per_unit": 4}, {"kind": "torch"}]
WORKSPACES = (256 << 20, 1 << 30, 2 << 30)
if SMOKE:
    ROWS, ROWS_PPU = ROWS[:1] + ROWS[7:8], (2,)
    SPLIT, SPLIT_PPU = SPLIT[3:], (2,)
    DECODE_OTHERS = DECODE_OTHERS[1:]
    WORKSPACES = (1 << 20, 16 << 20)

LOG = []
CANDS: dict = {}  # label -> tuning dict of every candidate timed


def say(*a) -> None:
    line = " ".join(str(x) for x in a)
    print(line, flush=True)
    LOG.append(line)


def label(c: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in c.items()) or "default"


def fmt(x, spec=".1f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


# ------------------------------------------------------------------------------------------------ shapes


def shapes():
    """(name, kind, params): the prefill seed shapes and the decode rows of issue 13 (smoke: tiny ones)."""
    if SMOKE:
        return [("smoke 1x160 causal", "prefill", dict(S=160, N=160, layout="causal")),
                ("smoke 4x32 ratio 4", "prefill", dict(S=128, N=256, layout="ratio4")),
                ("smoke paged B3 C500 n1", "paged", dict(B=3, C=500))]
    return [("1x4096 causal", "prefill", dict(S=4096, N=4096, layout="causal")),
            ("1x8192 causal", "prefill", dict(S=8192, N=8192, layout="causal")),
            ("4x8192 ratio 4", "prefill", dict(S=32768, N=8192, layout="ratio4")),
            ("1x32768 causal", "prefill", dict(S=32768, N=32768, layout="causal")),
            ("paged B64 C8K n1", "paged", dict(B=64, C=8192)), ("paged B128 C8K n1", "paged", dict(B=128, C=8192)),
            ("paged B64 C64K n1", "paged", dict(B=64, C=65536)), ("paged B128 C64K n1", "paged", dict(B=128, C=65536))]


def paged_spec(p: dict):
    from mqa_cli.problem.paged import PagedSpec

    H, D = (16, 64) if SMOKE else (64, 128)
    return PagedSpec(batch=p["B"], next_n=1, context_len=p["C"], context_jitter=0.3, block_size=16 if SMOKE else 64,
                     heads=H, dim=D)


def candidates(kind: str) -> list[dict]:
    if kind == "prefill":
        return [{**c, "programs_per_unit": u} for c in ROWS for u in ROWS_PPU]
    return [{**c, "programs_per_unit": u} for c in SPLIT for u in SPLIT_PPU] + DECODE_OTHERS


# ------------------------------------------------------------------------------------------------ precompile


def _meta_launch(job: dict):
    """(cfg, LaunchArgs) of a candidate on "meta" tensors shaped as the real launch (same specialization)."""
    import torch

    from mqa_cli.api.topk import select_args
    from mqa_kernels.topk.config import topk_config

    cfg = topk_config(rows=job["rows"], cols=job["cols"], topk=job["k"], backend="cuda", units=job["units"],
                      window=not job["paged"], paged=job["paged"], values=False, cap=job["cap"],
                      **job["tuning"])
    if cfg.schedule["kind"] == "torch":
        return cfg, None
    m = dict(device="meta")
    R = job["rows"]
    logits = torch.empty(R, job["stride"], **m)[:, : job["cols"]]
    i32 = lambda *s: torch.empty(*s, dtype=torch.int32, **m)  # noqa: E731
    paged = (i32(R), 1, job["cols"]) if job["paged"] else None
    return cfg, select_args(cfg, logits, i32(R), i32(R), i32(R, job["k"]), None, paged=paged,
                            scratch=i32(cfg.schedule["scratch_elems"]) if cfg.schedule["scratch_elems"] else None,
                            arrive=i32(R) if cfg.schedule["arrive"] else None)


def _compile_job(job: dict) -> None:
    """In a worker (no interpreter, no GPU use): compile one candidate's kernel for the GPU's arch with exactly the
    launch's signature, so the launch finds it in Triton's cache."""
    os.environ.pop("TRITON_INTERPRET", None)
    from triton.backends.compiler import GPUTarget

    from mqa_cli.inspect import compile as comp

    comp.prepare()
    cfg, la = _meta_launch(job)
    comp.compile_launch(cfg.jitted(), la, GPUTarget("cuda", job["arch"], 32))


# ------------------------------------------------------------------------------------------------ checks


def reference(logits, k: int, lo, hi):
    """Per row: the k-th largest live value inside [lo, hi) (-inf when fewer live) and the live count."""
    import torch

    R, N = logits.shape
    kth = torch.empty(R, device=logits.device)
    nlive = torch.empty(R, dtype=torch.long, device=logits.device)
    cols = torch.arange(N, device=logits.device)
    for r0 in range(0, R, 2048):
        r1 = min(R, r0 + 2048)
        x = logits[r0:r1].float()
        live = (cols[None, :] >= lo[r0:r1, None].long()) & (cols[None, :] < hi[r0:r1, None].long())
        live &= x > float("-inf")
        x = x.masked_fill(~live, float("-inf"))
        nlive[r0:r1] = live.sum(1)
        kth[r0:r1] = torch.topk(x, min(k, N), dim=1).values[:, -1]
    return kth, nlive


def check(idx, logits, k: int, lo, hi, kth, nlive) -> tuple[str | None, float]:
    """(first failure or None, recall min) of a selection against the exact top-k of the same logits."""
    import torch

    R, N = logits.shape
    worst = 1.0
    slot = torch.arange(k, device=idx.device)
    for r0 in range(0, R, 2048):
        r1 = min(R, r0 + 2048)
        i = idx[r0:r1].long()
        n = torch.clamp(nlive[r0:r1], max=k)
        valid = slot[None, :] < n[:, None]
        if not bool((i[~valid] == -1).all()):
            return "-1 padding wrong", 0.0
        inside = (i >= lo[r0:r1, None].long()) & (i < hi[r0:r1, None].long())
        if not bool((inside | ~valid).all()):
            return "a pick outside its window (or -1 inside the live count)", 0.0
        if not bool(((i[:, 1:] > i[:, :-1]) | ~valid[:, 1:]).all()):
            return "picks not in ascending position order", 0.0
        v = logits[r0:r1].float().gather(1, i.clamp(0, N - 1))
        hit = (v >= kth[r0:r1, None]) & (v > float("-inf")) & valid
        rec = hit.sum(1).double() / n.clamp_min(1).double()
        rec = torch.where(n > 0, rec, torch.ones_like(rec))
        worst = min(worst, float(rec.min()))
    return (None if worst == 1.0 else f"recall min {worst:.6f} < 1"), worst


# ------------------------------------------------------------------------------------------------ timing


def bench(fn, dev: str, rep: int = 40) -> float:
    if dev != "cuda":
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e6
    import triton

    return triton.testing.do_bench(fn, warmup=10, rep=rep, return_mode="median") * 1e3


def registers(cfg) -> tuple:
    """(registers, spills) of a config's compiled kernel after its first launch (None on the interpreter)."""
    from mqa_cli.launch import common as launch

    for key, (compiled, _c) in list(launch._COMPILED.items()):
        if key[0] == cfg.name and key[1] == cfg.options_key:
            try:
                compiled._init_handles()
                return compiled.n_regs, compiled.n_spills
            except Exception:  # noqa: BLE001
                return None, None
    return None, None


def sweep_shape(name: str, kind: str, p: dict, k: int, dev: str, rows_out: list, summary: list, cap,
                pre=None) -> None:
    import torch

    from mqa_cli.api import topk as T
    from mqa_cli.api.logits import fp8_paged_mqa_logits, mqa_logits
    from mqa_cli.problem.paged_tensors import random_paged
    from mqa_cli.problem.prefill import ProblemSpec
    from mqa_cli.problem.tensors import random_prefill

    H, D = (16, 64) if SMOKE else (64, 128)
    t0 = time.time()
    if kind == "prefill":
        b = 4 if p["layout"] == "ratio4" else 1  # ratio4: 4 packed sequences of S/4 queries over N/4 kv rows each
        t = random_prefill(ProblemSpec(batch=b, seq=p["S"] // b, seq_kv=p["N"] // b, ratio=b, heads=H, dim=D), dev)
        logits = mqa_logits(t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke, clean_logits=False)
        lo, hi, paged = t.ks, t.ke, None
    else:
        t = random_paged(paged_spec(p), device=dev)
        maxlen = int(t.max_context_len)
        logits = fp8_paged_mqa_logits(t.q, t.kv_cache, t.weights, t.context_lens, t.block_table, None, maxlen,
                                      clean_logits=False)
        hi = T.paged_row_ends(t.context_lens, 1, maxlen)
        lo = torch.zeros_like(hi)
        paged = (t.context_lens, 1, maxlen)
    R, cols = logits.shape
    kth, nlive = reference(logits, k, lo, hi)
    idx = torch.empty(R, k, dtype=torch.int32, device=dev)

    def select(tuning):
        if paged is None:
            return T.topk_select(logits, k, lo, hi, values=False, tuning=tuning, cap=cap)[0]
        T._select_into(logits, k, None, None, idx, None, paged=paged, tuning=tuning, cap=cap)
        return idx

    if pre is not None:
        say(f"  {name}: {pre.wait()}")
    best = (float("inf"), None)
    for cand in candidates(kind):
        lab = label(cand)
        CANDS[lab] = cand
        try:
            out = select(cand)
            err, rec = check(out, logits, k, lo, hi, kth, nlive)
            us = float("nan") if err else bench(lambda: select(cand), dev)
        except Exception as e:  # noqa: BLE001
            err, rec, us = f"{type(e).__name__}: {str(e)[:160]}", 0.0, float("nan")
        cfg = T._config(R, cols, k, logits.device, window=paged is None, compressed=False, paged=paged is not None,
                        values=False, stats=False, cap=cap, tuning=cand)
        regs, spills = registers(cfg)
        rows_out.append({"shape": name, "cols": cols, "rows": R, "config": lab, "regs": regs, "spills": spills,
                         "kernel": cfg.kernel if cfg.schedule["kind"] != "torch" else "torch.topk",
                         "grid": cfg.grid[0], "parts": cfg.schedule.get("parts"), "us": us, "check": err or "ok",
                         "recall_min": rec})
        say(f"  {name:<20} {lab:<62} {fmt(us):>9} us  regs {regs} spills {spills}  {err or 'checked'}")
        if not err and us < best[0]:
            best = (us, cand)
    if best[1] is None:
        say(f"{name}: no candidate passed its check")
        return
    r = {"shape": name, "kind": kind, "cols": cols, "rows": R, "best_config": label(best[1]),
         "select_best_us": best[0], "select_default_us": bench(lambda: select(None), dev)}
    logits = None  # frees the matrix (every timing that reads it is done)
    if kind == "prefill":  # the workspace fp8_mqa_topk holds logits in (the table's WORKSPACE)
        if dev == "cuda":
            torch.cuda.empty_cache()
        T.TUNING.update(best[1])
        try:
            for ws in WORKSPACES:
                r[f"fused_ws{ws >> 20}M_us"] = bench(lambda: T.fp8_mqa_topk(
                    t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke, k, sorted=False, cap=cap, workspace_bytes=ws), dev)
        finally:
            T.TUNING.clear()
    r["seconds"] = round(time.time() - t0, 1)
    summary.append(r)
    say(f"{name}: select {fmt(best[0])} us with {label(best[1])} (default config {fmt(r['select_default_us'])})"
        + "".join(f"; fp8_mqa_topk at {w >> 20} MiB {fmt(r.get(f'fused_ws{w >> 20}M_us'))}" for w in WORKSPACES
                  if kind == "prefill") + f" [{r['seconds']} s]")


# ------------------------------------------------------------------------------------------------ table


def write_table(summary: list, units: int, device: str | None = None) -> None:
    """kernels/topk/tuned.py: per regime and power-of-two row length, the checked config with the least total
    selection time over that bucket's shapes; WORKSPACE where a larger one made fp8_mqa_topk > 3 % faster."""
    import torch
    import triton

    from mqa_kernels.common.config import pow2_ceil

    per_cand: dict = {}
    for row in ROWS_CSV:
        if row["check"] != "ok" or not math.isfinite(row["us"]):
            continue
        kind = "split" if row["shape"].startswith("paged") else "rows"
        b = pow2_ceil(row["cols"])
        d = per_cand.setdefault((kind, b), {}).setdefault(row["config"], {"us": 0.0, "n": 0})
        d["us"] += row["us"]
        d["n"] += 1
    shapes_in = {}
    for r in summary:
        shapes_in.setdefault(("split" if r["kind"] == "paged" else "rows", pow2_ceil(r["cols"])), []).append(r)
    table = {"rows": {}, "split": {}}
    notes = {}
    for (kind, b), cands in sorted(per_cand.items()):
        n = max(v["n"] for v in cands.values())
        full = {lb: v for lb, v in cands.items() if v["n"] == n}
        lb = min(full, key=lambda x: full[x]["us"])
        tuning = {a: v for a, v in CANDS[lb].items() if not (a == "kind" and v == kind)}
        table[kind][b] = tuning
        names = ", ".join(r["shape"] for r in shapes_in.get((kind, b), []))
        notes[(kind, b)] = f"{lb}: {full[lb]['us']:.1f} us over {n} shapes ({names})"
    workspace = {}
    for r in summary:
        if r["kind"] != "prefill":
            continue
        ws = {w: r.get(f"fused_ws{w >> 20}M_us") for w in WORKSPACES}
        ws = {w: v for w, v in ws.items() if v and math.isfinite(v)}
        if ws and (256 << 20) in ws:
            w_best = min(ws, key=ws.get)
            if ws[w_best] < 0.97 * ws[256 << 20]:
                workspace[pow2_ceil(r["cols"])] = w_best
    table_env = os.environ.get("TOPK_TABLE")  # (tests write elsewhere)
    path = Path(table_env or ROOT / "kernels" / "topk" / "tuned.py")
    doc = ["The H200 (sm90) configs of the top-k selection, by regime ('rows': many rows, one program each at a",
           "time; 'split': few long rows, several programs each) and power-of-two row length: written by",
           f"`python3 tools/tune/sweep_topk.py --write-table` on {device or torch.cuda.get_device_name(0)} ({units} SMs), "
           f"{time.strftime('%Y-%m-%d')}, triton {triton.__version__}.",
           "Every config was checked (exact top-k of the same fp32 logits) before it was timed; the one with the",
           "least total time over the bucket's shapes is kept. WORKSPACE: bytes of logits fp8_mqa_topk holds at",
           "once, by row length, where more than 256 MiB measured > 3 % faster."]
    body = ["CUDA_TUNED = {"]
    for kind in ("rows", "split"):
        body.append(f"    {kind!r}: {{")
        for b, tuning in sorted(table[kind].items()):
            body.append(f"        # {notes[(kind, b)]}")
            body.append(f"        {b}: {tuning!r},")
        body.append("    },")
    body += ["}", f"WORKSPACE = {workspace!r}"]
    sweep_common.write_table(path, doc, body, say, copy_as=None if table_env else "topk_tuned.py")

ROWS_CSV: list = []
_CAND_LINE = re.compile(r"^  (\S.*?)\s{2,}(\S+)\s+(\S+) us\s+regs \S+ spills \S+\s+(.*)$")


def _tuning_of(lab: str) -> dict:
    """A candidate's tuning dict back from its label (k=v,...)."""
    out = {}
    for kv in lab.split(","):
        k, v = kv.split("=", 1)
        out[k] = int(v) if v.lstrip("-").isdigit() else v
    return out


def table_from(log: Path, summary_csv: Path) -> None:
    """Rewrite tuned.py from a GPU run's log (its first line names the card; then every candidate's line) and its
    topk_summary.csv, as --write-table would have written it there (for a run whose table file did not come back)."""
    summary = []
    with open(summary_csv) as f:
        for r in csv.DictReader(f):
            r["cols"] = int(r["cols"])
            for k, v in list(r.items()):
                if isinstance(k, str) and k.startswith("fused_ws") and v:
                    r[k] = float(v)
            summary.append(r)
    cols = {r["shape"]: r["cols"] for r in summary}
    lines = log.read_text().splitlines()
    device, units = re.match(r"device (.*), (\d+) units", lines[0]).groups()
    for line in lines:
        m = _CAND_LINE.match(line)
        if not m or m.group(1).strip() not in cols:
            continue
        name, lab, us, status = m.group(1).strip(), m.group(2), m.group(3), m.group(4).strip()
        CANDS[lab] = _tuning_of(lab)
        ROWS_CSV.append({"shape": name, "cols": cols[name], "config": lab, "check": "ok" if status == "checked" else status,
                         "us": float(us) if us not in ("-", "nan") else float("nan")})
    say(f"{len(ROWS_CSV)} candidate timings over {len(summary)} shapes from {log}")
    write_table(summary, int(units), device)


def write_csv(path: Path, rows: list) -> None:
    if not rows:
        return
    keys = sorted({k for r in rows for k in r}, key=lambda x: (x != "shape", x))
    with open(path, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=keys)
        wr.writeheader()
        wr.writerows(rows)


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from mqa_cli.launch import interpreter

    interpreter.enable_if_no_gpu(note=False)
    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write-table", action="store_true")
    ap.add_argument("--only", default=None, help="shapes whose name contains this text")
    ap.add_argument("--table-from", nargs=2, metavar=("LOG", "SUMMARY_CSV"),
                    help="rewrite tuned.py from a GPU run's log and topk_summary.csv (no GPU)")
    args = ap.parse_args()
    if args.table_from:
        table_from(Path(args.table_from[0]), Path(args.table_from[1]))
        return
    T0 = time.time()
    dev = "cuda" if torch.cuda.is_available() and not SMOKE else "cpu"
    if dev == "cpu" and not SMOKE:
        raise SystemExit("no GPU here: run with TOPK_SMOKE=1 for the interpreter smoke")
    OUT.mkdir(parents=True, exist_ok=True)
    k = 16 if SMOKE else 2048
    cap = 64 if SMOKE else None  # smoke: small rows still take the sampled and split paths
    from mqa_cli.api.logits import target_for
    from mqa_cli.launch import common as launch

    tgt = target_for(torch.device(dev))
    units = tgt.units or 1
    say(f"device {torch.cuda.get_device_name() if dev == 'cuda' else 'cpu (interpreter: times mean nothing)'}, "
        f"{units} units, k = {k}, triton {__import__('triton').__version__}, torch {torch.__version__}")
    todo = [s for s in shapes() if not args.only or args.only in s[0]]
    pre = None
    if dev == "cuda":
        jobs = []
        for name, kind, p in todo:
            if kind == "prefill":
                R, cols, paged = p["S"], p["N"], False
            else:
                R, cols, paged = p["B"], max(paged_spec(p).context_lengths()), True
            for c in candidates(kind) + [{}]:
                jobs.append({"rows": R, "cols": cols, "stride": launch.padded_stride(cols), "k": k, "units": units,
                             "paged": paged, "tuning": c, "label": f"{name} {label(c)}", "cap": cap,
                             "arch": tgt.arch if isinstance(tgt.arch, int) else 90})
        pre = sweep_common.Compiles(max(1, min(len(jobs), (os.cpu_count() or 2) - 1)))
        for job in jobs:  # every distinct compiled variant: config name, launch options, argument specialization
            cfg, la = _meta_launch(job)
            if la is not None:
                pre.submit((cfg.name, cfg.options_key, launch._specialization(la.args)), _compile_job, job)
    summary: list = []
    for name, kind, p in todo:
        try:
            sweep_shape(name, kind, p, k, dev, ROWS_CSV, summary, cap, pre)
        except Exception as e:  # noqa: BLE001
            say(f"{name}: FAILED {type(e).__name__}: {str(e)[:300]}")
            LOG.append(traceback.format_exc())
        if dev == "cuda":
            torch.cuda.empty_cache()
    if pre is not None:
        pre.close()
    write_csv(OUT / "topk_sweep.csv", ROWS_CSV)
    write_csv(OUT / "topk_summary.csv", summary)
    if args.write_table:
        if SMOKE:
            say("--write-table ignored in the smoke run (interpreter times)")
        else:
            write_table(summary, units)
    say(f"total {time.time() - T0:.0f} s; wrote {OUT / 'topk_sweep.csv'}, {OUT / 'topk_summary.csv'}")
    (OUT / "topk_sweep.log").write_text("\n".join(LOG) + "\n")


if __name__ == "__main__":
    main()
