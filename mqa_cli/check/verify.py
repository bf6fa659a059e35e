"""Check a kernel's logits against the reference: -inf pattern, relative error, calc_diff, repeatability.

Tolerances hold on both CPU (the interpreter computes fp8 dots exactly: ~1e-7) and Hopper
(whose fp8 MMA accumulates with reduced precision: ~1.3e-4, the same as DeepGEMM).
"""
from __future__ import annotations

from dataclasses import dataclass, asdict

import torch

from ..launch import families as launchers
from ..problem.paged_tensors import Paged
from .paged_reference import reference_paged
from .reference import compress_logits, reference_logits

REL_TOL = 1e-3
BF16_REL_TOL = 8e-3  # bf16 logits round to 8 significant bits: ~2^-9 relative per entry
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

    def line(self) -> str:
        return (f"{'pass' if self.ok else 'FAIL'}: -inf pattern {'exact' if self.inf_pattern_ok else 'WRONG'}, "
                f"rel err {self.rel_error:.2e} (< {self.rel_tol:g}), calc_diff {self.calc_diff:.2e}, "
                f"unwritten {self.unwritten}")

    def as_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


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


def poisoned_run(t, cfg, max_seqlen_k: int = 0) -> torch.Tensor:
    """Run into a NaN-filled buffer, so any entry the kernel should write but does not shows up."""
    out = launchers.output_for(t, cfg, max_seqlen_k)
    out.fill_(float("nan"))
    return launchers.run(t, cfg, out, max_seqlen_k=max_seqlen_k)


def verify(t, cfg, clean_logits: bool, label: str, dtype=torch.float32, repeats: int = 2,
           rel_tol: float = REL_TOL, max_seqlen_k: int = 0) -> VerifyResult:
    first = poisoned_run(t, cfg, max_seqlen_k)
    same = True
    for _ in range(max(0, repeats - 1)):
        again = poisoned_run(t, cfg, max_seqlen_k)
        same = same and bool(torch.equal(first.nan_to_num(nan=1.5), again.nan_to_num(nan=1.5)))
    return VerifyResult(label, cfg.name, check_output(first, t, clean_logits, max_seqlen_k, dtype, rel_tol), same)


def check_output(out: torch.Tensor, t, clean_logits: bool, max_seqlen_k: int = 0, dtype=torch.float32,
                 rel_tol: float = REL_TOL) -> Comparison:
    """An output (`run --verify`: the run's own) against the float reference of either form on the same tensors,
    dead entries -inf: [t.S, t.N], or [t.S, max_seqlen_k] compressed."""
    if out.dtype == torch.bfloat16:
        rel_tol = max(rel_tol, BF16_REL_TOL)
    if isinstance(t, Paged):
        ref = reference_paged(t, dtype=dtype, clean_logits=True)
    else:
        ref = reference_logits(t, dtype=dtype, clean_logits=True)
        ref = compress_logits(ref, t.ks, t.ke, max_seqlen_k) if max_seqlen_k else ref
    return compare(out.float(), ref, clean_logits, rel_tol)
