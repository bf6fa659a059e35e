"""The library API: DeepGEMM's entry points (names, argument order, defaults), dispatched through the same
table as the CLI.

Hot path: dtype, shape, device and stride checks only (no tensor data read, no sync), a cached plan per
shape, one output allocation, one launch. So every call can be captured in a CUDA graph. A repeated call
with the same tensor metadata and options skips even those (mqa_cli.api.fastpath: they would decide the same).
Value checks (window ranges, NaN or inf in any input, block-table bounds) read data and sync: they run only when
asked, with `check_values=True` or the environment variable MQA_LOGITS_CHECK=1, on every call asked.
"""
from __future__ import annotations

import os

import torch

from ..errors import UserError
from ..launch import families as launchers
from ..launch.schedule import get_paged_mqa_logits_metadata
from ..plan import dispatch, targets
from ..problem.paged_tensors import Paged, check_paged, validate_paged_values
from ..problem.tensors import FP8_NAMES, Prefill, check_prefill, scales_1d, validate_values
from . import fastpath, forms, sms

LOGITS_DTYPES = (torch.float32, torch.bfloat16)

# (shape key, device, sms setting) -> the plan's final KernelConfig: chosen once per shape and target, never per
# call; past MAX_PLANS keys (an engine uses a few dozen: one per batch size and S it sees) the table starts over.
_PLANS: dict = {}
MAX_PLANS = 1024


def _checking(check_values: bool) -> bool:
    return check_values or os.environ.get("MQA_LOGITS_CHECK") == "1"


def target_for(device: torch.device) -> targets.Target:
    """The target a call on `device` plans for, with set_num_sms's count as its units (the programs of the
    persistent kernels) when one is set."""
    return sms.limited(targets.TARGETS["cpu"] if device.type == "cpu" else targets.detect(), sms.setting())


def _config(key: tuple, shape_fn, device: torch.device):
    """The plan's config for this key (dispatch and the decisions after it, mqa_cli.plan), planned on a miss."""
    cfg = _PLANS.get(key)
    if cfg is None:
        if len(_PLANS) >= MAX_PLANS:
            _PLANS.clear()
        cfg = _PLANS[key] = dispatch.plan(shape_fn(), target_for(device)).config
    return cfg


def _logits_dtype(logits_dtype) -> bool:
    """True for bf16; refuses anything but float32 and bfloat16."""
    if logits_dtype not in LOGITS_DTYPES:
        raise UserError(f"logits_dtype must be torch.float32 or torch.bfloat16, got {logits_dtype}")
    return logits_dtype == torch.bfloat16


def _refuse_mx(kv_scales, weights) -> None:
    """MX inputs (DeepGEMM 0.2.5 on sm100: int32 UE8M0 scales, bf16 weights) are named, not misread."""
    if (isinstance(kv_scales, torch.Tensor) and kv_scales.dtype == torch.int32) or \
            (isinstance(weights, torch.Tensor) and weights.dtype == torch.bfloat16):
        raise UserError("MX inputs (int32 UE8M0 scales, bf16 weights) need DeepGEMM's sm100 kernels; this library "
                        "takes fp32 kv scales and fp32 weights")


def _kv_pair(kv) -> tuple:
    if not isinstance(kv, (tuple, list)) or len(kv) != 2:
        raise UserError("kv must be a (kv_fp8, kv_scales) pair, or use the explicit form "
                        "mqa_logits(q, kv, kv_scales, weights, ks, ke, clean_logits=...)")
    return kv[0], kv[1]


def fp8_mqa_logits(q: torch.Tensor, kv, weights: torch.Tensor, cu_seq_len_k_start: torch.Tensor,
                   cu_seq_len_k_end: torch.Tensor, clean_logits=True, max_seqlen_k=0,
                   logits_dtype: torch.dtype = torch.float32, schedule_meta=None, *,
                   check_values: bool = False) -> torch.Tensor:
    """logits[i, j] = sum_h weights[i, h] * relu(q[i, h] . kv[j]) * kv_scales[j] for ks[i] <= j < ke[i].

    q fp8 e4m3 [S, H, D]; kv = (kv_fp8 [N, D], kv_scales fp32 [N] or [N, 1]); weights fp32 [S, H];
    cu_seq_len_k_start / cu_seq_len_k_end (ks, ke) int32 [S]. Any row slices and strided 1-D views are
    honoured; only the innermost (D, head) dimensions must be contiguous.
    The project's explicit form is `mqa_logits(q, kv, kv_scales, weights, ks, ke, clean_logits=...)`
    (six tensors positionally also work here, with the defaults).

    Every DeepGEMM generation's form binds; the sixth argument's type says which (mqa_cli.api.forms):
    - a bool is clean_logits (54e2261, sgl-deep-gemm 0.2.3.post2): then max_seqlen_k, logits_dtype, schedule_meta.
      clean_logits defaults to True (54e2261's default; callers of 0.2.3.post2, whose default is False, pass it).
    - an int > 0 is max_seqlen_k (DeepGEMM 0.2.5, vLLM 0.33's six positionals): compressed output, the columns
      past each row's ke - ks not written; the seventh argument is then schedule_meta, or, when it is a
      torch.dtype, logits_dtype with schedule_meta eighth (DeepGEMM 2.8.1 as vLLM 0.34 vendors it).
    - anything else there (int 0, a negative, a float, None) is refused in one line.
    schedule_meta (sm100's prefill schedule) is accepted, None or a tensor, and not read.

    Returns an [S, N] view of a row-padded buffer (row stride a multiple of 1024 bytes: 256 fp32 or 512 bf16
    elements, as DeepGEMM pads) in logits_dtype (torch.float32 or torch.bfloat16): -inf outside [ks, ke) when
    clean_logits, else unwritten there. max_seqlen_k > 0 returns compressed logits [S, max_seqlen_k]: column c of
    row i is logit(i, ks[i] + c) for c < ke[i] - ks[i]; the columns past that are -inf when clean_logits, else
    unwritten.
    """
    if isinstance(kv, torch.Tensor) and isinstance(clean_logits, torch.Tensor):
        # the explicit form called positionally: (q, kv, kv_scales, weights, ks, ke)
        kv_fp8, kv_scales, weights, ks, ke = kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits
        clean, width = True, forms.explicit_options(max_seqlen_k)
        forms.check_prefill_schedule(schedule_meta)
    else:
        (kv_fp8, kv_scales), ks, ke = _kv_pair(kv), cu_seq_len_k_start, cu_seq_len_k_end
        clean, width, logits_dtype = forms.prefill_options(clean_logits, max_seqlen_k, logits_dtype, schedule_meta)
    _refuse_mx(kv_scales, weights)
    return _prefill(q, kv_fp8, kv_scales, weights, ks, ke, clean, width, logits_dtype, check_values)


def mqa_logits(q: torch.Tensor, kv: torch.Tensor, kv_scales: torch.Tensor, weights: torch.Tensor, ks: torch.Tensor,
               ke: torch.Tensor, *, clean_logits: bool = True, max_seqlen_k: int = 0,
               logits_dtype: torch.dtype = torch.float32, check_values: bool = False) -> torch.Tensor:
    """The explicit form of fp8_mqa_logits: kv and its scales as separate tensors, options by keyword."""
    return _prefill(q, kv, kv_scales, weights, ks, ke, bool(clean_logits), int(max_seqlen_k), logits_dtype,
                    check_values)


def fp8_fp4_mqa_logits(q, kv, weights: torch.Tensor, cu_seq_len_k_start: torch.Tensor,
                       cu_seq_len_k_end: torch.Tensor, clean_logits=True, max_seqlen_k=0,
                       logits_dtype: torch.dtype = torch.float32, schedule_meta=None, *,
                       check_values: bool = False) -> torch.Tensor:
    """DeepGEMM's combined entry: q = (q_fp8, q_scale or None), kv = (kv_fp8, kv_scales). fp8 inputs run as
    fp8_mqa_logits, with the same rule for the sixth argument (a bool: clean_logits; an int > 0: max_seqlen_k of
    DeepGEMM 0.2.5 / 2.8.1, compressed output, then schedule_meta, or a torch.dtype: logits_dtype, then
    schedule_meta); fp4 and MX inputs (a q scale, packed fp4 kv, int32
    scales, bf16 weights) are refused on this library's targets."""
    q_fp8, q_scale = q if isinstance(q, (tuple, list)) else (q, None)
    kv_fp8, kv_scales = _kv_pair(kv)
    if q_scale is not None or kv_fp8.dtype not in FP8_NAMES or kv_fp8.shape[-1] * 2 == q_fp8.shape[-1]:
        raise UserError("fp4 inputs (a q scale, or packed fp4 kv) need a GPU with fp4 MMA (sm100); this library "
                        "runs fp8 e4m3 q and kv: pass q as (q_fp8, None) and kv as (kv_fp8, kv_scales)")
    _refuse_mx(kv_scales, weights)
    clean, width, logits_dtype = forms.prefill_options(clean_logits, max_seqlen_k, logits_dtype, schedule_meta)
    return _prefill(q_fp8, kv_fp8, kv_scales, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean, width,
                    logits_dtype, check_values)


def _prefill(q, kv, kv_scales, weights, ks, ke, clean: bool, max_seqlen_k: int, logits_dtype,
             check_values: bool) -> torch.Tensor:
    bf16 = _logits_dtype(logits_dtype)
    if max_seqlen_k < 0:
        raise UserError(f"max_seqlen_k must be >= 0, got {max_seqlen_k}")
    ins = (q, kv, kv_scales, weights, ks, ke)
    sig = fastpath.signature(ins, ("prefill", clean, max_seqlen_k, bf16, sms.setting()))
    entry = fastpath.get(sig)
    if entry is not None:  # this signature passed the checks below before: only the value checks remain
        if _checking(check_values):
            validate_values(Prefill(q, kv, scales_1d(kv_scales), weights, ks, ke), max_seqlen_k)
        return entry.launch(ins)
    t = Prefill(q, kv, scales_1d(kv_scales), weights, ks, ke)
    check_prefill(t)
    if _checking(check_values):
        validate_values(t, max_seqlen_k)
    S, H, D = q.shape
    N = kv.shape[0]
    compressed = max_seqlen_k > 0
    key = ("prefill", S, N, H, D, clean, q.dtype, compressed, bf16, q.device, sms.setting())
    cfg = _config(key, lambda: dispatch.Shape("prefill", S, N, H, D, clean, FP8_NAMES[q.dtype],
                                              compressed=compressed, bf16=bf16), q.device)
    launched = launchers.launch_config(t, cfg, max_seqlen_k=max_seqlen_k)
    fastpath.record(sig, launched, ins)
    return launched.out


# ------------------------------------------------------------------------------------------ paged decode

def get_num_sms() -> int:
    """The SMs a call may use (DeepGEMM's meaning): set_num_sms's value, else the current GPU's SM count (1
    without a GPU). Engines pass it to get_paged_mqa_logits_metadata as the program count."""
    return sms.get_num_sms()


def set_num_sms(num_sms: int) -> None:
    """Let later calls use `num_sms` SMs (0: the device's count again). Every persistent kernel (the Gluon
    prefill, both decode kernels, the top-k selection) takes its program count from it, and so does the decode
    split computed when schedule_meta is None; the plain-Triton prefill kernels size their kv splits by it.
    Process-wide, as DeepGEMM's; a change takes effect on the next call."""
    sms.set_num_sms(num_sms)


def paged_plan(q: torch.Tensor, kv_cache: torch.Tensor, max_context_len: int, clean: bool, bf16: bool,
               schedule_meta, cache_layout: str = "plain"):
    """The plan's config for a paged call (mqa_cli.plan: the row, and whether the schedule is read and how the cache
    is read), from the call's shapes, strides and flags only; planned once per key."""
    B, T, H, D = q.shape
    bs = kv_cache.shape[1]
    given, stride, aligned = schedule_meta is not None, kv_cache.stride(0), kv_cache.data_ptr() % 16 == 0
    ranges = schedule_meta.shape[0] - 1 if given else 0  # (a shape: no read of its data)
    key = ("paged", B, T, H, D, bs, max_context_len, clean, q.dtype, bf16, given, ranges, stride, aligned,
           cache_layout, q.device, sms.setting())
    return _config(key, lambda: dispatch.Shape("paged", B * T, max_context_len, H, D, clean, FP8_NAMES[q.dtype],
                                               batch=B, next_n=T, block_size=bs, bf16=bf16, schedule_given=given,
                                               schedule_ranges=ranges, cache_block_stride=stride,
                                               cache_aligned=aligned, cache_layout=cache_layout), q.device)


def read_schedule(q: torch.Tensor, kv_cache: torch.Tensor, max_context_len: int, clean: bool, bf16: bool,
                  schedule_meta):
    """schedule_meta where the plan of this paged call reads it (its value checks validate it), else None."""
    if schedule_meta is None:
        return None
    return None if paged_plan(q, kv_cache, max_context_len, clean, bf16, schedule_meta).constexprs["SELF_SCHEDULE"] \
        else schedule_meta


def fp8_paged_mqa_logits(q: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor,
                         context_lens: torch.Tensor, block_table: torch.Tensor, schedule_meta, max_context_len: int,
                         clean_logits: bool = False, logits_dtype: torch.dtype = torch.float32, indices=None, *,
                         check_values: bool = False) -> torch.Tensor:
    """Paged decode logits [B*next_n, max_context_len] (a view of a buffer whose rows are padded to a multiple of
    1024 bytes, as DeepGEMM pads) in logits_dtype.

    q fp8 [B, next_n, H, D]; kv_cache uint8 [num_blocks, block_size, 1, D + 4] (per block: block_size*D fp8
    bytes, then block_size fp32 scales; the block stride may be any multiple of 4 bytes); weights fp32
    [B*next_n, H]; context_lens int32 [B] (row (b, t) sees k < context_lens[b] - next_n + t + 1) or
    [B, next_n] (k < context_lens[b, t]); a context of 0 is an empty row; block_table int32 [B, max_blocks]
    (row slices and strided rows honoured). schedule_meta: get_paged_mqa_logits_metadata's int32
    [num_sms + 1, 2] or None (then it is computed on the device). clean_logits: -inf past each row's end.

    The eighth argument's type says which DeepGEMM generation wrote the call (mqa_cli.api.forms): a bool is
    clean_logits (54e2261, 0.2.3.post2; default False), None is 0.2.5's indices=None (not cleaned), a torch.dtype
    is logits_dtype with indices ninth (DeepGEMM 2.8.1 as vLLM 0.34 vendors it; not cleaned), a tensor is 0.2.5's
    varlen indices, refused in one line (it needs sm100), as is an `indices=` tensor.
    """
    clean, logits_dtype = forms.paged_options(clean_logits, logits_dtype, indices)
    bf16 = _logits_dtype(logits_dtype)
    if not isinstance(max_context_len, int) or isinstance(max_context_len, bool):
        raise UserError(f"max_context_len must be an int (reading it from context_lens would sync), got "
                        f"{type(max_context_len).__name__}")
    ins = (q, kv_cache, weights, context_lens, block_table, schedule_meta)  # schedule_meta may be None
    sig = fastpath.signature(ins, ("paged", max_context_len, clean, bf16, sms.setting()))
    entry = fastpath.get(sig)
    if entry is not None:  # this signature passed the checks below before: only the value checks remain
        if _checking(check_values):
            validate_paged_values(Paged(q, kv_cache, weights, context_lens, block_table, max_context_len),
                                  read_schedule(q, kv_cache, max_context_len, clean, bf16, schedule_meta))
        return entry.launch(ins)
    t = Paged(q, kv_cache, weights, context_lens, block_table, max_context_len)
    check_paged(t)
    if schedule_meta is not None and (
            not isinstance(schedule_meta, torch.Tensor) or schedule_meta.dtype != torch.int32
            or schedule_meta.dim() != 2 or schedule_meta.shape[1] != 2 or schedule_meta.shape[0] < 2
            or not schedule_meta.is_contiguous() or schedule_meta.device != q.device):
        raise UserError("schedule_meta must be get_paged_mqa_logits_metadata's contiguous int32 [num_sms + 1, 2] "
                        "tensor on q's device, or None")
    cfg = paged_plan(q, kv_cache, max_context_len, clean, bf16, schedule_meta)
    # the plan decided whether the schedule is read (SELF_SCHEDULE=0): checked and passed on only then
    read = None if cfg.constexprs["SELF_SCHEDULE"] else schedule_meta
    if _checking(check_values):
        validate_paged_values(t, read)
    launched = launchers.launch_config(t, cfg, schedule_meta=read)
    fastpath.record(sig, launched, ins)
    return launched.out


def fp8_fp4_paged_mqa_logits(q, kv_cache: torch.Tensor, weights: torch.Tensor, context_lens: torch.Tensor,
                             block_table: torch.Tensor, schedule_meta, max_context_len: int,
                             clean_logits: bool = False, logits_dtype: torch.dtype = torch.float32, indices=None, *,
                             check_values: bool = False) -> torch.Tensor:
    """DeepGEMM's combined paged entry: q = (q_fp8, q_scale or None), the eighth argument as fp8_paged_mqa_logits
    reads it; fp4 and MX inputs (a q scale, an fp4 cache, bf16 weights) are refused."""
    q_fp8, q_scale = q if isinstance(q, (tuple, list)) else (q, None)
    _refuse_mx(None, weights)
    if q_scale is not None or kv_cache.shape[-1] != q_fp8.shape[-1] + 4:
        raise UserError("fp4 inputs (a q scale, or an fp4 kv cache of D/2 + 4 bytes per token) need a GPU with fp4 "
                        "MMA (sm100); this library runs fp8 e4m3: pass q as (q_fp8, None) and an fp8 cache")
    return fp8_paged_mqa_logits(q_fp8, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                                clean_logits, logits_dtype, indices, check_values=check_values)


__all__ = ["fp8_mqa_logits", "mqa_logits", "fp8_fp4_mqa_logits", "fp8_paged_mqa_logits", "fp8_fp4_paged_mqa_logits",
           "get_paged_mqa_logits_metadata", "get_num_sms", "set_num_sms"]
