"""The code each dispatch row compiles to for sm90, on the installed triton: registers, spills and each tensor-core
loop's length, per config the rows take (tiled and h64d128_sm90 on their shapes, gluon_ws_sm90 per tuned (heads,
dim), paged_ws_sm90 per tuned size class, paged, the top-k selection).

    python -m mqa_cli.inspect.codegen --write tests/codegen/triton-3.8.json    # every case, one compile each (cached)
    python -m mqa_cli.inspect.codegen --table tests/codegen/triton-3.*.json     # the row x version table (docs/CODEGEN.md)

A tile costs the tensor cores about a cycle an instruction of its loop on the H200 (mqa_cli.inspect.sass_loops), so
these numbers explain a time the card measured; they do not stand for one. Triton's cache makes a repeated case cheap.
The stored tables (one per triton release) are a record of what a change did, rewritten by the first command;
tests/test_codegen.py fails only on a new spill inside a tensor-core loop or a loop longer by more than JUMP."""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

JUMP = 0.15  # a loop may be this much longer than the table says (or than 3.6's) before a test fails


@dataclass(frozen=True)
class Case:
    label: str  # unique and stable: the key of the stored tables
    row: str  # dispatch row (or "topk")
    shape: dict  # dispatch.Shape fields; topk: rows, cols, paged
    pinned: bool = False  # tests/test_codegen.py compiles it again and compares with the table
    override: tuple = ()  # (KEY, value) pairs applied to the row's config (mqa_cli.plan.overrides.apply_overrides)


def _prefill(row, h, d, s=8192, pinned=False):
    return Case(f"{row} H{h} D{d}", row, dict(kind="prefill", S=s, N=s, heads=h, dim=d), pinned)


def _decode(row, next_n, size, h=64, d=128, pinned=False, given=False, engines=False):
    """A decode case (clean logits); `given`: with the schedule metadata given (the plan reads it: SELF_SCHEDULE=0);
    `engines`: as vLLM and SGLang call it, the schedule given and no clean logits (CLEAN=0; tuned.py's next_n 5-7
    builds spilled on 3.8 only in this form)."""
    batch, ctx = {"small": (1, 8192), "large": (64, 65536)}[size]
    label = f"{row} H{h} D{d} next_n {next_n} {size}" + (", engines' form" if engines else
                                                         ", schedule given" if given else "")
    return Case(label, row,
                dict(kind="paged", S=batch * next_n, N=ctx, heads=h, dim=d, batch=batch, next_n=next_n, block_size=64,
                     schedule_given=given or engines, clean_logits=not engines), pinned)


def cases() -> list[Case]:
    """Every config the table covers. Pinned: one or two per row, the shapes the issue measured."""
    from mqa_kernels.decode.paged_ws_sm90.tuned import CUDA_TUNED as PAGED_WS
    from mqa_kernels.prefill.gluon_ws_sm90.config import tuned_shapes

    out = [_prefill("tiled", 64, 128, pinned=True), _prefill("tiled", 128, 128), _prefill("tiled", 8, 128),
           _prefill("tiled", 32, 64),
           _prefill("h64d128_sm90", 64, 128, pinned=True), _prefill("h64d128_sm90", 32, 128)]
    out += [_prefill("gluon_ws_sm90", h, d, pinned=(h, d) in ((64, 128), (32, 128))) for h, d in tuned_shapes()]
    # vLLM 0.33's prefill form: compressed logits, no clean logits (H 64 D 128: the wgmma turns, PINGPONG 2)
    out += [Case(f"gluon_ws_sm90 H{h} D128, compressed", "gluon_ws_sm90",
                 dict(kind="prefill", S=8192, N=8192, heads=h, dim=128, clean_logits=False, compressed=True), h == 64)
            for h in (32, 64)]
    for width in sorted(PAGED_WS):
        for size in ("small", "large"):
            out.append(_decode("paged_ws_sm90", width // 64, size))
            # (next_n 8 small given: a block in four parts of 128, rows reloaded per part)
            out.append(_decode("paged_ws_sm90", width // 64, size, given=True,
                               pinned=width in (64, 128) or (width, size) == (512, "small")))
            out.append(_decode("paged_ws_sm90", width // 64, size, pinned=width in (64, 128, 320) and size == "small",
                               engines=True))
    out += [_decode("paged", n, "large", pinned=n == 2) for n in (1, 2, 4)]
    out += [Case("topk rows 8192", "topk", dict(rows=8192, cols=8192, paged=False), True),
            Case("topk split 131072", "topk", dict(rows=64, cols=131072, paged=True))]
    return out


def _compile(case: Case):
    """The case's config (the row's, its overrides applied) compiled for sm90 on the case's shape."""
    from ..plan import dispatch, targets
    from ..plan.overrides import apply_overrides
    from . import compile as comp

    tgt = targets.get_target("sm90")
    if case.row == "topk":
        from mqa_kernels.topk.config import topk_config

        sh = case.shape
        cfg = topk_config(rows=sh["rows"], cols=sh["cols"], topk=2048, backend="cuda", units=tgt.units,
                          paged=sh["paged"], values=False)
        return _compile_topk(tgt, cfg, **sh)
    shape = dispatch.Shape(**case.shape)
    plan = dispatch.plan(shape, tgt, kernel=case.row, force=True)
    return comp.compile_config(tgt, apply_overrides(plan.config, dict(case.override)), shape, case.row, case.label)


def _compile_topk(tgt, cfg, rows: int, cols: int, paged: bool):
    """The top-k selection kernel as its launcher signs it (mqa_cli.api.topk.select_args) on meta tensors."""
    import torch

    from ..api.topk import select_args
    from . import compile as comp

    m = dict(device="meta")
    i32 = lambda *s: torch.empty(*s, dtype=torch.int32, **m)  # noqa: E731
    logits = torch.empty(rows, cols + 128, **m)[:, :cols]
    la = select_args(cfg, logits, i32(rows), i32(rows), i32(rows, 2048), None, paged=(i32(rows), 1, cols) if paged
                     else None, scratch=i32(max(1, cfg.schedule["scratch_elems"])), arrive=i32(rows))
    t0 = time.perf_counter()
    compiled, sig = comp.compile_with_signature(comp.kernel_fn(cfg), la, tgt.gpu_target())
    return comp.Artifact(tgt, cfg, "topk", comp._stages_of(compiled, "cuda"), comp._metadata(compiled), sig,
                         dict(la.options), None, time.perf_counter() - t0, f"{rows}x{cols}")


def measure(case: Case) -> dict:
    """One case compiled and summarised: what the tables hold."""
    from . import asm as inspect_asm

    art = _compile(case)
    d = inspect_asm.summarize(art)
    r = d["resources"]
    loops = d["tensor_loops"]
    return {"row": case.row, "kernel_name": d["kernel_name"], "registers": r["registers"],
            "spills": r["spill_stores"] + r["spill_loads"], "spill_stores": r["spill_stores"],
            "spill_loads": r["spill_loads"], "loops": [lp["instructions"] for lp in loops],
            "loop_fp32": [{k: lp["mix"].get(k, 0) for k in ("FFMA", "FMUL", "FADD")} for lp in loops],
            "loop_spills": [lp["mix"].get("STL", 0) + lp["mix"].get("LDL", 0) for lp in loops],
            "seconds": round(art.seconds, 1)}


def measure_all(selected: list[Case], progress=print) -> dict:
    from mqa_kernels.common import versions

    from . import compile as comp

    comp.prepare()
    out = {"triton": versions.installed(), "cases": {}}
    # every case compiled as it is launched: one config at two shapes is two binaries (triton specialises integer
    # arguments: == 1, multiples of 16), and triton's cache serves a repeated one
    for c in selected:
        t0 = time.perf_counter()
        try:
            out["cases"][c.label] = measure(c)
        except Exception as e:  # a case that does not compile is a result too: the table shows it
            out["cases"][c.label] = {"row": c.row, "error": f"{type(e).__name__}: {str(e).strip().splitlines()[-1:]}"}
        progress(f"{c.label}: {out['cases'][c.label]} ({time.perf_counter() - t0:.0f} s)")
    return out


def release(version: str) -> str:
    """'3.8.0' -> '3.8': the key of a release's table (versions.release parses it)."""
    from mqa_kernels.common.versions import release as parse

    return "{}.{}".format(*parse(version))


def load_tables(paths) -> dict:
    """{release '3.6': table} from stored JSON files."""
    tables = {}
    for p in paths:
        t = json.loads(Path(p).read_text())
        tables[release(t["triton"])] = t
    return tables


def loop_spills(case: dict) -> int:
    """Spill instructions (STL + LDL) inside the case's tensor-core loops (a table without the field: its spills)."""
    return sum(case["loop_spills"]) if "loop_spills" in case else case["spills"]


def worse(m: dict, b: dict, jump: float = JUMP, same_release: bool = True) -> list[str]:
    """How measurement `m` compiles worse than `b` of the same case: another count of tensor-core loops, a loop
    longer by more than `jump` (the i-th shortest against the i-th shortest: a release may lay the warpgroups' loops
    out in another order), or new spill instructions inside the loops: more than `b` (`same_release`: a table
    against a new compile), or any where `b` has none (one release against another)."""
    bad = []
    if len(m["loops"]) != len(b["loops"]):
        bad.append(f"{len(m['loops'])} tensor-core loops, against {len(b['loops'])}")
    for i, (x, y) in enumerate(zip(sorted(m["loops"]), sorted(b["loops"]))):
        if x > y * (1 + jump):
            bad.append(f"loop {i} {x} instructions, against {y}")
    if loop_spills(m) > loop_spills(b) and (same_release or not loop_spills(b)):
        bad.append(f"{loop_spills(m)} spill instructions in its tensor-core loops, against {loop_spills(b)}")
    return bad


def regressions(tables: dict, base: str = "3.6", jump: float = JUMP) -> list[str]:
    """Where a release compiles worse than `base` (`worse`), or a case does not compile."""
    bad = []
    ref = tables[base]["cases"]
    for rel, t in sorted(tables.items()):
        if rel == base:
            continue
        for label, b in ref.items():
            m = t["cases"].get(label)
            if m is None or "error" in m:
                bad.append(f"{rel} {label}: {'missing' if m is None else m['error']}")
                continue
            if "error" in b:
                continue
            bad += [f"{rel} {label}: {w} on {base}" for w in worse(m, b, jump, same_release=False)]
    return bad


def table_text(tables: dict) -> str:
    """Markdown: a line per case, per release registers / spills / loop lengths."""
    rels = sorted(tables)
    head = "| case | " + " | ".join(f"triton {r}: regs / spills / loops" for r in rels) + " |"
    lines = [head, "|---|" + "---|" * len(rels)]
    labels = list(next(iter(tables.values()))["cases"])
    for label in labels:
        cells = []
        for r in rels:
            m = tables[r]["cases"].get(label)
            if m is None:
                cells.append("–")
            elif "error" in m:
                cells.append("does not compile")
            else:
                inner = f" ({loop_spills(m)} in loops)" if m["spills"] and loop_spills(m) else ""
                cells.append(f"{m['registers']} / {m['spills']}{inner} / {', '.join(map(str, m['loops'])) or '–'}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mqa_cli.inspect.codegen", description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", help="measure and write this JSON table (the installed triton's)")
    ap.add_argument("--only", help="cases whose label contains this text")
    ap.add_argument("--pinned", action="store_true", help="only the cases tests/test_codegen.py compiles")
    ap.add_argument("--table", nargs="+", help="print the row x version table of these stored JSON tables")
    a = ap.parse_args(argv)
    if a.table:
        tables = load_tables(a.table)
        print(table_text(tables))
        bad = regressions(tables) if "3.6" in tables else []
        print("\n" + ("\n".join(bad) if bad else "no regressions against triton 3.6"))
        return 0
    selected = [c for c in cases() if (not a.only or a.only in c.label) and (c.pinned or not a.pinned)]
    res = measure_all(selected, progress=lambda s: print(s, file=sys.stderr, flush=True))
    text = json.dumps(res, indent=1) + "\n"
    if a.write:
        Path(a.write).parent.mkdir(parents=True, exist_ok=True)
        Path(a.write).write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
