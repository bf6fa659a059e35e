"""The wgmma loops of a kernel's SASS, for the compile tests that check what a change did to them."""
from __future__ import annotations

import re


def tile_loops(sass: str) -> list[list[str]]:
    """The innermost loops (a backward branch and what it jumps over) that issue a wgmma: the instructions of each."""
    ins = [(int(a, 16), op) for a, op in re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
    spans = []
    for a, op in ins:
        m = re.search(r"\bBRA\b.*?0x([0-9a-f]+)", op)
        if m and int(m.group(1), 16) <= a:
            spans.append((int(m.group(1), 16), a))
    inner = [(lo, hi) for lo, hi in spans if not any(lo <= l2 and h2 <= hi and (l2, h2) != (lo, hi) for l2, h2 in spans)]
    bodies = [[op for a, op in ins if lo <= a <= hi] for lo, hi in inner]
    return [b for b in bodies if any("GMMA" in op for op in b)]
