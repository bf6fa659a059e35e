"""Benchmarks: time what users call (the public API) or the kernel alone, over problems; TF/s, fraction of
the floor, the reference figures beside ours (where and when measured) and our ratio to them."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from . import calls, dispatch, report, timing


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
    bound: str | None
    reference_us: float | None = None
    goal_us: float | None = None
    timing: str = ""
    graph_us: float | None = None  # CUDA-graph replay of the same call (launch cost removed)

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def ratio(self) -> float | None:
        return None if self.reference_us is None else self.median_us / self.reference_us


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
    fl = report.floor(prob.counts, tgt)
    floor_us = fl and fl.get("measured_floor_us", fl["floor_us"])
    return BenchRow(name, p.chosen.row.name, p.config.name, how, prob.shape.clean_logits, prob.counts.live,
                    prob.counts.flop, prob.counts.bytes, tm.median_us, tm.p20_us, tm.p80_us,
                    timing.tflops(prob.counts.flop, tm.median_us), prob.counts.bytes / (tm.median_us * 1e3),
                    None if not fl else 100 * floor_us / tm.median_us, floor_us, fl and fl["bound"], reference_us,
                    goal_us, tm.method, graph_us)


def runnable_rows(names, shape, tgt) -> tuple[list, list]:
    """Split requested rows into those that can run on this target and notes for the rest."""
    keep, notes = [], []
    for name in names:
        p = dispatch.plan(shape, tgt, kernel=name, force=True)
        # A forced row runs wherever Triton can run it (the interpreter included), but not on the other form.
        target_check = next((c for c in p.chosen.checks if c.name == "problem" and not c.ok), None)
        if target_check is None and p.config.launcher == "tma" and not tgt.is_gpu:
            target_check = next((c for c in p.chosen.checks if c.name == "target" and not c.ok), None)
        if target_check is not None:
            notes.append(f"{name} skipped on {shape.kind} {shape.S}x{shape.N}: {target_check.sentence()}")
            continue
        keep.append(name)
    return keep, notes


def read_goals(path: str) -> dict:
    """Goals the user passes: a JSON object {shape name: µs}."""
    from .errors import UserError

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
                "-" if r.pct_floor is None else f"{r.pct_floor:.0f}% {r.bound[0]}",
                "-" if r.reference_us is None else f"{r.reference_us:.1f}",
                "-" if r.ratio is None else f"{r.ratio:.2f}"]
        if goals:
            line += ["-" if r.goal_us is None else f"{r.goal_us:.0f}",
                     "-" if r.goal_us is None else ("✓" if r.median_us <= r.goal_us else "✗")]
        body.append(line)
    headers = ["shape", "kernel", "calls", "µs", "graph µs", "p20-p80", "TF/s", "GB/s", "floor/time", "ref µs",
               "ours/ref"] + (["goal µs", "≤ goal"] if goals else [])
    return tabulate(body, headers=headers, disable_numparse=True)


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


def plot(rows: list[BenchRow], path: str, tgt, title: str) -> None:
    """Per shape: our rate beside the reference's, against the measured ceilings drawn as lines (fp8 TF/s on the
    left axis for compute-bound shapes; the copy rate as GB/s on the right for memory-bound ones)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = list(dict.fromkeys(r.shape for r in rows))
    kernels = list(dict.fromkeys(r.kernel for r in rows))
    series = kernels + (["reference"] if any(r.reference_us for r in rows) else [])
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(shapes)), 4.5))
    mem = ax.twinx()
    for i, k in enumerate(series):
        for j, s in enumerate(shapes):
            r = next((r for r in rows if r.shape == s and (r.kernel == k or k == "reference")), None)
            if r is None or (k == "reference" and not r.reference_us):
                continue
            us = r.reference_us if k == "reference" else r.median_us
            axis, val = (mem, r.min_bytes / (us * 1e3)) if r.bound == "memory" else (ax, r.flop / (us * 1e6))
            axis.bar(j + i * width, val, width, color=f"C{i}", label=k if j == 0 else None,
                     hatch="//" if r.bound == "memory" else None)
    fp8 = tgt.measured_fp8_tflops or tgt.peak_fp8_tflops
    bw = tgt.measured_bandwidth_tbs or tgt.bandwidth_tbs
    if fp8:
        ax.axhline(fp8, color="k", linestyle="--", label=f"fp8 ceiling {fp8:g} TF/s")
    if bw and any(r.bound == "memory" for r in rows):
        mem.axhline(bw * 1e3, color="gray", linestyle=":", label=f"copy rate {bw:g} TB/s")
    ax.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(shapes))])
    ax.set_xticklabels(shapes, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("TFLOP/s (live FLOP), compute-bound shapes")
    mem.set_ylabel("GB/s (min bytes), hatched memory-bound shapes")
    ax.set_title(title)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = mem.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
