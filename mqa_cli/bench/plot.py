"""`bench --plot F.png`: the benchmarked rows against the target's ceilings, as a roofline and as % of the floor.

Left, a roofline: each row's rate (live FLOP / time) at its intensity (FLOP per minimum byte), log-log, under
the two ceilings drawn as lines: the fp8 rate (flat) and the copy rate (slanted: intensity x TB/s). The lower
of the two at a row's intensity is the rate its binding floor stands for, so the gap from a point up to the
roof is the gap from that row's floor. The reference implementation's time (where the bench has one) is drawn
at the same intensity. Right: each shape's % of its binding floor, ours beside the reference's.
Needs matplotlib (the `plot` extra); imported only when a plot is asked for.
"""
from __future__ import annotations

from . import timing


def _roofline(ax, rows, tgt, series, reference_label):
    ceil = timing.ceilings(tgt)
    xs = [r.flop / max(1, r.min_bytes) for r in rows]
    ys = [r.tflops for r in rows] + [timing.tflops(r.flop, r.reference_us) for r in rows if r.reference_us]
    if ceil:
        fp8, copy, _ = ceil
        xs.append(fp8 / copy)  # the ridge, so both lines show
        lo, hi = min(xs) / 3, max(xs) * 3
        fp8_how = "measured" if tgt.measured_fp8_tflops else "datasheet"
        copy_how = "measured" if tgt.measured_bandwidth_tbs else "datasheet"
        ax.plot([lo, hi], [fp8, fp8], "k--", lw=1, label=f"fp8 ceiling {fp8:g} TF/s ({fp8_how})")
        ax.plot([lo, hi], [lo * copy, hi * copy], color="0.4", ls=":", lw=1.2,
                label=f"copy rate {copy:g} TB/s ({copy_how}) x intensity")
        ax.set_xlim(lo, hi)
        ax.set_ylim(max(1e-9, min(ys + [lo * copy]) / 2), 2 * fp8)
    for i, k in enumerate(series):
        pts = [r for r in rows if r.kernel == k]
        ax.scatter([r.flop / max(1, r.min_bytes) for r in pts], [r.tflops for r in pts], color=f"C{i}", s=28,
                   zorder=3, label=k)
        for r in pts:
            ax.annotate(r.shape, (r.flop / max(1, r.min_bytes), r.tflops), fontsize=6, xytext=(3, -8),
                        textcoords="offset points")
    refs = {r.shape: r for r in rows if r.reference_us}
    if refs:
        ax.scatter([r.flop / max(1, r.min_bytes) for r in refs.values()],
                   [timing.tflops(r.flop, r.reference_us) for r in refs.values()], marker="x", color="k", s=36, zorder=4,
                   label=reference_label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("intensity: live FLOP / min bytes")
    ax.set_ylabel("TF/s (live FLOP / time)")
    _legend(ax, loc="upper left")


def _fractions(ax, rows, series, reference_label):
    shapes = list(dict.fromkeys(r.shape for r in rows))
    has_ref = any(r.reference_us and r.floor_us for r in rows)
    groups = series + ([reference_label] if has_ref else [])
    width = 0.8 / max(1, len(groups))
    for i, k in enumerate(groups):
        labelled = False
        for j, s in enumerate(shapes):
            r = next((r for r in rows if r.shape == s and (k == reference_label or r.kernel == k)), None)
            if r is None or r.floor_us is None:
                continue
            us = r.reference_us if k == reference_label else r.median_us
            if not us:
                continue
            pct = 100 * r.floor_us / us
            ax.bar(j + i * width, pct, width, color="0.6" if k == reference_label else f"C{i}",
                   hatch="//" if r.bound == "memory" else None, label=None if labelled else k)
            ax.text(j + i * width, pct + 1, f"{pct:.0f}", ha="center", fontsize=6)
            labelled = True
    ax.axhline(100, color="k", lw=0.8)
    ax.set_ylim(0, 130)  # room for the legend above the 100 % line
    ax.set_xticks([j + width * (len(groups) - 1) / 2 for j in range(len(shapes))])
    ax.set_xticklabels(shapes, rotation=25, ha="right", fontsize=7)
    ax.set_ylabel("% of the binding floor (hatched: memory-bound)")
    if not any(r.floor_us for r in rows):
        ax.text(0.5, 0.5, "no ceilings for this target", ha="center", transform=ax.transAxes)
    _legend(ax, loc="upper left", ncol=2)


def _legend(ax, **kw) -> list[str]:
    """The panel's legend (none when nothing is labelled); its labels."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, fontsize=7, **kw)
    return labels


def render(rows: list, path: str, tgt, title: str, reference_label: str = "reference") -> list[str]:
    """Write the two panels for bench rows (mqa_cli.bench.suite.BenchRow) measured on `tgt` to `path` (PNG); returns the
    legends' labels (what was drawn)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    series = list(dict.fromkeys(r.kernel for r in rows))
    fig, (roof, frac) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [1, 1.2]})
    _roofline(roof, rows, tgt, series, reference_label)
    _fractions(frac, rows, series, reference_label)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120, format="png")
    plt.close(fig)
    return roof.get_legend_handles_labels()[1] + frac.get_legend_handles_labels()[1]
