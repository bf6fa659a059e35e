"""Config sweep on the H200 for the head counts and dims the reference (DeepGEMM) cannot run on Hopper: every
candidate of the kernels that run a shape checked, then timed; `--write-table` rewrites the portable kernel's table
and the Gluon kernel's head-count keys.

    python3 tools/tune/sweep_heads.py [--write-table] [--shapes 8x128,16x64]     (the H200: about 4 minutes)
    SWEEP_SMOKE=1 python3 tools/tune/sweep_heads.py [--write-table]              (CPU: tiny shapes, the interpreter)

What it checks, times and writes: docs/GPU-PLAN.md, "tools/tune"; why these candidates: docs/EXPERIMENTS.md.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # sweep_common.py beside this file
import sweep_common  # noqa: E402


SMOKE = os.environ.get("SWEEP_SMOKE") == "1"  # CPU dry run through the interpreter: tiny shapes, no timing
BUDGET_S = float(os.environ.get("SWEEP_BUDGET_S", "255"))  # stop starting shapes after this many seconds
REL_TOL = 2e-3
NOISE = 0.03  # a tuned entry must beat the rule by more than this (run-to-run spread on the H200: docs)
SPLITS = (8, 16, 32)
SEQ = 80 if SMOKE else 8192
HEADS, DIMS = (8, 16, 32, 64, 128), (64, 128, 256)
OWN_LAYOUT = {(32, 128), (64, 128)}  # the Gluon table's keys sweep_gluon_prefill.py writes
FIRST = [(8, 128), (8, 64), (16, 64), (16, 128), (64, 64), (32, 128), (128, 128), (64, 256)]  # bench's heads suite

if SMOKE:  # before any kernel module is imported
    from mqa_cli.launch import interpreter

    interpreter.enable_if_no_gpu(note=False)


# ------------------------------------------------------------------------------------------------- candidates


@dataclass
class Candidate:
    kernel: str  # dispatch row
    label: str
    cfg: object  # KernelConfig
    override: dict | None = None  # what the kernel's tuned.py would hold for this candidate


@dataclass
class Result:
    H: int
    D: int
    kernel: str
    label: str
    us: float | None
    tflops: float | None
    floor_us: float
    pct: float | None
    binds: str
    rel_err: float | None
    status: str
    override: dict | None = None


def tiled_label(ov: dict) -> str:
    s = f"{'hm' if ov.get('HEAD_MAJOR') else 'rm'}-q{ov['BLOCK_Q']}-kv{ov.get('BLOCK_KV', 64)}"
    s += f"-w{ov.get('num_warps', 4)}-s{ov.get('num_stages', 3)}"
    return s + (f"-t{ov['SPLIT_TILES']}" if ov.get("SPLIT_TILES") else "")


def tiled_overrides(H: int, D: int) -> list[dict]:
    """Compiled variants per shape, most likely first (the module docstring says why)."""
    def hm(width, **kw):
        return {"BLOCK_Q": max(1, width // H), "HEAD_MAJOR": True, **kw}

    out = [hm(256), hm(128)]
    if H <= 64:
        out.append(hm(64))
    if D == 256:
        out.append(hm(256, num_stages=2))  # 2 programs per SM fit in shared memory
    elif H >= 32:
        out.append(hm(256, num_stages=4))
    return out


def candidates(H: int, D: int, shape, tgt, units: int, gluon_only: bool = False) -> list[Candidate]:
    """The rule, the dispatched row (when not tiled), tiled variants, and on sm90 the Gluon kernel's layouts."""
    from mqa_cli.plan import dispatch
    from mqa_kernels.prefill.tiled.config import tiled_config

    def tiled(ov, use_table=False):
        return tiled_config(heads=H, dim=D, S=shape.S, N=shape.N, clean=True, backend=tgt.backend, units=units,
                            override=ov, use_table=use_table)

    rule = tiled(None)
    out = [Candidate("tiled", "rule", rule, {})]
    plan = dispatch.plan(shape, tgt)
    if plan.chosen.row.name != "tiled":
        out.insert(0, Candidate(plan.chosen.row.name, "dispatched", plan.config))
    table = tiled(None, use_table=True)
    if table.schedule.get("config") == "tuned.py":  # (no override: never a new table entry by itself)
        lab = "dispatched (tuned.py)" if plan.chosen.row.name == "tiled" else "tiled (tuned.py)"
        out.append(Candidate("tiled", lab, table))
    if not gluon_only:
        for ov in [{**tiled_overrides(H, D)[0], "SPLIT_TILES": 1}] if SMOKE else tiled_overrides(H, D):
            out.append(Candidate("tiled", tiled_label(ov), tiled(ov), ov))
    if not SMOKE and tgt.name == "sm90" and (H, D) not in OWN_LAYOUT:
        out += gluon_candidates(H, D, shape, units)
    return out


def gluon_config(H: int, D: int, shape, units: int, entry: dict, override: dict | None = None):
    """The Gluon kernel's config for a table entry (groups, stages, n, q_in_lanes, splits, tma_store, chains) on the
    sweep's problem, with `override` keys on top: the config a candidate is timed with is the one its entry gives."""
    from mqa_kernels.prefill.gluon_ws_sm90.config import gluon_ws_sm90_config

    return gluon_ws_sm90_config(heads=H, dim=D, S=shape.S, N=shape.N, clean=True, units=units,
                                groups=tuple(entry["groups"]), stages=entry["stages"], n=entry["n"],
                                q_in_lanes=entry.get("q_in_lanes"), splits=entry.get("splits", 1),
                                tma_store=entry.get("tma_store", False), chains=entry.get("chains", 1),
                                override=override)


def gluon_candidates(H: int, D: int, shape, units: int) -> list[Candidate]:
    """The Gluon prefill kernel (mqa_kernels.prefill.gluon_ws_sm90): two math warpgroups with their own query rows at wgmma
    N 128 and 256, 3 and 4 kv stages, 1, 2 or 4 work items per query block (kv splits); three sharing one query
    block and splitting 192-row kv tiles (N 128, 160 registers: more warps to hide each epilogue's latency where
    the fp32 epilogue, not the MMA, is the longer part, as at D 64); a query row per lane of a quad wherever
    BLOCK_Q = N / H is a multiple of 4; a few with the logits stored through shared memory by TMA (tma_store)
    or the head sum as 4 independent FMA chains (chains); the layouts shared memory cannot hold are left out. (H 32
    and 64 at D 128 are sweep_gluon_prefill.py's: there the dispatched config is the candidate.)"""
    from mqa_kernels.prefill.gluon_ws_sm90.config import HEADS, DIMS

    out = []
    if H not in HEADS or D not in DIMS:
        return out
    # (groups, N, stages, kv splits, tma_store, chains)
    layouts = [((2, 1), n, st, x, False, 1) for n in (128, 256) for st in (4, 3) for x in (1, 2, 4)]
    layouts += [((1, 3), 128, st, x, False, 1) for st in (5, 3) for x in (1, 2)]
    layouts += [((2, 1), 128, 3, 1, True, 1), ((2, 1), 256, 3, 1, True, 1),
                ((1, 3), 128, 3, 1, True, 1)]  # logits through shared memory by TMA
    layouts += [((2, 1), 128, 3, 1, False, 4), ((2, 1), 256, 3, 1, False, 4)]  # 4 FMA chains a logit
    for groups, n, stages, splits, tma_store, chains in layouts:
        entry = {"groups": groups, "stages": stages, "q_in_lanes": None, "n": n}
        if splits > 1:
            entry["splits"] = splits
        if tma_store:
            entry["tma_store"] = True
        if chains > 1:
            entry["chains"] = chains
        try:
            g = gluon_config(H, D, shape, units, entry)
        except ValueError:
            continue
        entry["q_in_lanes"] = g.constexprs["Q_IN_LANES"]  # the layout's default, written into the table
        lab = (f"gluon {'3wg ' if groups == (1, 3) else ''}n{n} st{stages}" + (" lanes" if entry["q_in_lanes"] else "")
               + (f" x{splits}" if splits > 1 else "") + (" tma" if tma_store else "")
               + (f" c{chains}" if chains > 1 else ""))
        out.append(Candidate("gluon_ws_sm90", lab, g, entry))
    return out


def slot_variants(best: list, H: int, D: int, shape, units: int, tried: set) -> list[Candidate]:
    """The two fastest checked Gluon candidates (`best`: (Candidate, Result) pairs, fastest first) with their kv ring
    waited for and released in PTX (ptx_slots). Measured side by side on the H200 (2026-12-01): worth 3-7 % on some
    head counts and costing as much on others, so the table takes it per shape."""
    out = []
    for c, _ in best[:2]:
        e = {**(c.override or {}), "ptx_slots": True}
        label = c.label + " ptx_slots1"
        if label in tried:
            continue
        try:
            g = gluon_config(H, D, shape, units, e, {"PTX_SLOTS": 1})
        except ValueError:
            continue
        out.append(Candidate("gluon_ws_sm90", label, g, e))
    return out


def split_variants(best: list[Result], H: int, D: int, shape, tgt, units: int, tried: set) -> list[Candidate]:
    """SPLIT_TILES on the two fastest checked tiled configs (no compile: the split is a runtime argument)."""
    from mqa_kernels.prefill.tiled.config import tiled_config

    out = []
    for r in [] if SMOKE else best[:2]:
        for split in SPLITS:
            ov = {**(r.override or {}), "SPLIT_TILES": split}
            if "BLOCK_Q" not in ov:
                ov["BLOCK_Q"] = max(1, 256 // H)
            label = tiled_label(ov) if r.label != "rule" else f"rule-t{split}"
            if label in tried:
                continue
            cfg = tiled_config(heads=H, dim=D, S=shape.S, N=shape.N, clean=True, backend=tgt.backend, units=units,
                               override=ov, use_table=False)
            out.append(Candidate("tiled", label, cfg, ov))
    return out


# ------------------------------------------------------------------------------------------- compile ahead


def _compile_one(target: str, cfg, shape, row):
    """Worker: cross-compile one config for `target` into Triton's cache (the launch then loads it)."""
    from mqa_cli.inspect import compile as comp

    comp.prepare()
    from mqa_cli.plan import targets

    comp.compile_config(targets.get_target(target), cfg, shape, row)


# ------------------------------------------------------------------------------------------------- one shape


class Sweep:
    def __init__(self, out_dir: Path):
        import torch
        import triton

        from mqa_cli.plan import targets

        self.torch, self.triton = torch, triton
        self.say = sweep_common.Log("sweep_heads.log")
        self.csv_f = open(out_dir / "sweep_heads.csv", "w", newline="")
        self.csv = csv.writer(self.csv_f)
        self.csv.writerow(["H", "D", "kernel", "config", "us", "tflops", "floor_us", "pct_floor", "binds", "rel_err",
                           "status"])
        self.dev = "cpu" if SMOKE else "cuda"
        self.tgt = targets.detect()
        self.floor_tgt = targets.get_target("sm90") if SMOKE else self.tgt  # smoke: the H200's ceilings, for form
        self.units = 4 if SMOKE else self.tgt.units
        self.t0 = time.time()

    def elapsed(self) -> float:
        return time.time() - self.t0

    def prepare(self, H: int, D: int):
        from mqa_cli.check.reference import reference_logits
        from mqa_cli.launch import families as launchers
        from mqa_cli.problem import source
        from mqa_cli.problem.prefill import ProblemSpec

        spec = ProblemSpec(batch=1, seq=SEQ, heads=H, dim=D, layout="causal")
        prob = source.from_spec(spec)
        t = prob.materialise(self.dev)
        ref = reference_logits(t)
        from mqa_kernels.prefill.tiled.config import tiled_config

        probe = tiled_config(heads=H, dim=D, S=t.S, N=t.N, clean=True, backend="cuda", units=1, use_table=False)
        return prob, t, ref, launchers.output_for(t, probe)

    def evaluate(self, H, D, c: Candidate, prob, t, ref, out, note="") -> Result:
        from mqa_cli.bench import timing
        from mqa_cli.check.verify import compare
        from mqa_cli.launch import families as launchers

        fl = timing.binding_floor(prob.counts.flop, prob.counts.bytes, self.floor_tgt)
        binds = "fp8" if fl.bound == "compute" else "write"
        res = Result(H, D, c.kernel, c.label, None, None, fl.us, None, binds, None, "", c.override)
        fn = lambda: launchers.run(t, c.cfg, out)  # noqa: E731

        def cmp(o):
            c_ = compare(o, ref, True, rel_tol=REL_TOL)
            return c_.rel_error, "" if c_.ok else "WRONG: " + c_.line()

        t0 = time.time()
        ok, res.rel_err, problem = sweep_common.check(fn, out, cmp)  # a wrong config is never timed or ranked
        first = time.time() - t0
        res.status = problem
        if ok:
            try:
                us = timing.time_fn(fn, False).median_us if SMOKE else timing.time_kernel(fn)  # the kernel alone
                res.us, res.tflops, res.pct = us, timing.tflops(prob.counts.flop, us), 100 * fl.fraction(us)
                res.status = "ok"
            except Exception as e:  # a config that does not capture is a result, not a crash
                res.status = f"ERROR {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
        us = "-" if res.us is None else f"{res.us:9.1f} µs {res.tflops:6.0f} TF/s {res.pct:5.1f} %"
        self.say(f"  H{H:<3d} D{D:<3d} {c.kernel:14s} {c.label:26s} {us}  {res.status if res.status != 'ok' else ''}"
                 f" [first launch {first:.2f}s{', ' + note if note else ''}]")
        self.row(res)
        return res

    def row(self, r: Result, status: str | None = None) -> None:
        """The result's CSV row (status: in place of its own)."""
        num = lambda x, spec: "" if x is None else format(x, spec)  # noqa: E731
        self.csv.writerow([r.H, r.D, r.kernel, r.label, num(r.us, ".2f"), num(r.tflops, ".1f"), f"{r.floor_us:.2f}",
                           num(r.pct, ".1f"), r.binds, num(r.rel_err, ".2e"), status or r.status])
        self.csv_f.flush()

    def plan(self, shapes, ahead: sweep_common.Compiles, gluon_only: bool = False) -> dict:
        """(H, D) -> candidates, every one handed to the compile workers now, in the order they will run."""
        from mqa_cli.problem import source
        from mqa_cli.problem.prefill import ProblemSpec

        plans, shapes_of = {}, {}
        for H, D in shapes:
            shapes_of[(H, D)] = source.from_spec(ProblemSpec(batch=1, seq=SEQ, heads=H, dim=D, layout="causal")).shape
            plans[(H, D)] = candidates(H, D, shapes_of[(H, D)], self.tgt, self.units, gluon_only)
        for key, cands in plans.items():
            for c in cands:
                ahead.submit((c.cfg.name, c.cfg.options_key), _compile_one, self.tgt.name, c.cfg, shapes_of[key],
                             c.kernel)
        return plans

    def shape(self, H: int, D: int, cands: list, ahead: sweep_common.Compiles, splits: bool = True) -> list[Result]:
        prob, t, ref, out = self.prepare(H, D)
        pairs = []
        for c in cands:
            pairs.append((c, self.evaluate(H, D, c, prob, t, ref, out,
                                                    ahead.wait([(c.cfg.name, c.cfg.options_key)], 120.0))))
        results = [r for _, r in pairs]
        ok = sorted((r for r in results if r.us is not None and r.kernel == "tiled" and "dispatched" not in r.label),
                    key=lambda r: r.us)
        tried = {r.label for r in results}
        for c in split_variants(ok, H, D, prob.shape, self.tgt, self.units, tried) if splits else []:
            pairs.append((c, self.evaluate(H, D, c, prob, t, ref, out)))
        gluon = sorted((p for p in pairs if p[1].us is not None and p[0].kernel == "gluon_ws_sm90"
                        and "dispatched" not in p[0].label), key=lambda p: p[1].us)
        for c in slot_variants(gluon, H, D, prob.shape, self.units, tried) if not SMOKE else []:
            pairs.append((c, self.evaluate(H, D, c, prob, t, ref, out)))
        if not SMOKE:
            self.side_by_side(H, D, prob, t, out, pairs)
        del t, ref, out
        if not SMOKE:
            self.torch.cuda.empty_cache()
        return [r for _, r in pairs]

    def side_by_side(self, H: int, D: int, prob, t, out, pairs: list) -> None:
        """The shape's checked candidates timed again side by side (sweep_common); their medians replace the
        one-after-another times. A row "ok, side by side" per candidate in the CSV."""
        from mqa_cli.bench import timing
        from mqa_cli.launch import families as launchers

        calls = {i: (lambda c=c: launchers.run(t, c.cfg, out)) for i, (c, r) in enumerate(pairs) if r.us is not None}
        if not calls:
            return
        medians, _ = sweep_common.side_by_side(calls)
        fl = timing.binding_floor(prob.counts.flop, prob.counts.bytes, self.floor_tgt)
        for i in calls:
            c, r = pairs[i]
            r.us = medians[i]
            r.tflops, r.pct = timing.tflops(prob.counts.flop, r.us), 100 * fl.fraction(r.us)
            self.row(r, "ok, side by side")
        best = min((pairs[i][1] for i in calls), key=lambda r: r.us)
        self.say(f"  H{H:<3d} D{D:<3d} side by side ({sweep_common.ROUNDS} rounds): best {best.kernel} {best.label} {best.us:.1f} µs")


# ------------------------------------------------------------------------------------------------- reports


def best_by_shape(results: list[Result]) -> dict:
    by = {}
    for r in results:
        by.setdefault((r.H, r.D), []).append(r)
    return by


def summary(results: list[Result], say) -> None:
    """Per shape: the fastest checked config against the floor, and what dispatch runs today."""
    for (H, D), rs in best_by_shape(results).items():
        ok = [r for r in rs if r.us is not None]
        if not ok:
            say(f"H{H} D{D}: no config passed")
            continue
        best = min(ok, key=lambda r: r.us)
        today = next((r for r in ok if r.label.startswith("dispatched")), None) or next(
            (r for r in ok if r.label == "rule"), None)
        say(f"H{H} D{D}: best {best.kernel} {best.label} {best.us:.1f} µs, {best.tflops:.0f} TF/s, {best.pct:.0f} % of "
            f"the {best.binds} floor ({best.floor_us:.1f} µs); today "
            + ("-" if today is None else f"{today.us:.1f} µs ({today.kernel})"))


def table_entries(results: list[Result]) -> dict:
    """(H, D) -> (override, comment) for the shapes whose fastest checked tiled config beats the rule by > NOISE;
    (H, D) -> None where the rule holds (its entry, if any, goes)."""
    out = {}
    for (H, D), rs in best_by_shape(results).items():
        tiled = [r for r in rs if r.kernel == "tiled" and r.us is not None and r.override is not None]
        rule = next((r for r in tiled if r.label == "rule"), None)
        if not tiled or rule is None:
            continue
        best = min(tiled, key=lambda r: r.us)
        if best.override and best.us < rule.us * (1 - NOISE):
            out[(H, D)] = (dict(best.override), f"{best.label}: {best.us:.1f} us, {best.pct:.0f} % of the {best.binds} "
                                                f"floor (rule {rule.us:.1f} us)")
        else:
            out[(H, D)] = None
    return out


def gluon_entries(results: list[Result]) -> dict:
    """(H, D) -> (entry, comment) where the fastest checked Gluon layout beats the fastest checked portable config
    by more than NOISE (the shape then dispatches to the Gluon kernel); None where it does not (the key goes).
    Shapes without a Gluon result, and the keys sweep_gluon_prefill.py owns, are left alone."""
    out = {}
    day = time.strftime("%Y-%m-%d")
    for (H, D), rs in best_by_shape(results).items():
        ok = [r for r in rs if r.us is not None]
        gl = [r for r in ok if r.kernel == "gluon_ws_sm90" and r.override is not None]  # (not "dispatched")
        tl = [r for r in ok if r.kernel == "tiled"]
        if not gl or not tl or (H, D) in OWN_LAYOUT:
            continue
        g, t = min(gl, key=lambda r: r.us), min(tl, key=lambda r: r.us)
        if g.us < t.us * (1 - NOISE):
            out[(H, D)] = (dict(g.override), f"sweep_heads {day}: {g.label} {g.us:.1f} us, {g.pct:.0f} % of the "
                                             f"{g.binds} floor (portable {t.us:.1f} us, {t.label})")
        else:
            out[(H, D)] = None
    return out


def write_table(entries: dict, path: Path, device: str, triton_version: str, torch_version: str, say) -> None:
    """Merge this run's entries into the portable kernel's table module at `path` (validated before it is written)."""
    from mqa_kernels.prefill.tiled.config import check_override

    swept = ", ".join(f"H{h} D{d}" for h, d in sorted(entries))
    doc = ["The H200 (sm90) configs of the portable prefill kernel by (heads, dim): written by",
           f"`python3 tools/tune/sweep_heads.py --write-table` on {device}, {time.strftime('%Y-%m-%d %H:%M %Z')},",
           f"triton {triton_version}, torch {torch_version}. Swept this run: {swept}.",
           "Each config was checked against the float32 reference (exact -inf pattern, relative error < 2e-3)",
           f"before it was timed alone on 1x{SEQ} causal with clean logits (graph replay, L2 flushed, median); an entry is",
           f"kept where it beat the rule in config.py by more than {NOISE:.0%}. Shapes absent here take the rule.",
           "Keys: config.OVERRIDE_KEYS. The sweep's CSV and log: sweep_heads.csv / sweep_heads.log under $OUT."]
    sweep_common.merge_table(path, entries, lambda key, ov: check_override(key[0], ov), doc, say,
                             copy_as="tiled_tuned.py" if path == ROOT / "kernels" / "prefill" / "tiled" / "tuned.py" else None)


def gluon_table_path() -> Path:
    """The Gluon prefill kernel's table; GLUON_WS_TABLE=FILE writes elsewhere (the CPU tests rebuild tables so)."""
    return Path(os.environ.get("GLUON_WS_TABLE") or ROOT / "kernels" / "prefill" / "gluon_ws_sm90" / "tuned.py")


def write_gluon_table(entries: dict, device: str, say) -> Path:
    """Merge entries {(H, D): (entry, comment) or None (the key goes)} into the Gluon prefill kernel's table. Two
    sweeps write it, each only the keys it swept: this one and sweep_gluon_prefill.py (the keys in OWN_LAYOUT)."""
    import triton

    from mqa_kernels.prefill.gluon_ws_sm90.config import gluon_ws_sm90_config

    def check(key, e):
        gluon_ws_sm90_config(heads=key[0], dim=key[1], S=4096, N=4096, clean=True, groups=tuple(e["groups"]),
                             stages=e["stages"], q_in_lanes=e.get("q_in_lanes"), n=e.get("n"), splits=e.get("splits"),
                             tma_store=e.get("tma_store"), chains=e.get("chains"))

    doc = ["The H200 (sm90) configs of the Gluon prefill kernel by (heads, dim); a shape listed here is one dispatch",
           "gives this kernel. Two writers, each rewriting only the keys it swept (tools/tune/sweep_heads.py):",
           "`python3 tools/tune/sweep_gluon_prefill.py --write-table` (H 32 and 64 at D 128: warpgroup layout on the",
           "seed shapes, kept when its mean time relative to (2, 1) st4 query-major is below 0.98) and",
           "`python3 tools/tune/sweep_heads.py --write-table` (every other shape: 1x8192 causal, clean, kept when it",
           "beats the fastest portable config by more than 3 %). Every candidate was checked against the float32",
           "reference before it was timed (a CUDA-graph replay per sample after an L2 flush, median; runs before",
           "2026-11-30 17:30 UTC timed the call itself with do_bench). The comment on each line says which run.",
           f'Last written on {device}, {time.strftime("%Y-%m-%d")}, triton {triton.__version__}.']
    return sweep_common.merge_table(gluon_table_path(), entries, check, doc, say,
                                    copy_as=None if os.environ.get("GLUON_WS_TABLE") else "gluon_ws_tuned.py")


# ------------------------------------------------------------------------------------------------- main


def parse_shapes(text: str | None) -> list[tuple[int, int]]:
    if SMOKE:
        return [(8, 64), (32, 64)]
    every = FIRST + [(h, d) for h in HEADS for d in DIMS if (h, d) not in FIRST]
    if not text:
        return every
    want = [tuple(int(x) for x in item.lower().split("x")) for item in text.split(",") if item.strip()]
    bad = [w for w in want if w not in every]
    if bad:
        raise SystemExit(f"unknown shapes {bad}: H in {HEADS}, D in {DIMS}, written HxD")
    return want


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write-table", action="store_true", help="rewrite kernels/prefill/tiled/tuned.py from this sweep")
    ap.add_argument("--shapes", help="comma-separated HxD (default: all fifteen)")
    ap.add_argument("--gluon-only", action="store_true",
                    help="only the Gluon layouts against the portable kernel's current config (its table untouched)")
    args = ap.parse_args(argv)
    out_dir = sweep_common.out_dir()
    shapes = parse_shapes(args.shapes)
    sw = Sweep(out_dir)
    torch, triton = sw.torch, sw.triton
    device = "cpu (smoke: the interpreter; times mean nothing)" if SMOKE else torch.cuda.get_device_name(0)
    from mqa_cli.bench.timing import ceilings

    fp8, copy, where = ceilings(sw.floor_tgt)
    sw.say(f"device {device}, {sw.units} SMs, torch {torch.__version__}, triton {triton.__version__}; floor = max(FLOP"
           f" / {fp8:g} TF/s, min bytes / {copy:g} TB/s) ({where}); shapes 1x{SEQ} causal, clean logits")
    ahead = sweep_common.Compiles(0 if SMOKE else max(1, min(8, (os.cpu_count() or 4) - 4)))
    results = []
    try:
        plans = sw.plan(shapes, ahead, args.gluon_only)
        for H, D in shapes:
            if sw.elapsed() > BUDGET_S:
                sw.say(f"budget of {BUDGET_S:.0f} s reached: H{H} D{D} and later shapes not swept")
                break
            sw.say(f"H{H} D{D} ({sw.elapsed():.0f} s)")
            results += sw.shape(H, D, plans[(H, D)], ahead, splits=not args.gluon_only)
        sw.say("")
        summary(results, sw.say)
        if args.write_table and not args.gluon_only:
            path = out_dir / "tuned.py" if SMOKE else ROOT / "kernels" / "prefill" / "tiled" / "tuned.py"
            write_table(table_entries(results), path, device, triton.__version__, torch.__version__, sw.say)
        if args.write_table:
            gluon = gluon_entries(results)
            if gluon and not SMOKE:
                write_gluon_table(gluon, device, sw.say)  # (with its copy under $OUT)
    finally:
        ahead.close()
    sw.say(f"total {sw.elapsed():.0f} s; CSV {out_dir / 'sweep_heads.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
