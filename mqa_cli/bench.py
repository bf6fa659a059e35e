"""Benchmarks: time kernels over problems with do_bench (median, L2 flushed), report TF/s, % of peak,
floors, and the comparison table of the seed (base vs variant)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from . import dispatch, launch, report, timing


@dataclass
class BenchRow:
    shape: str
    kernel: str  # dispatch row
    kernel_name: str  # config-aware compiled name
    clean_logits: bool
    live: int
    flop: int
    min_bytes: int
    median_us: float
    p20_us: float
    p80_us: float
    tflops: float
    pct_peak: float | None  # of the target's datasheet fp8 peak (compute-bound) or bandwidth (memory-bound)
    floor_us: float | None
    bound: str | None
    target_us: float | None = None
    reference_us: float | None = None
    timing: str = ""
    graph_us: float | None = None  # CUDA-graph replay (small paged batches, where launch cost shows)

    def as_dict(self) -> dict:
        return asdict(self)


def bench_one(name: str, prob, tgt, row: str | None, device, t=None, target_us=None, reference_us=None) -> BenchRow:
    """Time one dispatch row (or the dispatched one when row is None) on one problem."""
    p = dispatch.plan(prob.shape, tgt, kernel=row, force=row is not None)
    t = prob.materialise(device) if t is None else t
    out = launch.alloc_logits(t.S, t.N, t.q.device)
    tm = timing.time_fn(lambda: launch.launch(t, p.config, out), tgt.is_gpu)
    graph_us = None
    if tgt.is_gpu and prob.shape.kind == "paged" and prob.shape.batch <= 8:
        graph_us = timing.time_graph(lambda: launch.launch(t, p.config, out))
    fl = report.floor(prob.counts, tgt)
    pct = None
    if fl:
        pct = 100 * fl["floor_us"] / tm.median_us
    return BenchRow(name, p.chosen.row.name, p.config.name, prob.shape.clean_logits, prob.counts.live,
                    prob.counts.flop, prob.counts.bytes, tm.median_us, tm.p20_us, tm.p80_us,
                    timing.tflops(prob.counts.flop, tm.median_us), pct, fl and fl["floor_us"], fl and fl["bound"],
                    target_us, reference_us, tm.method, graph_us)


def runnable_rows(names, shape, tgt) -> tuple[list, list]:
    """Split requested rows into those that can run on this target and notes for the rest."""
    keep, notes = [], []
    for name in names:
        p = dispatch.plan(shape, tgt, kernel=name, force=True)
        target_check = next((c for c in p.chosen.checks if c.name in ("target", "problem")), None)
        if target_check is not None and not target_check.ok:
            notes.append(f"{name} skipped on {shape.kind} {shape.S}x{shape.N}: {target_check.sentence()}")
            continue
        keep.append(name)
    return keep, notes


def table(rows: list[BenchRow]) -> str:
    from tabulate import tabulate

    body = []
    for r in rows:
        body.append([r.shape, r.kernel, f"{r.median_us:.1f}", "-" if r.graph_us is None else f"{r.graph_us:.1f}", f"±{100 * (r.p80_us - r.p20_us) / 2 / r.median_us:.1f}%",
                     f"{r.tflops:.0f}", "-" if r.pct_peak is None else f"{r.pct_peak:.0f}% {r.bound[0]}",
                     "-" if r.reference_us is None else f"{r.reference_us:.0f}",
                     "-" if r.target_us is None else f"{r.target_us:.0f}",
                     "-" if r.target_us is None else ("✓" if r.median_us <= r.target_us else "✗")])
    return tabulate(body, headers=["shape", "kernel", "µs", "graph µs", "p20-p80", "TF/s", "floor/time", "ref µs", "target µs",
                                   "≤ target"], disable_numparse=True)


def compare_table(rows: list[BenchRow], base: str, variant: str) -> str:
    """The seed's table: config, live, FLOP, base µs / TF/s, variant µs / TF/s, Δ TF/s."""
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


def plot(rows: list[BenchRow], path: str, peak: float | None, title: str) -> None:
    """TF/s per shape per kernel, against the peak line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = list(dict.fromkeys(r.shape for r in rows))
    kernels = list(dict.fromkeys(r.kernel for r in rows))
    width = 0.8 / max(1, len(kernels))
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(shapes)), 4.5))
    for i, k in enumerate(kernels):
        xs, ys = [], []
        for j, s in enumerate(shapes):
            r = next((r for r in rows if r.shape == s and r.kernel == k), None)
            if r:
                xs.append(j + i * width)
                ys.append(r.tflops)
        ax.bar(xs, ys, width, label=k)
    if peak:
        ax.axhline(peak, color="k", linestyle="--", label=f"peak {peak:g} TF/s")
    ax.set_xticks([j + width * (len(kernels) - 1) / 2 for j in range(len(shapes))])
    ax.set_xticklabels(shapes, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("TFLOP/s (live FLOP)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
