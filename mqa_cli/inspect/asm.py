"""What a compiled kernel costs: resources and the instruction mix that matters for fp8 MQA logits.

    d = summarize(artifact)      # a dict (for --json)
    print(summary_table(d))      # the same as tables
    print(diff_table(a, b))      # two summaries side by side

CUDA: registers / stack / local / static shared from `cuobjdump --dump-resource-usage` on the
cubin (the binary's own record), dynamic shared memory, warps and stages from the compiled
metadata; spill stores/loads are the STL/LDL instructions in the SASS (Triton kernels use local
memory only to spill). On a GPU after load, the driver's own n_regs / n_spills are added.
AMD: vgpr/sgpr/agpr counts, spill counts, scratch and LDS from the amdgcn's .amdgpu_metadata,
occupancy (waves per SIMD) from the assembler's kernel info comment.
"""
from __future__ import annotations

import re
import struct
from collections import Counter

from .sass_loops import by_count, loop_mix, tile_loops

# ---------------------------------------------------------------------------------------------- ELF


def elf_symbols(data: bytes) -> list[str]:
    """Names in an ELF64 little-endian file's symbol tables (cubin and hsaco are both ELF64)."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return []
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = []
    for _, typ, _, _, off, size, link, _, _, entsize in sections:
        if typ not in (2, 11) or not entsize:  # SHT_SYMTAB, SHT_DYNSYM
            continue
        stroff = sections[link][4]
        for j in range(size // entsize):
            name_off, = struct.unpack_from("<I", data, off + j * entsize)
            if name_off:
                end = data.index(b"\0", stroff + name_off)
                names.append(data[stroff + name_off:end].decode(errors="replace"))
    return names


# ---------------------------------------------------------------------------------------------- CUDA

SASS_LINE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.x]*)", re.MULTILINE)
RESOURCE = re.compile(r"(REG|STACK|SHARED|LOCAL):(\d+)")

# (group, opcode regex on the full opcode with modifiers)
CUDA_GROUPS = (
    ("tensor core", re.compile(r"^(QGMMA|HGMMA|IGMMA|BGMMA|HMMA|IMMA|QMMA|OMMA|UTC\w*MMA)")),
    ("global load", re.compile(r"^(LDG(\.|$)|LDGSTS|UTMALDG|UBLKCP)")),
    ("global store", re.compile(r"^(STG|UTMASTG|RED|ATOMG)")),
    ("shared load", re.compile(r"^(LDS|LDSM)\b|^(LDS|LDSM)\.")),
    ("shared store", re.compile(r"^(STS|STSM)\b|^(STS|STSM)\.")),
    ("shuffle", re.compile(r"^SHFL")),
    ("max / relu", re.compile(r"^(FMNMX|HMNMX2)")),
    ("spill", re.compile(r"^(STL|LDL)")),
)


def sass_opcodes(sass: str) -> Counter:
    return Counter(SASS_LINE.findall(sass))


def cuda_resources(resource_text: str, name: str | None = None) -> dict:
    """REG/STACK/SHARED/LOCAL of the kernel's function from `cuobjdump --dump-resource-usage`."""
    block = resource_text
    marker = f"Function {name}:"
    if name is not None and marker in resource_text:
        block = resource_text.split(marker, 1)[1].split("Function ", 1)[0]
    return {k: int(v) for k, v in RESOURCE.findall(block)}


def _cuda_summary(art, base: dict) -> dict:
    from triton import knobs

    from .compile import run_tool

    md = art.metadata
    usage = run_tool(knobs.nvidia.cuobjdump.path, "--dump-resource-usage", data=art.stages["cubin"], suffix=".cubin")
    res = cuda_resources(usage, art.name)
    ops = sass_opcodes(art.stages.get("sass", ""))
    spill_st = sum(n for op, n in ops.items() if op.startswith("STL"))
    spill_ld = sum(n for op, n in ops.items() if op.startswith("LDL"))
    base["resources"] = {
        "registers": res.get("REG"),
        "registers_after_load": art.n_regs,
        "spill_stores": spill_st,
        "spill_loads": spill_ld,
        "spills_after_load": art.n_spills,
        "stack_bytes": res.get("STACK"),
        "local_bytes": res.get("LOCAL"),
        "shared_bytes": md.get("shared"),
        "static_shared_bytes": res.get("SHARED"),
        "tmem_bytes": md.get("tmem_size") or None,
        "warps": md.get("num_warps"),
        "stages": md.get("num_stages"),
        "num_ctas": md.get("num_ctas"),
    }
    base["instructions"] = _group(ops, CUDA_GROUPS)
    base["total_instructions"] = sum(ops.values())
    base["tensor_loops"] = [{"instructions": len(body), "mix": loop_mix(body)}
                            for body in tile_loops(art.stages.get("sass", ""))]
    return base


# ---------------------------------------------------------------------------------------------- AMD

GCN_LINE = re.compile(r"^\s+([a-z][a-z0-9_]*)(?:\s+([^;\n]*))?", re.MULTILINE)
DPP = re.compile(r"\b(quad_perm|row_shl|row_shr|row_ror|row_mirror|row_half_mirror|row_bcast|row_share|row_xmask|"
                 r"wave_shl|wave_shr|wave_rol|wave_ror)\b")

AMD_GROUPS = (
    ("tensor core", re.compile(r"^(v_mfma|v_smfmac|v_wmma)")),
    ("global load", re.compile(r"^(global_load|buffer_load|flat_load)")),
    ("global store", re.compile(r"^(global_store|buffer_store|flat_store|global_atomic|buffer_atomic)")),
    ("shared load", re.compile(r"^ds_(read|load)")),
    ("shared store", re.compile(r"^ds_(write|store)")),
    ("shuffle", re.compile(r"^(ds_swizzle|ds_bpermute|ds_permute|v_permlane|v_readlane|v_writelane|.*_dpp$)")),
    ("max / relu", re.compile(r"^(v_max|v_pk_max)\w*(?<!_dpp)$")),
    ("spill", re.compile(r"^(scratch_store|scratch_load)")),
)


# cbsz / blgp of the gfx950 scaled-format MFMA (v_mfma_*_f8f6f4): which format each operand holds.
F8F6F4_FORMATS = {0: "e4m3", 1: "e5m2", 2: "e2m3", 3: "e3m2", 4: "e2m1"}


def _mfma_formats(operands: str) -> str:
    cbsz = re.search(r"cbsz:(\d+)", operands or "")
    blgp = re.search(r"blgp:(\d+)", operands or "")
    a = F8F6F4_FORMATS.get(int(cbsz.group(1)) if cbsz else 0, "?")
    b = F8F6F4_FORMATS.get(int(blgp.group(1)) if blgp else 0, "?")
    return f"{a}×{b}"


def gcn_opcodes(amdgcn: str) -> tuple[Counter, Counter]:
    """Instruction counts (an f8f6f4 MFMA carries its operand formats, e.g. `[e4m3×e4m3]`), and separately the
    DPP-modified instructions (cross-lane shuffles) as `<op>_dpp`."""
    ops, dpp = Counter(), Counter()
    for op, operands in GCN_LINE.findall(amdgcn):
        if op.startswith("v_mfma") and op.endswith("f8f6f4"):
            ops[f"{op} [{_mfma_formats(operands)}]"] += 1
            continue
        ops[op] += 1
        if operands and DPP.search(operands) and not op.endswith("_dpp"):
            dpp[op + "_dpp"] += 1
    return ops, dpp


def _meta_int(text: str, key: str):
    m = re.search(rf"^\s*-?\s*\.{re.escape(key)}:\s+(\d+)", text, re.MULTILINE)
    return int(m.group(1)) if m else None


def amd_resources(amdgcn: str) -> dict:
    occ = re.search(r";\s*Occupancy:\s*(\d+)", amdgcn)
    lds = re.search(r";\s*LDSByteSize:\s*(\d+)", amdgcn)
    return {
        "vgprs": _meta_int(amdgcn, "vgpr_count"),
        "sgprs": _meta_int(amdgcn, "sgpr_count"),
        "agprs": _meta_int(amdgcn, "agpr_count"),
        "vgpr_spills": _meta_int(amdgcn, "vgpr_spill_count"),
        "sgpr_spills": _meta_int(amdgcn, "sgpr_spill_count"),
        "scratch_bytes": _meta_int(amdgcn, "private_segment_fixed_size"),
        "static_lds_bytes": int(lds.group(1)) if lds else _meta_int(amdgcn, "group_segment_fixed_size"),
        "occupancy_waves_per_simd": int(occ.group(1)) if occ else None,
    }


def _amd_summary(art, base: dict) -> dict:
    md = art.metadata
    text = art.stages.get("amdgcn", "")
    res = amd_resources(text)
    res.update({"registers_after_load": art.n_regs, "spills_after_load": art.n_spills,
                "shared_bytes": md.get("shared"), "warps": md.get("num_warps"), "stages": md.get("num_stages"),
                "waves_per_eu": md.get("waves_per_eu")})
    base["resources"] = res
    ops, dpp = gcn_opcodes(text)
    base["instructions"] = _group(ops + dpp, AMD_GROUPS)
    base["total_instructions"] = sum(ops.values())
    return base


# ---------------------------------------------------------------------------------------------- common


def _group(ops: Counter, groups) -> dict:
    """{group: {opcode: count}} for the groups that matter, each sorted by count."""
    return {name: by_count({op: n for op, n in ops.items() if pattern.search(op)}) for name, pattern in groups}


def summarize(art) -> dict:
    """Resources and instruction mix of an Artifact (mqa_cli.inspect.compile) as a plain dict."""
    md = art.metadata
    base = {"kernel": art.kernel, "kernel_name": art.name, "target": art.target.name, "backend": art.backend,
            "config": f"{art.cfg.dump_name}", "hash": md.get("hash")}
    if art.backend == "cuda":
        return _cuda_summary(art, base)
    return _amd_summary(art, base)


LABELS = {
    "registers": "registers / thread", "registers_after_load": "registers (driver, after load)",
    "spill_stores": "spill stores (STL)", "spill_loads": "spill loads (LDL)",
    "spills_after_load": "spills (driver, after load)", "stack_bytes": "stack bytes", "local_bytes": "local bytes",
    "shared_bytes": "shared memory bytes (launch)", "static_shared_bytes": "static shared bytes",
    "tmem_bytes": "tensor memory bytes", "warps": "warps", "stages": "stages", "num_ctas": "CTAs",
    "vgprs": "VGPRs", "sgprs": "SGPRs", "agprs": "AGPRs", "vgpr_spills": "VGPR spills", "sgpr_spills": "SGPR spills",
    "scratch_bytes": "scratch bytes / lane", "static_lds_bytes": "static LDS bytes",
    "occupancy_waves_per_simd": "occupancy (waves / SIMD)", "waves_per_eu": "waves_per_eu (option)",
}


def _rows_instructions(d: dict) -> list:
    rows = []
    for group, ops in d["instructions"].items():
        if not ops:
            rows.append((group, "—", 0))
            continue
        for i, (op, n) in enumerate(ops.items()):
            rows.append((group if i == 0 else "", op, n))
    return rows


def _loop_lines(d: dict) -> str:
    """One line per innermost loop that issues a tensor-core instruction (CUDA): its length and commonest opcodes."""
    loops = d.get("tensor_loops") or []
    if not loops:
        return ""
    lines = [f"  loop {i + 1}: {lp['instructions']} instructions: "
             + ", ".join(f"{op} {n}" for op, n in list(lp["mix"].items())[:10]) for i, lp in enumerate(loops)]
    return ("\n\ntensor-core loops (each instruction a scheduler issues there costs the tensor cores about a cycle "
            "on the H200):\n" + "\n".join(lines))


def summary_table(d: dict) -> str:
    from tabulate import tabulate

    r = d["resources"]
    head = (f"{d['kernel_name']} on {d['target']}: {r.get('warps')} warps, {r.get('stages')} stages"
            f" (dispatch row {d['kernel'] or '?'})")
    res = tabulate([(LABELS.get(k, k), v) for k, v in r.items() if v is not None], headers=["resource", "value"],
                   tablefmt="simple")
    ins = tabulate(_rows_instructions(d), headers=["group", "instruction", "count"], tablefmt="simple")
    return f"{head}\n\n{res}\n\n{ins}\n\n{d['total_instructions']} instructions in all{_loop_lines(d)}"


def diff_table(a: dict, b: dict) -> str:
    """Two summaries side by side: resources, then every instruction either one has in the groups that matter."""
    from tabulate import tabulate

    def delta(x, y):
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
            return "" if x == y else f"{y - x:+g}"
        return "" if x == y else "≠"

    ra, rb = a["resources"], b["resources"]
    res = [(LABELS.get(k, k), ra.get(k), rb.get(k), delta(ra.get(k), rb.get(k)))
           for k in dict.fromkeys([*ra, *rb]) if ra.get(k) is not None or rb.get(k) is not None]
    ins = []
    for group in dict.fromkeys(list(a["instructions"]) + list(b["instructions"])):
        ga, gb = a["instructions"].get(group, {}), b["instructions"].get(group, {})
        ops = list(dict.fromkeys(list(ga) + list(gb)))
        if not ops:
            ins.append((group, "—", 0, 0, ""))
        for i, op in enumerate(ops):
            ins.append((group if i == 0 else "", op, ga.get(op, 0), gb.get(op, 0), delta(ga.get(op, 0), gb.get(op, 0))))
    ins.append(("total", "", a["total_instructions"], b["total_instructions"],
                delta(a["total_instructions"], b["total_instructions"])))
    la, lb = a.get("tensor_loops") or [], b.get("tensor_loops") or []
    for i in range(max(len(la), len(lb))):
        na = la[i]["instructions"] if i < len(la) else 0
        nb = lb[i]["instructions"] if i < len(lb) else 0
        ins.append(("tensor-core loop" if i == 0 else "", f"loop {i + 1}", na, nb, delta(na, nb)))
    head = f"A: {a['config']} on {a['target']}\nB: {b['config']} on {b['target']}"
    return (head + "\n\n" + tabulate(res, headers=["resource", "A", "B", "Δ"], tablefmt="simple") + "\n\n"
            + tabulate(ins, headers=["group", "instruction", "A", "B", "Δ"], tablefmt="simple"))
