"""The SASS instructions where warps waited most, from Nsight Compute's source page exported as CSV
(`ncu -i REPORT --page source --csv --print-source sass`; tools/h200_check.sh, step `ncusrc`): address, share of
all warp-state samples, the stall reasons that hold most of them, and the instruction. Column names are looked up
by what they contain, so the script reads the export of any recent Nsight Compute.

    python3 tools/ncu_hot.py SOURCE.csv [N]
"""
from __future__ import annotations

import csv
import sys


def _num(x: str) -> float:
    try:
        return float(x.replace(",", "")) if x not in ("", "N/A") else 0.0
    except ValueError:
        return 0.0


def _pick(cols: list[str], *words: str) -> str | None:
    for c in cols:
        if all(w.lower() in c.lower() for w in words):
            return c
    return None


def main(argv: list[str]) -> int:
    path, top = argv[0], int(argv[1]) if len(argv) > 1 else 40
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    start = next((i for i, ln in enumerate(lines) if "Source" in ln and "Address" in ln), None)
    if start is None:
        print(f"{path}: no header with Address and Source columns (first line: {lines[0][:200] if lines else ''})")
        return 1
    rows = list(csv.DictReader(lines[start:]))
    cols = list(rows[0].keys()) if rows else []
    samples = _pick(cols, "Sampling", "All") or _pick(cols, "Samples")
    addr, src = _pick(cols, "Address"), _pick(cols, "Source")
    if samples is None:
        print(f"no sample column among: {cols}")
        return 1
    reasons = [c for c in cols if c.lower().startswith("stall_") or ("stall" in c.lower() and c != samples
                                                                          and "Sampling" not in c)]
    total = sum(_num(r[samples]) for r in rows) or 1.0
    print(f"{len(rows)} instructions, {total:.0f} warp-state samples; the {top} with most:")
    for r in sorted(rows, key=lambda r: -_num(r[samples]))[:top]:
        why = sorted(((c, _num(r[c])) for c in reasons), key=lambda kv: -kv[1])[:3]
        why_s = " ".join(f"{c.replace('stall_', '')}={v:.0f}" for c, v in why if v > 0)
        print(f"{r.get(addr, ''):>8}  {_num(r[samples]) / total * 100:5.1f} %  {why_s:<48}  {r.get(src, '').strip()[:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
