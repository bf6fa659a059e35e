"""The wgmma loops of a kernel's SASS (cuobjdump -sass): the instructions a tile costs.

On the H200 each instruction a scheduler issues in such a loop adds about a cycle to the tensor cores' time (0.7
with four warpgroups; the overlap probe in docs/EXPERIMENTS.md), so `dump` reports each loop's length and
mix, and the compile tests check what a change did to them."""
from __future__ import annotations

import re
from collections import Counter


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


def op_name(op: str) -> str:
    """The opcode of one SASS instruction without predicate or modifiers: '@!P0 LDG.E.64 R2, ...' -> 'LDG'."""
    words = op.split()
    word = words[1] if words and words[0].startswith("@") and len(words) > 1 else (words[0] if words else "")
    return word.split(".")[0]


def by_count(counts: dict) -> dict:
    """{opcode: count} most frequent first, ties by name."""
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def loop_mix(body: list[str]) -> dict:
    """{opcode: count} of one loop's instructions, most frequent first."""
    return by_count(Counter(map(op_name, body)))
