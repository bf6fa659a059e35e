"""Benchmarks: time what users call (the public API) or the kernel alone, over problems; TF/s, fraction of
the floor, the reference figures beside ours (where and when measured) and our ratio to them."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from ..launch.families import INTERPRETED
from ..plan import dispatch
from . import calls, timing


@dataclass
class BenchRow:
    shape: str
    kernel: str  # dispatch row
    kernel_name: str  # config-aware compiled name
    how: str  # "api" (the public entry point) or "kernel" (the planned kernel alone)
    clean_logits: bool
    live: int
    flop: int
    min_bytes: int
    median_us: float
    p20_us: float
    p80_us: float
    tflops: float
    gbs: float  # min bytes / time
    pct_floor: float | None  # floor / time, with the target's measured ceilings where known
    floor_us: float | None
    bound: str | None  # which floor binds: "compute" (FLOP / fp8 ceiling) or "memory" (min bytes / copy rate)
    reference_us: float | None = None
    goal_us: float | None = None
    timing: str = ""
    graph_us: float | None = None  # CUDA-graph replay of the same call (launch cost removed)
    write_bytes: int = 0  # of min_bytes, the logits the call must write

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def ratio(self) -> float | None:
        return None if self.reference_us is None else self.median_us / self.reference_us

    @property
    def binds(self) -> str:
        """What the binding floor is, in a word: fp8 (compute), write (memory, mostly the logits written) or
        read (memory, mostly inputs read); '-' without ceilings."""
        if self.bound is None:
            return "-"
        if self.bound == "compute":
            return "fp8"
        return "write" if 2 * self.write_bytes >= self.min_bytes else "read"


def logits_written(counts, paged: bool) -> int:
    """Bytes of logits a call must write: every [S, N] entry when clean (and always for paged decode, whose rows
    span max_context_len), else the live ones; as mqa_cli.problem.prefill.Counts counts them."""
    return 4 * (counts.S * counts.N if (paged or counts.clean_logits) else counts.live)


def bench_one(name: str, prob, tgt, row: str | None, t, kernel_only: bool = False, reference_us=None,
              goal_us=None, graph: bool = False) -> BenchRow:
    """Time one problem: through the public API (row None, the default) or one dispatch row's kernel alone."""
    p = dispatch.plan(prob.shape, tgt, kernel=row, force=row is not None)
    if row is None and not kernel_only:
        fn, how = calls.through_api(t, prob.shape, prob.max_seqlen_k), "api"
    else:
        fn, how = calls.kernel_only(t, p.config, prob.max_seqlen_k), "kernel"
    tm = timing.time_fn(fn, tgt.is_gpu)
    graph_us = timing.time_graph(fn) if (graph and tgt.is_gpu) else None
    c = prob.counts
    fl = timing.binding_floor(c.flop, c.bytes, tgt)
    return BenchRow(name, p.chosen.row.name, p.config.name, how, prob.shape.clean_logits, c.live, c.flop, c.bytes,
                    tm.median_us, tm.p20_us, tm.p80_us, timing.tflops(c.flop, tm.median_us),
                    c.bytes / (tm.median_us * 1e3), fl and 100 * fl.fraction(tm.median_us), fl and fl.us,
                    fl and fl.bound, reference_us, goal_us, tm.method, graph_us,
                    logits_written(c, prob.shape.kind == "paged"))


def runnable_rows(names, shape, tgt) -> tuple[list, list]:
    """Split requested rows into those that can run on this target and notes for the rest."""
    keep, notes = [], []
    for name in names:
        p = dispatch.plan(shape, tgt, kernel=name, force=True)
        # A forced row runs wherever Triton can run it (the interpreter included), but not on the other form.
        target_check = next((c for c in p.chosen.checks if c.name == "problem" and not c.ok), None)
        if target_check is None and p.config.launcher not in INTERPRETED and not tgt.is_gpu:
            target_check = next((c for c in p.chosen.checks if c.name == "target" and not c.ok), None)
        if target_check is not None:
            notes.append(f"{name} skipped on {shape.kind} {shape.S}x{shape.N}: {target_check.sentence()}")
            continue
        keep.append(name)
    return keep, notes


def read_goals(path: str) -> dict:
    """Goals the user passes: a JSON object {shape name: µs}."""
    from ..errors import UserError

    try:
        with open(path) as f:
            goals = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise UserError(f"{path}: cannot read goals: {e}") from None
    if not isinstance(goals, dict) or not all(isinstance(v, (int, float)) for v in goals.values()):
        raise UserError(f"{path}: goals must be a JSON object of shape name -> µs")
    return goals


def table(rows: list[BenchRow]) -> str:
    from tabulate import tabulate

    body = []
    goals = any(r.goal_us is not None for r in rows)
    for r in rows:
        line = [r.shape, r.kernel, r.how, f"{r.median_us:.1f}", "-" if r.graph_us is None else f"{r.graph_us:.1f}",
                f"±{100 * (r.p80_us - r.p20_us) / 2 / r.median_us:.1f}%", f"{r.tflops:.0f}", f"{r.gbs:.0f}",
                "-" if r.floor_us is None else f"{r.floor_us:.1f}", r.binds,
                "-" if r.pct_floor is None else f"{r.pct_floor:.0f}%",
                "-" if r.reference_us is None else f"{r.reference_us:.1f}",
                "-" if r.ratio is None else f"{r.ratio:.2f}"]
        if goals:
            line += ["-" if r.goal_us is None else f"{r.goal_us:.0f}",
                     "-" if r.goal_us is None else ("✓" if r.median_us <= r.goal_us else "✗")]
        body.append(line)
    headers = ["shape", "kernel", "calls", "µs", "graph µs", "p20-p80", "TF/s", "GB/s", "floor µs", "binds",
               "% of floor", "ref µs", "ours/ref"] + (["goal µs", "≤ goal"] if goals else [])
    return tabulate(body, headers=headers, disable_numparse=True)


def floor_note(tgt) -> str:
    """One line under the table: what the floor is, with the ceilings it used."""
    c = timing.ceilings(tgt)
    if c is None:
        return f"floor: none on {tgt.name} (no ceilings; the interpreter's times say nothing about GPU speed)"
    fp8, copy, where = c
    return (f"floor = max(FLOP / {fp8:g} TF/s fp8, min bytes / {copy:g} TB/s copy rate), {where}; binds: fp8 = "
            f"compute-bound, write = the logits written (clean: all S x N), read = inputs read")


def compare_table(rows: list[BenchRow], base: str, variant: str) -> str:
    """Base against variant: config, live, FLOP, base µs / TF/s, variant µs / TF/s, Δ TF/s."""
    from tabulate import tabulate

    by = {(r.shape, r.kernel): r for r in rows}
    body = []
    for shape in dict.fromkeys(r.shape for r in rows):
        b, v = by.get((shape, base)), by.get((shape, variant))
        if not (b and v):
            continue
        body.append([shape, f"{b.live / 1e9:.4f}G", f"{b.flop / 1e12:.3f} T",
                     f"{b.median_us:.1f} us / {b.tflops:.0f} TF/s", f"{v.median_us:.1f} us / {v.tflops:.0f} TF/s",
                     f"{100 * (v.tflops / b.tflops - 1):+.1f}%"])
    return tabulate(body, headers=["config", "live", "FLOP", base, variant, "Δ TFLOP/s"], disable_numparse=True)
