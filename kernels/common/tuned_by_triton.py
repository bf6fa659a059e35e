"""Tuned tables that can differ by triton release: where a sweep run on one release chose differently from a variant's
tuned.py (those were swept on triton 3.6.0, and the sweep scripts rewrite them whole), its choices go here, by
release, and override tuned.py's entry for the same key on that release alone.

    BY_RELEASE[variant][(major, minor)][key] = entry   # replaces tuned.py's CUDA_TUNED[key] on that release
    BY_RELEASE[variant][(major, minor)][key] = None    # removes it there (the shape takes the rule / another row)

A key is the table's top-level key ((heads, dim) for the prefill kernels, the live columns for paged_ws_sm90, the
regime for topk), so an entry replaces the whole value under it. The release is versions.installed_release(), the
one reader of triton's version (no triton import: dispatch and explain stay cheap).
"""
from __future__ import annotations

from .versions import installed_release


def _decode_entries(changed: dict) -> dict:
    """tuned.py's decode entries under the keys `changed` names ({(live columns, size class): fields}), with those
    fields laid over the classes it names and every other field and class as tuned.py has it."""
    from ..decode.paged_ws_sm90.tuned import CUDA_TUNED

    return {key: {size: {**entry, **changed.get((key, size), {})} for size, entry in CUDA_TUNED[key].items()}
            for key in {k for k, _ in changed}}


PARTS_64 = {"MMA_N": 64}  # tuned.py's parts of 128 at 3 math warpgroups (152 registers) spill on 3.8 / 3.9
TWO_WG = {"MATH_WG": 2, "MMA_N": 128, "AHEAD": True}  # parts of 128 at 2 math warpgroups of 232 registers, one ahead

# On the H200 (2026-12-04, docs/log/gpu-2026-12-04/, `ab configs --row paged_ws_sm90`, the engines' form, every
# result checked), PARTS_64's time over TWO_WG's at B 8 C 8K / B 64 C 8K (small class) and B 64 C 64K (large):
#   3.8: next_n 5 1.050 / 1.003 / -, next_n 6 1.116 / 1.130 / 1.116, next_n 7 1.032 / 1.001 / -;
#   3.9: next_n 5 -, next_n 6 1.066 / 1.030 / 1.045, next_n 7 1.166 / 1.067 / -.
# Where PARTS_64 stays, TWO_WG's time over it: 3.8 next_n 5 large 1.072, next_n 7 large 1.022; 3.9 next_n 5 small
# 1.012 / 0.986, next_n 7 large 1.000 (that call's A/A: 0.998-1.022). 3.9 next_n 5 large read 0.963 there and 0.999
# in an earlier run: not taken. tuned.py's MMA_N 128 took 1.2-1.6x PARTS_64's time on 3.8 (fifth run). next_n 8
# large: TWO_WG took 0.891 / 0.920 of PARTS_64's time at B 64 / 128 C 64K on 3.8 (0 spill instructions against 98;
# loops 833 / 834 against 933-940); 3.9 from the SASS alone (0 against 122; 787 / 789 against 848-851), not timed.
# next_n 5 large (tuned.py: parts of 64 already) and next_n 8 small (TWO_WG already) keep tuned.py's on both.
_DECODE_3_8 = _decode_entries({(320, "small"): TWO_WG, (384, "small"): TWO_WG,
                               (384, "large"): TWO_WG, (448, "small"): TWO_WG, (448, "large"): PARTS_64,
                               (512, "large"): TWO_WG})
_DECODE_3_9 = _decode_entries({(320, "small"): PARTS_64, (384, "small"): TWO_WG,
                               (384, "large"): TWO_WG, (448, "small"): TWO_WG, (448, "large"): PARTS_64,
                               (512, "large"): TWO_WG})

BY_RELEASE: dict = {
    "tiled": {},
    "gluon_ws_sm90": {},
    "paged_ws_sm90": {(3, 8): _DECODE_3_8, (3, 9): _DECODE_3_9},
    "topk": {},
}


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
