"""The Gluon prefill kernel's table (kernels/prefill/gluon_ws_sm90/tuned.py), keyed by (heads, dim), has two writers:
sweep_gluon_prefill.py (the warpgroup layout at H 32 and 64, D 128, timed on the seed shapes) and sweep_heads.py
(every other head count and dim, timed on 1x8192 causal against the portable kernel; an entry there is also
what makes dispatch give the shape to this kernel). Each rewrites only the keys it swept and keeps the others'.

GLUON_WS_TABLE=FILE writes elsewhere (the CPU tests rebuild tables from a run's files that way).
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # sweep_common.py beside this file
import sweep_common  # noqa: E402

OWN_LAYOUT = {(32, 128), (64, 128)}  # the keys sweep_gluon_prefill.py owns; sweep_heads.py owns the rest


def path() -> Path:
    return Path(os.environ.get("GLUON_WS_TABLE") or ROOT / "kernels" / "prefill" / "gluon_ws_sm90" / "tuned.py")


def read(p: Path) -> tuple[dict, dict]:
    """(entries, comments) of the table at p: comments are the text after '#' on each entry's line."""
    table, _ = sweep_common.load_table(p)
    if not p.exists():
        return {}, {}
    comments = {}
    for line in p.read_text().splitlines():
        s = line.strip()
        if s.startswith("(") and "#" in s:
            key = s[:s.index(":")]
            try:
                comments[tuple(int(x) for x in key.strip("()").split(","))] = s[s.index("#") + 1:].strip()
            except ValueError:
                continue
    return table, comments


def write(entries: dict, device: str, say) -> Path:
    """Merge entries {(H, D): (entry dict, comment) or None (drop the key)} into the table and write it."""
    import triton

    from mqa_kernels.prefill.gluon_ws_sm90.config import gluon_ws_sm90_config

    p = path()
    table, comments = read(p)
    for key, value in entries.items():
        if value is None:
            table.pop(key, None)
            comments.pop(key, None)
        else:
            table[key], comments[key] = value
    for (H, D), e in table.items():  # a table the config refuses is never written
        gluon_ws_sm90_config(heads=H, dim=D, S=4096, N=4096, clean=True, groups=tuple(e["groups"]),
                             stages=e["stages"], q_in_lanes=e.get("q_in_lanes"), n=e.get("n"),
                             splits=e.get("splits"), tma_store=e.get("tma_store"), chains=e.get("chains"))
    doc = ["The H200 (sm90) configs of the Gluon prefill kernel by (heads, dim); a shape listed here is one dispatch",
           "gives this kernel. Two writers, each rewriting only the keys it swept (tools/tune/gluon_table.py):",
           "`python3 tools/tune/sweep_gluon_prefill.py --write-table` (H 32 and 64 at D 128: warpgroup layout on the",
           "seed shapes, kept when its mean time relative to (2, 1) st4 query-major is below 0.98) and",
           "`python3 tools/tune/sweep_heads.py --write-table` (every other shape: 1x8192 causal, clean, kept when it",
           "beats the fastest portable config by more than 3 %). Every candidate was checked against the float32",
           "reference before it was timed (a CUDA-graph replay per sample after an L2 flush, median; runs before",
           "2026-11-30 17:30 UTC timed the call itself with do_bench). The comment on each line says which run.",
           f'Last written on {device}, {time.strftime("%Y-%m-%d")}, triton {triton.__version__}.']
    body = ["CUDA_TUNED = {"] + [f"    ({H}, {D}): {e!r},  # {comments.get((H, D), '')}"
                                 for (H, D), e in sorted(table.items())] + ["}"]
    sweep_common.write_table(p, doc, body, say, copy_as=None if os.environ.get("GLUON_WS_TABLE") else "gluon_ws_tuned.py")
    return p
