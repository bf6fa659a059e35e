"""Which of DeepGEMM's API generations a call is written in, told from the values it passes.

Engines call four at once (../README.md, "Inside vLLM and SGLang"): 54e2261 and sgl-deep-gemm 0.2.3.post2 put
`clean_logits, max_seqlen_k, logits_dtype` after the windows of the prefill, 0.2.5 (what vLLM 0.33 calls) puts
`max_seqlen_k, schedule_meta` there, and the 2.8.1 that vLLM 0.34 vendors `max_seqlen_k, logits_dtype,
schedule_meta`; the paged call's eighth argument is `clean_logits` in the first two, `indices` in 0.2.5 and
`logits_dtype` (then `indices`) in vLLM 0.34's 2.8.1. One signature serves all, so the type of the value in the
shared position decides:

prefill, sixth argument (the `clean_logits` parameter):
  - a bool: clean_logits (54e2261 / 0.2.3.post2); max_seqlen_k (an int >= 0), logits_dtype and schedule_meta follow.
  - an int that is not a bool (anything operator.index takes, except a tensor: reading one would sync): max_seqlen_k
    of the 0.2.5 / 2.8.1 forms. It must be > 0; the output is compressed ([S, max_seqlen_k], column c of row i = kv
    position ks[i] + c) and the columns past each row's ke - ks are not written (neither form has clean_logits; their
    callers read only [0, ke - ks)). The seventh argument then says which:
      - a torch.dtype: logits_dtype (vLLM 0.34's 2.8.1); the eighth is schedule_meta (None or a tensor).
      - None or a tensor: schedule_meta (0.2.5); logits_dtype only by keyword.
  - anything else (an int 0 or a negative count in that position, a float, None) is refused in one line.
paged, eighth argument (the `clean_logits` parameter):
  - a bool: clean_logits; None: 0.2.5's indices=None (no cleaning, as both defaults say);
  - a torch.dtype: logits_dtype (vLLM 0.34's 2.8.1, no cleaning); the ninth is indices (None);
  - a tensor: 0.2.5's varlen `indices`, refused (it needs DeepGEMM's sm100 kernels), as is a tensor ninth after a
    dtype eighth, or `indices=`; anything else refused.
A dtype in the seventh (prefill) or eighth (paged) position together with a different dtype in the logits_dtype
parameter (a second positional dtype, or logits_dtype=torch.bfloat16 by keyword) names the dtype twice and is
refused; `logits_dtype=torch.float32` by keyword beside it cannot be told from the parameter's default, so the
positional dtype is what the call gets there.

A prefill schedule_meta (0.2.3.post2, 0.2.5 and 2.8.1 take one, from get_mqa_logits_metadata, an sm100-only function)
is accepted and not read: this library's prefill kernels split the work themselves, and results do not depend on it.
Only type checks here: no tensor data is read.
"""
from __future__ import annotations

import operator

import torch

from ..errors import UserError

_SIXTH = ("the sixth argument of the prefill is clean_logits (a bool: DeepGEMM 54e2261 / 0.2.3.post2) or "
          "max_seqlen_k (an int > 0: DeepGEMM 0.2.5 and 2.8.1)")


def _count(x) -> int | None:
    """x as an int when it is one (not a bool, not a tensor), else None."""
    if isinstance(x, (bool, torch.Tensor)):
        return None
    try:
        return operator.index(x)
    except TypeError:
        return None


def _after_positional_dtype(dtype: torch.dtype, param, what: str) -> object:
    """What the logits_dtype parameter holds when `dtype` came positionally before it (2.8.1's forms): the next
    positional (`what`: schedule_meta or indices) or the parameter's default; returns it (None for the default)."""
    if param is None or isinstance(param, torch.Tensor):
        return param
    if param == torch.float32:  # the default, or logits_dtype=torch.float32 by keyword: both leave `dtype`
        return None
    if isinstance(param, torch.dtype):
        raise UserError(f"logits_dtype given twice: {dtype} by position (DeepGEMM 2.8.1 as vLLM 0.34 vendors it) and "
                        f"{param} after it; pass it once")
    raise UserError(f"with logits_dtype {dtype} by position (DeepGEMM 2.8.1 as vLLM 0.34 vendors it) the next "
                    f"argument is {what} (None or a tensor), got {type(param).__name__} {param!r}")


def prefill_options(sixth, seventh, logits_dtype, schedule_meta) -> tuple[bool, int, object]:
    """(clean, max_seqlen_k, logits_dtype) of a prefill whose kv is a (kv, scales) pair; `sixth`, `seventh` and
    `logits_dtype` are what the clean_logits, max_seqlen_k and logits_dtype parameters received."""
    if isinstance(sixth, bool):  # 54e2261 / 0.2.3.post2: clean_logits, max_seqlen_k, logits_dtype, schedule_meta
        width = _count(seventh)
        if width is None or width < 0:
            hint = (" (a dtype goes seventh only after max_seqlen_k sixth, as vLLM 0.34's DeepGEMM takes it)"
                    if isinstance(seventh, torch.dtype) else "")
            raise UserError(f"max_seqlen_k must be an int >= 0, got {seventh!r}{hint}")
        check_prefill_schedule(schedule_meta)
        return sixth, width, logits_dtype
    width = _count(sixth)
    if width is None:
        raise UserError(f"{_SIXTH}; got {type(sixth).__name__} {sixth!r}")
    if width <= 0:
        raise UserError(f"{_SIXTH}; got the int {width}: pass clean_logits as True/False, or max_seqlen_k > 0")
    if isinstance(seventh, torch.dtype):  # 2.8.1 (vLLM 0.34): max_seqlen_k, logits_dtype, schedule_meta
        eighth = _after_positional_dtype(seventh, logits_dtype, "schedule_meta")
        if eighth is not None and schedule_meta is not None:
            raise UserError("schedule_meta given twice: eighth by position and by keyword; pass it once")
        check_prefill_schedule(schedule_meta if eighth is None else eighth)
        return False, width, seventh
    # 0.2.5: (q, kv, weights, ks, ke, max_seqlen_k, schedule_meta=None); the seventh parameter's default 0 is no value
    if not (seventh is None or isinstance(seventh, torch.Tensor) or (_count(seventh) == 0)):
        raise UserError(f"with max_seqlen_k as the sixth argument (DeepGEMM 0.2.5 / 2.8.1) the seventh is "
                        f"schedule_meta (None or a tensor: 0.2.5) or logits_dtype (a torch.dtype: 2.8.1), got "
                        f"{type(seventh).__name__} {seventh!r}")
    check_prefill_schedule(seventh if isinstance(seventh, torch.Tensor) else schedule_meta)
    return False, width, logits_dtype


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


_VARLEN = ("indices (varlen paged decode, DeepGEMM 0.2.5 / 2.8.1) needs DeepGEMM's sm100 kernels; pass next_n rows "
           "per sequence (q [B, next_n, H, D]) and indices=None")


def paged_options(eighth, logits_dtype, indices) -> tuple[bool, object]:
    """(clean, logits_dtype) of a paged call; `eighth` and `logits_dtype` are what the clean_logits and logits_dtype
    parameters received."""
    if isinstance(eighth, bool) and indices is None:
        return eighth, logits_dtype
    if eighth is None and indices is None:  # 0.2.5: (..., max_context_len, indices=None)
        return False, logits_dtype
    if isinstance(eighth, torch.dtype):  # 2.8.1 (vLLM 0.34): (..., max_context_len, logits_dtype, indices=None)
        if _after_positional_dtype(eighth, logits_dtype, "indices") is not None or indices is not None:
            raise UserError(_VARLEN)
        return False, eighth
    if isinstance(eighth, torch.Tensor) or indices is not None:
        raise UserError(_VARLEN)
    raise UserError(f"the eighth argument of the paged call is clean_logits (a bool: DeepGEMM 54e2261 / 0.2.3.post2), "
                    f"indices (DeepGEMM 0.2.5) or logits_dtype (a torch.dtype: DeepGEMM 2.8.1 as vLLM 0.34 vendors "
                    f"it), got {type(eighth).__name__} {eighth!r}")
