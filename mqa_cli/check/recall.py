"""The indexer's selection as commands use it: `run --topk` and `verify --topk` over a problem's tensors.

Library functions live in mqa_cli.api.topk; this module adapts a problem (prefill or paged) to them and
reports recall against the float64 reference (ties at the k-th value count as hits).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..api import topk as T
from ..problem.paged_tensors import Paged
from .paged_reference import reference_paged
from .reference import reference_logits

RECALL_MEAN, RECALL_MIN = 0.999, 0.99  # goals on random inputs with fp32 logits


def topk_call(t, shape, k: int, max_seqlen_k: int = 0):
    """A zero-argument call returning (indices [S, k] int32, values [S, k]) for either form."""
    dtype = torch.bfloat16 if shape.bf16 else torch.float32
    if isinstance(t, Paged):
        return lambda: T.fp8_paged_mqa_topk(t.q, t.kv_cache, t.weights, t.context_lens, t.block_table,
                                            int(t.max_context_len), k, return_logits=True, logits_dtype=dtype)
    return lambda: T.fp8_mqa_topk(t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke, k, return_logits=True,
                                  logits_dtype=dtype, max_seqlen_k=max_seqlen_k)


@dataclass
class Recall:
    min_recall: float
    mean_recall: float
    k: int
    logits_dtype: str

    @property
    def ok(self) -> bool:
        """Bounded for fp32 logits; bf16 logits are reported (their rounding can swap near-ties)."""
        return self.logits_dtype == "bf16" or (self.min_recall >= RECALL_MIN and self.mean_recall >= RECALL_MEAN)

    def line(self) -> str:
        goal = "" if self.logits_dtype == "bf16" else f" (goals: min >= {RECALL_MIN}, mean >= {RECALL_MEAN})"
        return (f"{'pass' if self.ok else 'FAIL'}: top-{self.k} recall ({self.logits_dtype} logits) min "
                f"{self.min_recall:.4f}, mean {self.mean_recall:.4f}{goal}")

    def as_dict(self) -> dict:
        return {"k": self.k, "logits_dtype": self.logits_dtype, "min_recall": self.min_recall,
                "mean_recall": self.mean_recall, "ok": self.ok}


def recall(t, shape, k: int, indices: torch.Tensor) -> Recall:
    """Recall of `indices` against the float64 reference's top-k."""
    if isinstance(t, Paged):
        lo, mean = T.topk_recall(indices, reference_paged(t, dtype=torch.float64, clean_logits=True), k)
    else:
        lo, mean = T.topk_recall(indices, reference_logits(t, dtype=torch.float64), k, t.ks, t.ke)
    return Recall(float(lo), float(mean), k, "bf16" if shape.bf16 else "fp32")
