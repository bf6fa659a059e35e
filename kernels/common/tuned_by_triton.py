"""Tuned tables that can differ by triton release: where a sweep run on one release chose differently from a variant's
tuned.py (swept on triton 3.6.0; the sweep scripts rewrite it whole), the variant's own tuned_by_triton.py holds those
choices by release, and they override tuned.py's entry for the same key on that release alone:

    BY_RELEASE[(major, minor)][key] = entry   # replaces tuned.py's CUDA_TUNED[key] on that release
    BY_RELEASE[(major, minor)][key] = None    # removes it there (the shape takes the rule / another row)

A key is the table's top-level key ((heads, dim) for the prefill kernels, the live columns for paged_ws_sm90, the
regime for topk), so an entry replaces the whole value under it. This module only lays a release's entries over a
table; it imports no variant. The release is versions.installed_release(), the one reader of triton's
version (no triton import: dispatch and explain stay cheap).
"""
from __future__ import annotations

from .versions import installed_release


def table(by_release: dict, base: dict, release: tuple | None = None) -> dict:
    """`base` (a tuned.py table) with `release`'s entries of `by_release` (a variant's BY_RELEASE) laid over it
    (default: the installed release); `base` itself where that release has none."""
    over = by_release.get(installed_release() if release is None else release)
    if not over:
        return base
    out = dict(base)
    for key, entry in over.items():
        if entry is None:
            out.pop(key, None)
        else:
            out[key] = entry
    return out


def source(by_release: dict, key, variant_dir: str, release: tuple | None = None) -> str:
    """Where `key`'s entry comes from on `release` (default: the installed one), for explain: the variant's
    tuned_by_triton.py (with the release) or its tuned.py."""
    rel = installed_release() if release is None else release
    if key in by_release.get(rel, {}):
        return f"{variant_dir}/tuned_by_triton.py (triton {rel[0]}.{rel[1]})"
    return f"{variant_dir}/tuned.py"
