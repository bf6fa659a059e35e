"""Problem and result files: safetensors or .pt (loaded with weights_only=True), validated on load.

Every failure is one UserError naming the file and what is wrong; nothing is overwritten
unless asked (force=True). A file's tensors are sized before anything reads them: a small file can hold a huge
stride-0 view, which every check or copy would lay out in full.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import UserError


def check_writable(path: str | os.PathLike, force: bool) -> Path:
    """Fail before any work if `path` exists (and not force) or its folder cannot be written."""
    p = Path(path)
    if p.exists() and not force:
        raise UserError(f"{p} exists; pass --force to overwrite it")
    if p.exists() and p.is_dir():
        raise UserError(f"{p} is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UserError(f"cannot write {p}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise UserError(f"cannot write {p}: folder {parent} is not writable")
    return p


def check_tensor_file(path: str | os.PathLike, force: bool) -> Path:
    """check_writable, and a suffix save_tensors can write: before any work, so a bad name costs no run."""
    p = check_writable(path, force)
    _suffix(p)
    return p


def check_dump_dir(path: str | os.PathLike) -> Path:
    """A folder that is or can become a directory: refused when it, or the nearest part of it that exists, is not
    a directory (a file where the dump would go)."""
    p = Path(path)
    q = p
    while not q.exists() and q != q.parent:
        q = q.parent
    if q.exists() and not q.is_dir():
        raise UserError(f"--dump-dir {p}: {q} is a file, not a folder")
    return p


def _suffix(path: Path) -> str:
    s = path.suffix.lower()
    if s not in (".safetensors", ".pt", ".pth"):
        raise UserError(f"{path}: unknown file type {s or '(none)'}; use .safetensors or .pt")
    return s


def _read(p: Path, kind: str):
    """The file's contents, or one UserError line saying why not. torch.load warns on stderr (several lines) about a
    pickle protocol other than its own 2, then often fails: its warnings are caught here, never printed, and the
    protocol they name goes into the error; the loaders' multi-line messages are cut to their cause."""
    import warnings

    import torch

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if kind == ".safetensors":
                from safetensors.torch import load_file

                return load_file(str(p))
            return torch.load(str(p), map_location="cpu", weights_only=True)
        except Exception as e:  # the loaders raise many types for a corrupt file; report it in one line
            raise UserError(f"{p}: cannot read as {kind[1:]}: {_cause(e, caught)}") from None


def _cause(e: Exception, caught: list) -> str:
    """One line from a loader's exception and the warnings it gave before it."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip()
    unpickler = "WeightsUnpickler error:" in text
    lines = [line.strip() for line in text.split("WeightsUnpickler error:", 1)[-1].splitlines() if line.strip()]
    why = lines[0].split(". ")[0] if lines else type(e).__name__
    if unpickler:
        why = f"torch's safe loader (weights_only) refused it: {why}"
    protocols = sorted({m.group(1) for w in caught for m in [re.search(r"pickle protocol (\d+)", str(w.message))] if m})
    if protocols:
        why += f" (the file uses pickle protocol {', '.join(protocols)})"
    if unpickler or protocols:
        why += "; save a dict of tensors with torch.save's defaults (pickle protocol 2) or as .safetensors"
    return why


def load_tensors(path: str | os.PathLike, keys, max_bytes: int | None = None) -> dict:
    """The named tensors from a file; a missing file, corrupt file or missing key is one clear error, and so are
    tensors that would take more than max_bytes (default: the host's memory) once laid out."""
    import torch

    p = Path(path)
    if not p.is_file():
        raise UserError(f"{p}: no such file")
    data = _read(p, _suffix(p))
    if not isinstance(data, dict):
        raise UserError(f"{p}: expected a dict of tensors, found {type(data).__name__}")
    missing = [k for k in keys if k not in data]
    if missing:
        raise UserError(f"{p}: missing key(s) {', '.join(missing)} (need {', '.join(keys)})")
    for k in keys:
        if not isinstance(data[k], torch.Tensor):
            raise UserError(f"{p}: {k} is not a tensor")
    sizes = {k: data[k].numel() * data[k].element_size() for k in keys}
    total = sum(sizes.values())
    if max_bytes is None:
        from .tensors import memory_of

        limit, where = memory_of("cpu"), "host memory"
    else:
        limit, where = max_bytes, "--max-bytes"
    if limit is not None and total > limit:
        big = ", ".join(f"{k} {v:,}" for k, v in sorted(sizes.items(), key=lambda kv: -kv[1])[:3])
        raise UserError(f"{p}: its tensors need {total:,} bytes laid out ({big}), more than the {limit:,} bytes of "
                        f"{where}")
    return {k: data[k] for k in keys}


def file_keys(path: str | os.PathLike) -> set:
    """The keys a problem file holds (empty when it cannot be read: load_tensors then says why)."""
    p = Path(path)
    if not p.is_file() or p.suffix.lower() not in (".safetensors", ".pt", ".pth"):
        return set()
    try:
        if p.suffix.lower() == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(p), framework="pt") as f:
                return set(f.keys())
        data = _read(p, ".pt")
        return set(data) if isinstance(data, dict) else set()
    except Exception:  # unreadable here means unreadable in load_tensors, which reports it in one line
        return set()


def save_tensors(path: str | os.PathLike, tensors: dict, force: bool = False) -> Path:
    import torch

    p = check_writable(path, force)
    kind = _suffix(p)
    cpu = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    if kind == ".safetensors":
        from safetensors.torch import save_file

        save_file(cpu, str(p))
    else:
        torch.save(cpu, str(p))
    return p


def load_prefill(path, max_bytes: int | None = None):
    from .tensors import KEYS, Prefill, check_prefill, validate_values

    t = Prefill(**load_tensors(path, KEYS, max_bytes))
    try:  # every check, data included
        check_prefill(t)
        validate_values(t)
    except UserError as e:
        raise UserError(f"{path}: {e}") from None
    return t
