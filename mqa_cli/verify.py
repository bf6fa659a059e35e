"""Check a kernel's logits against the reference: -inf pattern, relative error, calc_diff, repeatability.

Tolerances hold on both CPU (the interpreter computes fp8 dots exactly: ~1e-7) and Hopper
(whose fp8 MMA accumulates with reduced precision: ~1.3e-4, the same as DeepGEMM).
"""
from __future__ import annotations

from dataclasses import dataclass, asdict

import torch

from . import launch
from .reference import reference_logits

REL_TOL = 1e-3
DIFF_TOL = 1e-3


@dataclass
class Comparison:
    inf_pattern_ok: bool  # True when not clean (nothing to compare)
    rel_error: float
    calc_diff: float
    unwritten: int  # NaN poison left in live entries (or anywhere, when clean)
    rel_tol: float = REL_TOL

    @property
    def ok(self) -> bool:
        return (self.inf_pattern_ok and self.unwritten == 0 and self.rel_error < self.rel_tol
                and self.calc_diff < DIFF_TOL)


def compare(out: torch.Tensor, ref: torch.Tensor, clean_logits: bool, rel_tol: float = REL_TOL) -> Comparison:
    """Compare over the live entries (the finite ones of the reference)."""
    live = torch.isfinite(ref)
    inf_ok = True
    unwritten = int(torch.isnan(out[live]).sum())
    if clean_logits:
        inf_ok = bool(torch.equal(torch.isneginf(out), ~live))
        unwritten = int(torch.isnan(out).sum())
    x = out[live].double()
    y = ref[live].double()
    if x.numel() == 0:
        return Comparison(inf_ok, 0.0, 0.0, unwritten, rel_tol)
    x = torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)
    denom = float(y.norm())
    rel = float((x - y).norm()) / denom if denom > 0 else float((x - y).norm())
    sim = float((x * x + y * y).sum())
    diff = 1.0 - 2.0 * float((x * y).sum()) / sim if sim > 0 else 0.0
    return Comparison(inf_ok, rel, diff, unwritten, rel_tol)


@dataclass
class VerifyResult:
    label: str
    kernel: str
    comparison: Comparison
    bitwise_repeat: bool

    @property
    def ok(self) -> bool:
        return self.comparison.ok and self.bitwise_repeat

    def as_dict(self) -> dict:
        d = {"problem": self.label, "kernel": self.kernel, "ok": self.ok, "bitwise_repeat": self.bitwise_repeat}
        d.update(asdict(self.comparison))
        return d


def poisoned_run(t, cfg) -> torch.Tensor:
    """Run into a NaN-filled buffer, so any entry the kernel should write but does not shows up."""
    out = launch.alloc_logits(t.S, t.N, t.q.device)
    out.fill_(float("nan"))
    return launch.launch(t, cfg, out)


def reference_for(t, dtype=torch.float32) -> torch.Tensor:
    """The float reference of either form (dead entries -inf): paged tensors carry their own, which
    gathers kv through the block table; the output shape is [t.S, t.N] for both."""
    if hasattr(t, "reference"):
        return t.reference(dtype, clean_logits=True)
    return reference_logits(t, dtype=dtype, clean_logits=True)


def verify(t, cfg, clean_logits: bool, label: str, dtype=torch.float32, repeats: int = 2,
           rel_tol: float = REL_TOL) -> VerifyResult:
    first = poisoned_run(t, cfg)
    same = True
    for _ in range(max(0, repeats - 1)):
        again = poisoned_run(t, cfg)
        same = same and bool(torch.equal(first.nan_to_num(nan=1.5), again.nan_to_num(nan=1.5)))
    ref = reference_for(t, dtype)
    return VerifyResult(label, cfg.name, compare(first, ref, clean_logits, rel_tol), same)
