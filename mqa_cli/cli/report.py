"""Rendering shared by commands: problem summary, dispatch explanation, time floors (text and JSON)."""
from __future__ import annotations

from tabulate import tabulate

from ..bench.timing import binding_floor
from ..plan.dispatch import Plan
from ..plan.targets import Target
from ..problem.prefill import Counts, summary_rows


def floor(c: Counts, target: Target) -> dict | None:
    """Time floor on the target: FLOP / peak and bytes / bandwidth; the larger names the bound."""
    if target.peak_fp8_tflops is None or target.bandwidth_tbs is None:
        return None
    t_flop = c.flop / (target.peak_fp8_tflops * 1e12) * 1e6
    t_bytes = c.bytes / (target.bandwidth_tbs * 1e12) * 1e6
    out = {"compute_us": t_flop, "memory_us": t_bytes, "floor_us": max(t_flop, t_bytes),
           "bound": "compute" if t_flop >= t_bytes else "memory",
           "peak_fp8_tflops": target.peak_fp8_tflops, "bandwidth_tbs": target.bandwidth_tbs}
    if target.measured_fp8_tflops or target.measured_bandwidth_tbs:  # each measured ceiling the card has
        out["measured_floor_us"] = binding_floor(c.flop, c.bytes, target).us
    return out


def topk_memory(prob, k: int, target) -> dict:
    """The memory and selection config of a problem's bounded top-k plan (mqa_cli.api.topk.topk_memory; imports
    torch): prefill's fp8_mqa_topk, or decode's fp8_paged_mqa_topk (the batch's rows against the context)."""
    import torch

    from ..api.topk import topk_memory

    s = prob.shape
    paged = s.kind == "paged"
    return topk_memory(s.S, s.N, k, max_seqlen_k=0 if paged else prob.max_seqlen_k,
                       logits_dtype=torch.bfloat16 if s.bf16 else torch.float32, paged=paged,
                       units=target.units or 1, backend=target.backend)


def counts_dict(c: Counts) -> dict:
    return {"S": c.S, "N": c.N, "heads": c.heads, "dim": c.dim, "live": c.live, "live_fraction": c.live_fraction,
            "flop": c.flop, "min_bytes": c.bytes, "intensity": c.intensity, "clean_logits": c.clean_logits}


def target_dict(t: Target) -> dict:
    return {"name": t.name, "backend": t.backend, "arch": t.arch, "fp8": t.fp8, "warp_size": t.warp_size,
            "peak_fp8_tflops": t.peak_fp8_tflops, "bandwidth_tbs": t.bandwidth_tbs,
            "smem_per_block_kib": t.smem_per_block_kib, "units": t.units, "description": t.description,
            "device_name": t.device_name, "card": t.card, "l2_mib": t.l2_mib}


def plan_dict(p: Plan) -> dict:
    rows = [{"kernel": cand.row.name, "summary": cand.row.summary, "ok": cand.ok, "selected": cand is p.chosen,
             "conditions": [{"name": c.name, "required": c.required, "actual": c.actual, "ok": c.ok}
                            for c in cand.checks],
             "ruled_out_by": None if cand.ok else cand.first_failure.sentence()} for cand in p.candidates]
    model = None
    if p.target.backend == "hip":  # AMD: the stored static cost-model figure of this config (no card here)
        from ..inspect import amdgcn_model

        model = amdgcn_model.stored(p.target.name, p.config.dump_name)
    return {"cost_model": model, "candidates": rows, "selected": p.chosen.row.name, "forced": p.forced,
            "notes": p.notes, "decisions": {d.about: d.decided for d in p.decisions},
            "config": p.config.as_dict(), "kernel_name": p.config.name, "dump_name": p.config.dump_name}


def memory_dict(c: Counts, shape, max_seqlen_k: int = 0, topk: dict | None = None) -> dict:
    """Device memory the plan needs: the inputs, the logits buffer it returns (rows x padded columns), and with
    top-k the bounded plan instead of the logits (mqa_cli.api.topk.topk_memory)."""
    cols = max_seqlen_k if shape.compressed and max_seqlen_k else c.N
    esz = 2 if shape.bf16 else 4
    align = 1024 // esz  # rows padded to 1024 bytes, as the launcher pads them (mqa_cli.problem.prefill.ROW_BYTES)
    logits = c.S * (-(-cols // align) * align) * esz
    inputs = c.bytes - 4 * (c.S * c.N if c.clean_logits else c.live)  # Counts' bytes hold one fp32 output
    out = {"inputs_bytes": inputs, "logits_bytes": logits, "total_bytes": inputs + logits}
    if topk is not None:
        out.update({"topk": topk, "total_bytes": inputs + topk["total_bytes"]})
    return out


def explain_dict(label: str, c: Counts, p: Plan, memory: dict | None = None) -> dict:
    return {"problem": {"label": label, **counts_dict(c)}, "target": target_dict(p.target),
            "plan": plan_dict(p), "floor": floor(c, p.target), "memory": memory}


def summary_text(label: str, c: Counts) -> str:
    return f"problem {label}\n" + tabulate(summary_rows(c), tablefmt="plain")


def explain_text(d: dict) -> str:
    lines = []
    t = d["target"]
    where = f" — {t['device_name']}" if t["device_name"] else ""
    units = f", {t['units']} {'SMs' if t['backend'] == 'cuda' else 'CUs'}" if t["units"] and t["backend"] != "interpreter" else ""
    lines.append(f"target {t['name']}: {t['description']}{where}{units}; fp8 {t['fp8']}")
    pr = d["problem"]
    lines += [f"problem {pr['label']}",
              f"  S {pr['S']:,}  N {pr['N']:,}  H {pr['heads']}  D {pr['dim']}  live {pr['live']:,} "
              f"({100 * pr['live_fraction']:.1f} %)  FLOP {pr['flop'] / 1e12:.3f} T  min bytes "
              f"{pr['min_bytes'] / 1e6:.1f} MB  intensity {pr['intensity']:.1f} FLOP/B",
              "", "dispatch table (first row whose conditions all hold wins):"]
    for i, row in enumerate(d["plan"]["candidates"], 1):
        mark = "→" if row["selected"] else " "
        lines.append(f"{mark} {i}. {row['kernel']}: {row['summary']}")
        table = [["✓" if c["ok"] else "✗", c["name"], c["required"], c["actual"]] for c in row["conditions"]]
        lines += ["     " + ln for ln in tabulate(table, headers=["", "condition", "required", "actual"]).splitlines()]
        if not row["ok"]:
            lines.append(f"     ruled out: {row['ruled_out_by']}")
    pl = d["plan"]
    lines += ["", f"selected: {pl['selected']}" + (f" ({'; '.join(pl['notes'])})" if pl["notes"] else "")]
    for about, decided in pl.get("decisions", {}).items():
        lines.append(f"{about}: {decided}")
    cfg = pl["config"]
    lines.append("config: " + ", ".join(f"{k}={v}" for k, v in {**cfg["constexprs"], **cfg["options"]}.items()))
    if cfg["schedule"]:
        lines.append("schedule: " + ", ".join(f"{k}={v}" for k, v in cfg["schedule"].items()))
    lines.append(f"kernel name: {pl['kernel_name']}   (dump folder {pl['dump_name']})")
    if t["backend"] == "hip":
        from ..inspect import amdgcn_model

        if pl.get("cost_model"):
            lines.append(amdgcn_model.figure_line(pl["cost_model"]))
        else:
            lines.append(f"cost model: none stored for this config; `mqa-logits dump --target {t['name']}` with this "
                         f"problem computes it (a static model, not a timing)")
    f = d["floor"]
    if f:
        card = f" ({t['device_name'] or t['description']})" if t.get("card") else ""
        line = (f"floor on {t['name']}{card}: compute {f['compute_us']:.1f} µs (at {f['peak_fp8_tflops']:g} TFLOP/s fp8), "
                f"memory {f['memory_us']:.1f} µs (at {f['bandwidth_tbs']:g} TB/s) → {f['bound']}-bound, "
                f"≥ {f['floor_us']:.1f} µs")
        lines.append(line)
        if "measured_floor_us" in f:
            lines.append(f"  against this project's measured ceilings: ≥ {f['measured_floor_us']:.1f} µs")
    else:
        lines.append(f"floor: none for {t['name']} (no peak figures; the interpreter's speed means nothing)")
    m = d.get("memory")
    if m:
        gib, k = 1 << 30, m.get("topk")
        held = (f"top-k plan {k['total_bytes'] / gib:.2f} GiB ({k['blocks']} blocks of {k['rows_per_block']} rows; "
                f"the full logits would be {m['logits_bytes'] / gib:.2f} GiB)" if k
                else f"logits {m['logits_bytes'] / gib:.2f} GiB")
        lines.append(f"memory: inputs {m['inputs_bytes'] / gib:.2f} GiB + {held} = {m['total_bytes'] / gib:.2f} GiB")
        if k:
            from mqa_kernels.topk.config import table_source

            c = k["select"]
            lines += [f"top-k selection: {k['select_kernel']} (regime {c['regime']}, "
                      f"{table_source(c['regime'], t['backend'])}): {c['num_warps']} warps, {c['parts']} "
                      f"program(s) a row, rows up to {c['register_rows_up_to']} columns searched in registers",
                      "an engine's step instead: these logits, then its own top-k (vLLM's top_k_per_row_prefill or "
                      "get_indexer_topk backend, FlashInfer's top_k_ragged_transform); `mqa-logits bench --suite "
                      "indexer` times both"]
    return "\n".join(lines)
