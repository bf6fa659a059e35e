"""Problem and result files: safetensors or .pt (loaded with weights_only=True), validated on load.

Every failure is one UserError naming the file and what is wrong; nothing is overwritten
unless asked (force=True).
"""
from __future__ import annotations

import os
from pathlib import Path

from .errors import UserError


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


def _suffix(path: Path) -> str:
    s = path.suffix.lower()
    if s not in (".safetensors", ".pt", ".pth"):
        raise UserError(f"{path}: unknown file type {s or '(none)'}; use .safetensors or .pt")
    return s


def load_tensors(path: str | os.PathLike, keys) -> dict:
    """The named tensors from a file; a missing file, corrupt file or missing key is one clear error."""
    import torch

    p = Path(path)
    if not p.is_file():
        raise UserError(f"{p}: no such file")
    kind = _suffix(p)
    try:
        if kind == ".safetensors":
            from safetensors.torch import load_file

            data = load_file(str(p))
        else:
            data = torch.load(str(p), map_location="cpu", weights_only=True)
    except Exception as e:  # the loaders raise many types for a corrupt file; report it in one line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"{p}: cannot read as {kind[1:]}: {first}") from None
    if not isinstance(data, dict):
        raise UserError(f"{p}: expected a dict of tensors, found {type(data).__name__}")
    missing = [k for k in keys if k not in data]
    if missing:
        raise UserError(f"{p}: missing key(s) {', '.join(missing)} (need {', '.join(keys)})")
    for k in keys:
        if not isinstance(data[k], torch.Tensor):
            raise UserError(f"{p}: {k} is not a tensor")
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
        import torch

        data = torch.load(str(p), map_location="cpu", weights_only=True)
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


def load_prefill(path):
    from .tensors import KEYS, Prefill, validate

    t = Prefill(**load_tensors(path, KEYS))
    validate(t)
    return t
