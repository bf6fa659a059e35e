"""A static cost model of an AMD kernel's matrix-core loops, read from its AMDGCN (no card needed).

For each innermost loop that issues an MFMA: the instructions of one trip by unit (MFMA, VALU, LDS, memory,
scalar / control), the cycles each unit needs for them, and the bound (the busiest unit). The units run side by
side (the matrix core beside the VALU, the LDS and the memory pipeline), so the trip costs at least the largest
of them; the figure is a lower bound, not a timing: it ignores latency (what the second wave per SIMD is there to
hide), waits, bank conflicts and cache misses. It compares kernels' loops per unit of work: cycles per 1.05 MFLOP
of MFMA work (one 64 x 64 x 128 tile of one wave) and FLOP per cycle per SIMD.

Per-instruction costs (COSTS) and where they come from:
- MFMA: passes x 4 cycles, a pass being 4 cycles of the matrix core (AMD's CDNA3 and CDNA4 ISA reference guides,
  the MFMA tables' "passes" column). The fp8 pass counts are the ones the published dense fp8 peaks imply:
  MI300X (gfx942) 2,615 TFLOPS at 304 CUs x 2.1 GHz = 1,024 FLOP per cycle per SIMD, so 32x32x16 fp8 (32,768
  FLOP) takes 8 passes and 16x16x32 fp8 4; MI355X (gfx950) 5.0 PFLOPS at 256 CUs x 2.4 GHz = 2,048 FLOP per
  cycle per SIMD, so 32x32x64 f8f6f4 (fp8 operands, 262,144 FLOP) takes 16 passes and 16x16x128 f8f6f4 8.
- VALU: 4 cycles per wave64 instruction (a SIMD is 16 lanes wide: the ISA guides' "a wavefront's VALU instruction
  issues over 4 cycles"); packed fp32 (v_pk_*) the same 4 cycles for two values a lane; transcendentals 4x that.
- LDS: bytes per wave / the CU's LDS bandwidth x the 4 SIMDs sharing it: 128 bytes per cycle per CU on CDNA3
  (CDNA3 white paper), 256 for reads on CDNA4 (CDNA4 white paper: LDS read bandwidth doubled, 160 KB).
- Memory: bytes per wave / 64 bytes per cycle per CU (the vector L1's request rate, both generations) x 4 SIMDs.
- Scalar / control (s_*): 1 issue cycle each; s_barrier and s_waitcnt are counted, not costed (they cost latency).
On NVIDIA the card judges speed; this model is for AMD targets, where no card is at hand here.
"""
from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field

WORK_FLOP = 2 * 64 * 64 * 128  # 1.05 MFLOP: one wave's 64 x 64 x 128 fp8 tile, the unit figures are given per

# Cycles of one MFMA per target (passes x 4), by the instruction's shape.
MFMA_CYCLES = {
    "gfx950": {"32x32x64": 64, "16x16x128": 32, "32x32x16": 32, "16x16x32": 16},
    "gfx942": {"32x32x16": 32, "16x16x32": 16},
}
MFMA_FLOP = {"32x32x64": 2 * 32 * 32 * 64, "16x16x128": 2 * 16 * 16 * 128, "32x32x16": 2 * 32 * 32 * 16,
             "16x16x32": 2 * 16 * 16 * 32}
VALU_CYCLES = 4
TRANS_CYCLES = 16
LDS_BYTES_PER_CYCLE = {"gfx950": 256, "gfx942": 128}  # per CU
MEM_BYTES_PER_CYCLE = {"gfx950": 64, "gfx942": 64}  # per CU
SIMDS = 4
LANES = 64

TRANS = re.compile(r"^v_(exp|log|rcp|rsq|sqrt|sin|cos)_")
WIDTH = re.compile(r"_(b32|b64|b96|b128|dword|dwordx2|dwordx3|dwordx4|u8|i8|u16|i16|b8|b16|ubyte|ushort|sbyte|sshort|short|byte)\b")
BYTES = {"b8": 1, "u8": 1, "i8": 1, "ubyte": 1, "sbyte": 1, "byte": 1, "b16": 2, "u16": 2, "i16": 2, "ushort": 2,
         "sshort": 2, "short": 2, "b32": 4, "dword": 4, "b64": 8, "dwordx2": 8, "b96": 12, "dwordx3": 12,
         "b128": 16, "dwordx4": 16}


def cost_note(target: str) -> str:
    """The per-instruction costs the model assumes on `target`, in one paragraph (printed under every table)."""
    mf = ", ".join(f"{k} {v}" for k, v in MFMA_CYCLES[target].items())
    return (f"static model, not a timing: a trip costs at least its busiest unit. {target}: MFMA cycles ({mf}: passes "
            f"x 4, from AMD's CDNA{'4' if target == 'gfx950' else '3'} ISA guide pass counts as the published fp8 "
            f"peak implies); VALU {VALU_CYCLES} cycles a wave64 instruction (transcendental {TRANS_CYCLES}); LDS "
            f"{LDS_BYTES_PER_CYCLE[target]} B/cycle per CU and memory {MEM_BYTES_PER_CYCLE[target]} B/cycle per CU, "
            f"shared by {SIMDS} SIMDs; scalar 1 cycle. Source notes: mqa_cli/inspect/amdgcn_model.py.")


@dataclass
class Loop:
    instructions: int
    mix: Counter
    mfma: dict = field(default_factory=dict)  # shape -> count
    valu: int = 0
    trans: int = 0
    lds_bytes: int = 0
    lds_ops: int = 0
    mem_bytes: int = 0
    mem_ops: int = 0
    scalar: int = 0
    barriers: int = 0
    waitcnts: int = 0
    spills: int = 0

    def flop(self) -> int:
        return sum(MFMA_FLOP.get(s, 0) * n for s, n in self.mfma.items())

    def bounds(self, target: str) -> dict:
        """Cycles per trip each unit needs (the bound of each)."""
        mf = sum(MFMA_CYCLES[target].get(s, 0) * n for s, n in self.mfma.items())
        return {"mfma": mf, "valu": VALU_CYCLES * self.valu + TRANS_CYCLES * self.trans,
                "lds": self.lds_bytes * SIMDS / LDS_BYTES_PER_CYCLE[target],
                "memory": self.mem_bytes * SIMDS / MEM_BYTES_PER_CYCLE[target], "scalar": self.scalar}

    def figure(self, target: str) -> dict:
        """The trip's bound (its busiest unit), and that per 1.05 MFLOP of MFMA work and as FLOP per cycle."""
        b = self.bounds(target)
        unit = max(b, key=b.get)
        flop = self.flop()
        return {"bound": unit, "cycles": b[unit], "per_work": b[unit] * WORK_FLOP / flop if flop else None,
                "flop_per_cycle": flop / b[unit] if b[unit] else None}


def _instructions(amdgcn: str) -> tuple[list, dict]:
    """The kernel's instructions (opcode, operands) in order, and each basic-block label's index."""
    labels, ins = {}, []
    for line in amdgcn.splitlines():
        m = re.match(r"^(\.?L[\w.$]+):", line)
        if m:
            labels[m.group(1)] = len(ins)
            continue
        s = line.split(";", 1)[0].strip()
        if not s or s.startswith(".") or s.endswith(":"):
            continue
        op, _, rest = s.partition(" ")
        if not re.match(r"^[sv]_|^ds_|^buffer_|^global_|^scratch_|^flat_", op):
            continue
        ins.append((op, rest.strip()))
    return ins, labels


def mfma_loops(amdgcn: str) -> list[Loop]:
    """The innermost loops (a backward branch and what it jumps over) that issue an MFMA, in program order."""
    ins, labels = _instructions(amdgcn)
    spans = []
    for i, (op, rest) in enumerate(ins):
        if op.startswith("s_cbranch") or op == "s_branch":
            target = rest.split()[-1] if rest else ""
            if target in labels and labels[target] <= i:
                spans.append((labels[target], i))
    inner = [(lo, hi) for lo, hi in spans
             if not any(lo <= a and b <= hi and (a, b) != (lo, hi) for a, b in spans)]
    loops = []
    for lo, hi in sorted(inner):
        body = ins[lo:hi + 1]
        if any(op.startswith("v_mfma") for op, _ in body):
            loops.append(classify(body))
    return loops


def classify(body: list) -> Loop:
    """Counts of one trip's instructions by unit, with the bytes the LDS and memory instructions move per wave."""
    lp = Loop(len(body), Counter(op for op, _ in body))
    for op, rest in body:
        if op.startswith("v_mfma"):
            m = re.search(r"(\d+x\d+x\d+)", op)
            shape = m.group(1) if m else "?"
            lp.mfma[shape] = lp.mfma.get(shape, 0) + 1
        elif op.startswith("ds_"):
            lp.lds_ops += 1
            w = WIDTH.search(op)
            n = BYTES.get(w.group(1), 4) if w else 4
            if "2addr" in op or "read2" in op or "write2" in op:
                n *= 2
            lp.lds_bytes += n * LANES
        elif op.startswith(("buffer_", "global_", "flat_")):
            lp.mem_ops += 1
            w = WIDTH.search(op)
            lp.mem_bytes += (BYTES.get(w.group(1), 4) if w else 4) * LANES
        elif op.startswith("scratch_"):
            lp.spills += 1
            lp.mem_ops += 1
        elif op.startswith("v_"):
            if op.startswith(("v_accvgpr_", "v_readfirstlane", "v_readlane", "v_writelane")) or not TRANS.match(op):
                lp.valu += 1
            else:
                lp.trans += 1
        elif op.startswith("s_"):
            if op == "s_barrier":
                lp.barriers += 1
            elif op == "s_waitcnt":
                lp.waitcnts += 1
            elif op not in ("s_nop", "s_setprio", "s_sched_barrier"):
                lp.scalar += 1
    return lp


def model(amdgcn: str, target: str) -> list[dict]:
    """One dict per MFMA loop: counts, the cycles each unit needs a trip, the bound and the figures."""
    if target not in MFMA_CYCLES:
        raise ValueError(f"no cost model for {target}; it has {', '.join(MFMA_CYCLES)}")
    return [{"instructions": lp.instructions, "mfma": dict(lp.mfma), "valu": lp.valu + lp.trans,
             "lds_ops": lp.lds_ops, "lds_bytes": lp.lds_bytes, "memory_ops": lp.mem_ops, "memory_bytes": lp.mem_bytes,
             "scalar": lp.scalar, "barriers": lp.barriers, "waitcnts": lp.waitcnts, "spill_ops": lp.spills,
             "flop": lp.flop(), "unit_cycles": lp.bounds(target), **lp.figure(target)} for lp in mfma_loops(amdgcn)]


def main_loop(loops: list[dict]) -> dict | None:
    """The loop a long row spends its time in: the one with the most MFMA work per trip, the longest of those
    (the unmasked interior loop of a kernel split into head / interior / tail has the fewest instructions, but
    with equal work all are shown; the figure quoted is the interior's, the cheapest per FLOP)."""
    if not loops:
        return None
    top = max(lp["flop"] for lp in loops)
    best = [lp for lp in loops if lp["flop"] == top]
    return min(best, key=lambda lp: (lp["per_work"] or float("inf"), lp["instructions"]))


def table(loops: list[dict], target: str) -> str:
    """The model as text: one line per loop, then the costs assumed."""
    if not loops:
        return f"cost model ({target}): no loop issues an MFMA"
    lines = [f"cost model ({target}), per trip of each matrix-core loop; a static model, not a timing:"]
    for i, lp in enumerate(loops, 1):
        u = lp["unit_cycles"]
        mf = " ".join(f"{n} x {s}" for s, n in lp["mfma"].items())
        lines.append(
            f"  loop {i}: {lp['instructions']} instructions; MFMA {mf}, VALU {lp['valu']}, LDS {lp['lds_ops']} "
            f"({lp['lds_bytes'] // 1024} KB/wave), memory {lp['memory_ops']} ({lp['memory_bytes'] // 1024} KB/wave), "
            f"scalar {lp['scalar']}, barriers {lp['barriers']}, spill ops {lp['spill_ops']}")
        lines.append(
            f"          cycles: MFMA {u['mfma']:.0f}, VALU {u['valu']:.0f}, LDS {u['lds']:.0f}, memory "
            f"{u['memory']:.0f}, scalar {u['scalar']:.0f} -> {lp['bound']}-bound {lp['cycles']:.0f} cycles, "
            f"{lp['per_work']:.0f} per 1.05 MFLOP, {lp['flop_per_cycle']:.0f} FLOP/cycle/SIMD")
    lines.append("  " + cost_note(target))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- stored figures
# `explain` shows the model's figure without compiling: amd_figures.json holds what `python -m
# mqa_cli.inspect.amdgcn_model --write` measured for the AMD rows' configs (H 64 D 128, S = N = 4096 and 8192
# causal, and the tiled row there) with the installed triton. `dump --target gfx950|gfx942` recomputes it for any
# config.
FIGURES = __file__.rsplit("/", 1)[0] + "/amd_figures.json"
SHAPES = ((4096, 64, 128), (8192, 64, 128))
ROWS = {"gfx950": ("heads_on_m_gfx950", "tiled"), "gfx942": ("heads_on_m_gfx942", "tiled")}


def stored(target: str, dump_name: str) -> dict | None:
    """The stored figures of config `dump_name` on `target`, or None (not measured for it)."""
    if not os.path.exists(FIGURES):
        return None
    with open(FIGURES) as f:
        d = json.load(f)
    e = d["configs"].get(f"{target}/{dump_name}")
    return {**e, "triton": d["triton"]} if e else None


def figure_line(e: dict) -> str:
    """One line for `explain`: the main loop's figure and what the kernel compiles to."""
    return (f"cost model ({e['target']}, triton {e['triton']}; static, not a timing): main loop {e['instructions']} "
            f"instructions, {e['per_work']:.0f} cycles per 1.05 MFLOP ({e['bound']}-bound), {e['vgprs']} VGPR + "
            f"{e['agprs']} AGPR, {e['waves']} waves/SIMD, {e['spills']} spills, {e['barriers']} barriers in the loop, "
            f"{e['lds_kb']} KB LDS per wave and trip")


def measure(target_name: str, row: str, S: int, H: int, D: int) -> tuple[str, dict]:
    """Compile `row` for a causal S x S problem on the target and return (key, figures of its main loop)."""
    from ..plan import dispatch, targets
    from ..problem.shape import Shape
    from . import asm
    from . import compile as comp

    tgt = targets.get_target(target_name)
    shape = Shape("prefill", S, S, H, D, True, tgt.fp8)
    p = dispatch.plan(shape, tgt, kernel=row)
    art = comp.compile_config(tgt, p.config, shape, row, f"s{S}-h{H}-d{D}-causal")
    text = art.stages["amdgcn"]
    res = asm.amd_resources(text)
    lp = main_loop(model(text, target_name))
    entry = {"target": target_name, "row": row, "kernel_name": p.config.name, "instructions": lp["instructions"],
             "per_work": lp["per_work"], "bound": lp["bound"], "barriers": lp["barriers"],
             "lds_kb": lp["lds_bytes"] // 1024, "vgprs": res["vgprs"] - (res["agprs"] or 0),
             "agprs": res["agprs"] or 0, "waves": res["occupancy_waves_per_simd"], "spills": res["vgpr_spills"]}
    return f"{target_name}/{p.config.dump_name}", entry


def main(argv=None) -> int:
    import argparse
    from importlib.metadata import version

    from . import compile as comp

    ap = argparse.ArgumentParser(description="measure the AMD rows' static cost-model figures")
    ap.add_argument("--write", action="store_true", help=f"write {FIGURES}")
    args = ap.parse_args(argv)
    comp.prepare()
    configs = {}
    for target_name, rows in ROWS.items():
        for row in rows:
            for S, H, D in SHAPES:
                key, entry = measure(target_name, row, S, H, D)
                configs[key] = entry
                print(key, figure_line({**entry, "triton": version("triton")}))
    if args.write:
        with open(FIGURES, "w") as f:
            json.dump({"triton": ".".join(version("triton").split(".")[:2]), "configs": configs}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
