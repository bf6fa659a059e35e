"""Rendering shared by commands: problem summary, dispatch explanation, time floors (text and JSON)."""
from __future__ import annotations

from tabulate import tabulate

from .dispatch import Plan
from .problem import Counts, summary_rows
from .targets import Target


def floor(c: Counts, target: Target) -> dict | None:
    """Time floor on the target: FLOP / peak and bytes / bandwidth; the larger names the bound."""
    if target.peak_fp8_tflops is None or target.bandwidth_tbs is None:
        return None
    t_flop = c.flop / (target.peak_fp8_tflops * 1e12) * 1e6
    t_bytes = c.bytes / (target.bandwidth_tbs * 1e12) * 1e6
    out = {"compute_us": t_flop, "memory_us": t_bytes, "floor_us": max(t_flop, t_bytes),
           "bound": "compute" if t_flop >= t_bytes else "memory",
           "peak_fp8_tflops": target.peak_fp8_tflops, "bandwidth_tbs": target.bandwidth_tbs}
    if target.measured_fp8_tflops and target.measured_bandwidth_tbs:
        mf = c.flop / (target.measured_fp8_tflops * 1e12) * 1e6
        mb = c.bytes / (target.measured_bandwidth_tbs * 1e12) * 1e6
        out["measured_floor_us"] = max(mf, mb)
    return out


def counts_dict(c: Counts) -> dict:
    return {"S": c.S, "N": c.N, "heads": c.heads, "dim": c.dim, "live": c.live, "live_fraction": c.live_fraction,
            "flop": c.flop, "min_bytes": c.bytes, "intensity": c.intensity, "clean_logits": c.clean_logits}


def target_dict(t: Target) -> dict:
    return {"name": t.name, "backend": t.backend, "arch": t.arch, "fp8": t.fp8, "warp_size": t.warp_size,
            "peak_fp8_tflops": t.peak_fp8_tflops, "bandwidth_tbs": t.bandwidth_tbs,
            "smem_per_block_kib": t.smem_per_block_kib, "units": t.units, "description": t.description,
            "device_name": t.device_name}


def plan_dict(p: Plan) -> dict:
    rows = []
    for cand in p.candidates:
        rows.append({
            "kernel": cand.row.name, "summary": cand.row.summary, "ok": cand.ok,
            "selected": cand is p.chosen,
            "conditions": [{"name": c.name, "required": c.required, "actual": c.actual, "ok": c.ok}
                           for c in cand.checks],
            "ruled_out_by": None if cand.ok else cand.first_failure.sentence(),
        })
    return {"candidates": rows, "selected": p.chosen.row.name, "forced": p.forced, "notes": p.notes,
            "config": p.config.as_dict(), "kernel_name": p.config.name, "dump_name": p.config.dump_name}


def explain_dict(label: str, c: Counts, p: Plan) -> dict:
    return {"problem": {"label": label, **counts_dict(c)}, "target": target_dict(p.target),
            "plan": plan_dict(p), "floor": floor(c, p.target)}


def summary_text(label: str, c: Counts) -> str:
    return f"problem {label}\n" + tabulate(summary_rows(c), tablefmt="plain")


def explain_text(d: dict) -> str:
    lines = []
    t = d["target"]
    where = f" — {t['device_name']}" if t["device_name"] else ""
    units = f", {t['units']} {'SMs' if t['backend'] == 'cuda' else 'CUs'}" if t["units"] and t["backend"] != "interpreter" else ""
    lines.append(f"target {t['name']}: {t['description']}{where}{units}; fp8 {t['fp8']}")
    pr = d["problem"]
    lines.append(f"problem {pr['label']}")
    lines.append(f"  S {pr['S']:,}  N {pr['N']:,}  H {pr['heads']}  D {pr['dim']}  live {pr['live']:,} "
                 f"({100 * pr['live_fraction']:.1f} %)  FLOP {pr['flop'] / 1e12:.3f} T  min bytes "
                 f"{pr['min_bytes'] / 1e6:.1f} MB  intensity {pr['intensity']:.1f} FLOP/B")
    lines.append("")
    lines.append("dispatch table (first row whose conditions all hold wins):")
    for i, row in enumerate(d["plan"]["candidates"], 1):
        mark = "→" if row["selected"] else " "
        lines.append(f"{mark} {i}. {row['kernel']}: {row['summary']}")
        table = [["✓" if c["ok"] else "✗", c["name"], c["required"], c["actual"]] for c in row["conditions"]]
        lines.append(_indent(tabulate(table, headers=["", "condition", "required", "actual"], tablefmt="simple")))
        if not row["ok"]:
            lines.append(f"     ruled out: {row['ruled_out_by']}")
    pl = d["plan"]
    lines.append("")
    lines.append(f"selected: {pl['selected']}" + (f" ({'; '.join(pl['notes'])})" if pl["notes"] else ""))
    cfg = pl["config"]
    lines.append("config: " + ", ".join(f"{k}={v}" for k, v in {**cfg["constexprs"], **cfg["options"]}.items()))
    if cfg["schedule"]:
        lines.append("schedule: " + ", ".join(f"{k}={v}" for k, v in cfg["schedule"].items()))
    lines.append(f"kernel name: {pl['kernel_name']}   (dump folder {pl['dump_name']})")
    f = d["floor"]
    if f:
        line = (f"floor on {t['name']}: compute {f['compute_us']:.1f} µs (at {f['peak_fp8_tflops']:g} TFLOP/s fp8), "
                f"memory {f['memory_us']:.1f} µs (at {f['bandwidth_tbs']:g} TB/s) → {f['bound']}-bound, "
                f"≥ {f['floor_us']:.1f} µs")
        lines.append(line)
        if "measured_floor_us" in f:
            lines.append(f"  against this project's measured ceilings: ≥ {f['measured_floor_us']:.1f} µs")
    else:
        lines.append(f"floor: none for {t['name']} (no peak figures; the interpreter's speed means nothing)")
    return "\n".join(lines)


def _indent(text: str, pad: str = "     ") -> str:
    return "\n".join(pad + line for line in text.splitlines())
