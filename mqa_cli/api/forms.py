"""Which of DeepGEMM's three API generations a call is written in, told from the values it passes.

Engines call all three at once (../README.md, "Inside vLLM and SGLang"): 54e2261 and sgl-deep-gemm 0.2.3.post2
put `clean_logits, max_seqlen_k, logits_dtype` after the windows of the prefill, 0.2.5 (what vLLM 0.33 calls) puts
`max_seqlen_k, schedule_meta` there; the paged call's eighth argument is `clean_logits` in the first two and
`indices` in 0.2.5. One signature serves all, so the type of the value in the shared position decides:

prefill, sixth argument (the `clean_logits` parameter):
  - a bool: clean_logits (54e2261 / 0.2.3.post2); max_seqlen_k (an int >= 0), logits_dtype and schedule_meta follow.
  - an int that is not a bool (anything operator.index takes, except a tensor: reading one would sync): max_seqlen_k
    of the 0.2.5 form. It must be > 0; the output is compressed ([S, max_seqlen_k], column c of row i = kv position
    ks[i] + c) and the columns past each row's ke - ks are not written (0.2.5 has no clean_logits; its callers read
    only [0, ke - ks)). The seventh argument is then schedule_meta (None or a tensor).
  - anything else (an int 0 or a negative count in that position, a float, None) is refused in one line.
paged, eighth argument (the `clean_logits` parameter):
  - a bool: clean_logits; None: 0.2.5's indices=None (no cleaning, as both defaults say);
  - a tensor: 0.2.5's varlen `indices`, refused (it needs DeepGEMM's sm100 kernels); anything else refused.

A prefill schedule_meta (0.2.3.post2 and 0.2.5 take one, from get_mqa_logits_metadata, an sm100-only function) is
accepted and not read: this library's prefill kernels split the work themselves, and results do not depend on it.
Only type checks here: no tensor data is read.
"""
from __future__ import annotations

import operator

import torch

from ..errors import UserError

_SIXTH = ("the sixth argument of the prefill is clean_logits (a bool: DeepGEMM 54e2261 / 0.2.3.post2) or "
          "max_seqlen_k (an int > 0: DeepGEMM 0.2.5)")


def _count(x) -> int | None:
    """x as an int when it is one (not a bool, not a tensor), else None."""
    if isinstance(x, (bool, torch.Tensor)):
        return None
    try:
        return operator.index(x)
    except TypeError:
        return None


def prefill_options(sixth, seventh, schedule_meta) -> tuple[bool, int]:
    """(clean, max_seqlen_k) of a prefill whose kv is a (kv, scales) pair; `sixth` and `seventh` are what the
    clean_logits and max_seqlen_k parameters received."""
    if isinstance(sixth, bool):  # 54e2261 / 0.2.3.post2: clean_logits, max_seqlen_k, logits_dtype, schedule_meta
        width = _count(seventh)
        if width is None or width < 0:
            raise UserError(f"max_seqlen_k must be an int >= 0, got {seventh!r}")
        check_prefill_schedule(schedule_meta)
        return sixth, width
    width = _count(sixth)
    if width is None:
        raise UserError(f"{_SIXTH}; got {type(sixth).__name__} {sixth!r}")
    if width <= 0:
        raise UserError(f"{_SIXTH}; got the int {width}: pass clean_logits as True/False, or max_seqlen_k > 0")
    # 0.2.5: (q, kv, weights, ks, ke, max_seqlen_k, schedule_meta=None); the seventh parameter's default 0 is no value
    if not (seventh is None or isinstance(seventh, torch.Tensor) or (_count(seventh) == 0)):
        raise UserError(f"with max_seqlen_k as the sixth argument (DeepGEMM 0.2.5) the seventh is schedule_meta "
                        f"(None or a tensor), got {type(seventh).__name__} {seventh!r}")
    check_prefill_schedule(seventh if isinstance(seventh, torch.Tensor) else schedule_meta)
    return False, width


def explicit_options(seventh) -> int:
    """max_seqlen_k of the project's explicit form called through fp8_mqa_logits (six tensors positionally): the
    seventh positional is max_seqlen_k there; options such as clean_logits go by keyword to mqa_logits."""
    width = _count(seventh)
    if width is None or width < 0:
        raise UserError(f"fp8_mqa_logits(q, kv, kv_scales, weights, ks, ke, ...) takes max_seqlen_k (an int >= 0) "
                        f"seventh, got {seventh!r}; pass options by keyword to mqa_logits(..., clean_logits=...)")
    return width


def check_prefill_schedule(schedule_meta) -> None:
    """A prefill schedule is accepted (None or a tensor) and not read (see the module docstring)."""
    if schedule_meta is not None and not isinstance(schedule_meta, torch.Tensor):
        raise UserError(f"schedule_meta of the prefill must be None or a tensor, got {type(schedule_meta).__name__}")


def paged_clean(eighth, indices) -> bool:
    """clean_logits of a paged call; `eighth` is what the clean_logits parameter received."""
    if isinstance(eighth, bool) and indices is None:
        return eighth
    if eighth is None and indices is None:  # 0.2.5: (..., max_context_len, indices=None)
        return False
    if isinstance(eighth, torch.Tensor) or indices is not None:
        raise UserError("indices (varlen paged decode, DeepGEMM 0.2.5) needs DeepGEMM's sm100 kernels; pass next_n "
                        "rows per sequence (q [B, next_n, H, D]) and indices=None")
    raise UserError(f"the eighth argument of the paged call is clean_logits (a bool: DeepGEMM 54e2261 / 0.2.3.post2) "
                    f"or indices (DeepGEMM 0.2.5), got {type(eighth).__name__} {eighth!r}")
