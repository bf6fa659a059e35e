"""Tuned tables that can differ by triton release: where a sweep run on one release chose differently from a variant's
tuned.py (those were swept on triton 3.6.0, and the sweep scripts rewrite them whole), its choices go here, by
release, and override tuned.py's entry for the same key on that release alone.

    BY_RELEASE[variant][(major, minor)][key] = entry   # replaces tuned.py's CUDA_TUNED[key] on that release
    BY_RELEASE[variant][(major, minor)][key] = None    # removes it there (the shape takes the rule / another row)

A key is the table's top-level key ((heads, dim) for the prefill kernels, the live columns for paged_ws_sm90, the
regime for topk), so an entry replaces the whole value under it. The release is read from the installed
distribution's metadata (no triton import: dispatch and explain stay cheap).
"""
from __future__ import annotations

from functools import lru_cache


def _decode_parts_of_64(changed: set) -> dict:
    """tuned.py's decode entries under the keys `changed` names ((live columns, size class) pairs), with parts of
    MMA_N 64 in those classes and every other field and class as tuned.py has it."""
    from ..decode.paged_ws_sm90.tuned import CUDA_TUNED

    return {key: {size: {**entry, "MMA_N": 64} if (key, size) in changed else entry
                  for size, entry in CUDA_TUNED[key].items()} for key in {k for k, _ in changed}}


# Decode next_n 5-7 (live columns 320-448): tuned.py's parts of MMA_N 128 (two accumulators of 64 registers a
# thread in 128-register warpgroups) spill on 3.8 and 3.9 in the engines' form (no clean logits, the schedule given):
# 214 / 324 / 227 spill instructions on 3.8 and 336 / 384 / 682 on 3.9 where 3.6 has 62 / 17 / 48. Parts of MMA_N 64
# spill none on 3.8 and 3.9 (next_n 7: 48 on 3.9). On the H200 under 3.8 (2026-12-02, `ab configs --row paged_ws_sm90
# --variants ";MMA_N=64"`, checked against the reference): 0.652 / 0.828 / 0.852 of the table's time at B 64 C 8K,
# 0.766 / 0.860 / 0.895 at B 8 C 8K (B 64 next_n 5: 95.0 -> 61.9 µs, 3.6's table 60.9); on 3.6 MMA_N 64 is 1.03-1.12
# slower, so tuned.py keeps 128 there. The large class of next_n 6-7 takes the same config as the small (the same
# build, the same spills); timed at B 64 C 64K under 3.8 (fifth run): MMA_N 128 takes 1.566 / 1.222 / 1.206 of this
# entry's time at next_n 5 / 6 / 7 (next_n 5's large class is tuned.py's own, MMA_N 64 already). 3.9: chosen from
# the SASS (0 spills, loops 539 / 641 / 736 against 647 / 756 / 935); what 3.9 users get was timed in the fifth run
# (B 64 C 8K, schedule given: 60.2 / 69.4 / 80.0 µs), not yet against MMA_N 128 on 3.9. next_n 8's small class
# (two warpgroups of 168 registers, no spills on 3.8)
# keeps tuned.py's (MMA_N 64 there: 1.06-1.15 slower on 3.8).
#
# Next_n 8 in the large class (three warpgroups), the engines' form: tuned.py's MMA_N 128 build spills 293 instructions
# on 3.8 and 727 on 3.9 (3.6: 106; 3.9's loops 1026-1047 against 829-834); MMA_N 64 spills 98 / 122. On the H200
# under 3.8 (2026-12-02, B 64 C 64K): 716.5 against 743.7 µs (0.967), checked bitwise against the table's build; 3.9
# from the SASS alone. The small class (two warpgroups of 168 registers, no spills) keeps tuned.py's choice.
_DECODE_PARTS_64 = _decode_parts_of_64({(320, "small"), (384, "small"), (384, "large"), (448, "small"),
                                        (448, "large"), (512, "large")})

BY_RELEASE: dict = {
    "tiled": {},
    "gluon_ws_sm90": {},
    "paged_ws_sm90": {(3, 8): _DECODE_PARTS_64, (3, 9): _DECODE_PARTS_64},
    "topk": {},
}


@lru_cache(maxsize=1)
def installed_release() -> tuple | None:
    """(major, minor) of the installed triton, or None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        text = version("triton")
    except PackageNotFoundError:
        return None
    parts = []
    for piece in text.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def table(variant: str, base: dict, release: tuple | None = None) -> dict:
    """`base` (a tuned.py table) with `release`'s entries for `variant` laid over it (default: the installed
    release); `base` itself where that release has none."""
    over = BY_RELEASE.get(variant, {}).get(installed_release() if release is None else release)
    if not over:
        return base
    out = dict(base)
    for key, entry in over.items():
        if entry is None:
            out.pop(key, None)
        else:
            out[key] = entry
    return out


def source(variant: str, key, release: tuple | None = None) -> str:
    """Where `key`'s entry of `variant` comes from on `release` (default: the installed one), for explain."""
    rel = installed_release() if release is None else release
    if key in BY_RELEASE.get(variant, {}).get(rel, {}):
        return f"tuned_by_triton.py (triton {rel[0]}.{rel[1]})"
    return "tuned.py"
