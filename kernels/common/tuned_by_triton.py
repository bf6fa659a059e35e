"""Tuned tables that can differ by triton release: where a sweep run on one release chose differently from a variant's
tuned.py (those were swept on triton 3.6.0, and the sweep scripts rewrite them whole), its choices go here, by
release, and override tuned.py's entry for the same key on that release alone.

    BY_RELEASE[variant][(major, minor)][key] = entry   # replaces tuned.py's CUDA_TUNED[key] on that release
    BY_RELEASE[variant][(major, minor)][key] = None    # removes it there (the shape takes the rule / another row)

A key is the table's top-level key ((heads, dim) for the prefill kernels, the live columns for paged_ws_sm90, the
regime for topk), so an entry replaces the whole value under it. Empty until the GPU sweep on 3.8 / 3.9 fills it; the
release is read from the installed distribution's metadata (no triton import: dispatch and explain stay cheap).
"""
from __future__ import annotations

from functools import lru_cache

BY_RELEASE: dict = {
    "tiled": {},
    "gluon_ws_sm90": {},
    "paged_ws_sm90": {},
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
