"""The indexer's top-k in bounded memory: logits for a block of query rows into a reused workspace, then a
per-row selection kernel (mqa_kernels.topk), so no [S, N] matrix is ever held.

Indices follow the engines' convention: absolute kv positions (paged: token positions in the sequence), or
with fp8_mqa_topk(relative=True) positions relative to each row's ks (vLLM's prefill), -1 where a row has fewer
than topk live positions. Entries that are -inf or NaN, or outside the row's
window, are never selected. The set comes in ascending position order; ties at the k-th value go to the
lowest positions (every kernel path; the opt-in 'torch' kind breaks ties as torch.topk does).
sorted=True orders by descending value, equal values by position.

Hot path: shape/dtype/stride checks only, no host sync, no tensor data read on the host.
"""
from __future__ import annotations

import torch

from mqa_kernels.topk.config import topk_config
from mqa_kernels.topk.config import workspace_bytes as tuned_workspace

from ..errors import UserError
from ..launch import interpreter, common as launch
from . import fastpath, sms
from .logits import (LOGITS_DTYPES, _checking, _logits_dtype, fp8_paged_mqa_logits, mqa_logits, read_schedule,
                     target_for)

DEFAULT_WORKSPACE = 256 << 20  # bytes of logits held at once (one block of query rows) when tuned.py says nothing

# The selection's configs by call shape (rows and columns change with every batch an engine sends): past
# MAX_CONFIGS keys the table starts over, as the plans' does (mqa_cli.api.logits).
_CONFIGS: dict = {}
MAX_CONFIGS = 1024
_DUMMIES: dict = {}
_ESIZE = {torch.float32: 4, torch.bfloat16: 2}
TUNING: dict = {}  # config overrides (config.TUNABLE) for every launch: sweeps and tests


def _config(rows: int, cols: int, topk: int, device, *, window: bool, compressed: bool, paged: bool, values: bool,
            stats: bool, cap, tuning: dict | None):
    tgt = target_for(device)
    tun = {**TUNING, **(tuning or {})}
    key = (rows, cols, topk, tgt.name, tgt.units, window, compressed, paged, values, stats, cap,
           tuple(sorted(tun.items())))
    cfg = _CONFIGS.get(key)
    if cfg is None:
        if len(_CONFIGS) >= MAX_CONFIGS:
            _CONFIGS.clear()
        try:
            cfg = _CONFIGS[key] = topk_config(rows=rows, cols=cols, topk=topk, backend=tgt.backend, units=tgt.units,
                                              window=window, compressed=compressed, paged=paged, values=values,
                                              stats=stats, cap=cap, **tun)
        except ValueError as e:
            raise UserError(str(e)) from None
    return cfg


def _dummy(device) -> torch.Tensor:
    """A 1-element int32 tensor for pointer arguments a variant never touches (never written)."""
    d = _DUMMIES.get(device)
    if d is None:
        d = _DUMMIES[device] = torch.zeros(1, dtype=torch.int32, device=device)
    return d


def _check_topk(topk) -> int:
    if isinstance(topk, bool) or not isinstance(topk, int) or topk < 1:
        raise UserError(f"topk must be an int >= 1, got {topk!r}")
    return topk


def _check_window(x, name: str, rows: int, device) -> None:
    if x.dtype != torch.int32 or x.dim() != 1 or x.shape[0] != rows:
        raise UserError(f"{name} must be int32 [{rows}], got {x.dtype} {list(x.shape)}")
    if x.device != device:
        raise UserError(f"{name} is on {x.device}, the logits on {device}")


def _torch_select_into(logits, topk: int, ks, ke, idx_out, val_out, compressed: bool) -> None:
    """torch.topk over the window-masked rows, in the kernels' conventions (position order, -1 / -inf past the
    live entries); ties at the k-th value as torch.topk breaks them. The 'torch' kind (opt-in, tuned.py)."""
    R, cols = logits.shape
    x = logits
    if ks is not None:
        c = torch.arange(cols, device=logits.device)
        lo, hi = ks.long()[:, None], ke.long()[:, None]
        live = c[None, :] < (hi - lo) if compressed else (c[None, :] >= lo) & (c[None, :] < hi)
        x = logits.masked_fill(~live, float("-inf"))
    k = min(topk, cols)
    v, i = torch.topk(x, k, dim=1)
    dead = torch.isnan(v) | (v == float("-inf"))
    i = torch.where(dead, cols, i)  # dead picks sort last
    i, order = torch.sort(i, dim=1)
    v = v.gather(1, order)
    dead = i == cols
    if compressed:
        i = i + ks.long()[:, None]
    idx_out[:, :k] = torch.where(dead, -1, i).to(torch.int32)
    if k < topk:
        idx_out[:, k:] = -1
    if val_out is not None:
        val_out[:, :k] = v.masked_fill(dead, float("-inf")).to(val_out.dtype)
        if k < topk:
            val_out[:, k:] = float("-inf")


def select_args(cfg, logits, ks, ke, idx_out, val_out, *, paged=None, stats=None, scratch=None,
                arrive=None) -> launch.LaunchArgs:
    """The selection kernels' arguments (one order for both kernels): what _select_into launches, and what a
    cross-compile signs (meta tensors)."""
    dummy = _dummy(logits.device)
    ks_t, ke_t = (ks, ke) if cfg.constexprs["WINDOW"] else (dummy, dummy)
    val_t = val_out if val_out is not None else idx_out
    ctx, sb, st, next_n, max_ctx, shift = dummy, 0, 0, 1, 0, 0  # a decode block's context lengths, else inert
    if paged is not None:
        ctx, next_n, max_ctx = paged
        two_d = ctx.dim() == 2
        sb, st, shift = ctx.stride(0), ctx.stride(1) if two_d else 0, 0 if two_d else 1
    R, cols = logits.shape
    args = [logits, ks_t, ke_t, ctx, idx_out, val_t, dummy if scratch is None else scratch,
            dummy if arrive is None else arrive, dummy if stats is None else stats, R, cols, idx_out.shape[1],
            cfg.schedule["parts"], logits.stride(0), ks_t.stride(0), ke_t.stride(0), sb, st, next_n, max_ctx, shift,
            idx_out.stride(0), val_t.stride(0)]
    return launch.LaunchArgs(tuple(cfg.grid), args, dict(cfg.constexprs), dict(cfg.options))


def _select_into(logits, topk: int, ks, ke, idx_out, val_out, *, compressed: bool = False, paged=None, cap=None,
                 stats=None, tuning: dict | None = None) -> None:
    """Select into idx_out (and val_out, when not None) [R, topk] views from an [R, cols] logits view.
    paged = (context_lens, next_n, max_context_len): each decode row's window [0, end) is read from the
    context lengths inside the kernel (ks / ke unused)."""
    R, cols = logits.shape
    if R == 0:
        return
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    sig = _signature(logits, topk, ks, ke, idx_out, val_out, compressed, paged, cap, stats, tuning)
    fast = _FAST.get(sig) if sig is not None else None
    if fast is not None and fast is not _NOT_FAST and not fastpath.hooked():
        fast.launch(logits, ks, ke, idx_out, val_out, paged)
        return
    dev = logits.device
    cfg = _config(R, cols, topk, dev, window=ks is not None and paged is None, compressed=compressed,
                  paged=paged is not None, values=val_out is not None, stats=stats is not None, cap=cap,
                  tuning=tuning)
    sched = cfg.schedule
    if sched["kind"] == "torch":
        if paged is not None:
            ks, ke = torch.zeros(R, dtype=torch.int32, device=dev), paged_row_ends(*paged)
        _torch_select_into(logits, topk, ks, ke, idx_out, val_out, compressed)
        if stats is not None:
            stats.fill_(4)
        return
    scratch = torch.empty(sched["scratch_elems"], dtype=torch.int32, device=dev) if sched["scratch_elems"] else None
    arrive = (torch.zeros(R * sched.get("arrive_words", 1), dtype=torch.int32, device=dev) if sched["arrive"]
              else None)
    for phase in sched.get("phases", (cfg,)):  # the radix select: four launches on one workspace
        a = select_args(phase, logits, ks, ke, idx_out, val_out, paged=paged, stats=stats, scratch=scratch,
                        arrive=arrive)
        kernel = launch.kernel_for(phase, dev)
        compiled = launch.run_kernel(kernel, phase, a, interpreter.active())
    if sig is not None and "phases" not in sched:
        _record(sig, compiled, kernel, cfg, a)


# Selection launches by call signature (fastpath.key of the call's tensors and options): a repeated decode step
# rebuilds the argument list from its own tensors and calls the compiled launcher directly, skipping the config
# lookup, the argument checks of Triton's runner and its specialisation (tens of µs of host time a call).
_FAST: dict = {}
_NOT_FAST = object()


class _Fast:
    __slots__ = ("relaunch", "tail", "scratch", "arrive", "window")

    def launch(self, logits, ks, ke, idx_out, val_out, paged) -> None:
        dev = logits.device
        dummy = _dummy(dev)
        scratch = torch.empty(self.scratch, dtype=torch.int32, device=dev) if self.scratch else dummy
        arrive = torch.zeros(logits.shape[0], dtype=torch.int32, device=dev) if self.arrive else dummy
        ks_t, ke_t = (ks, ke) if self.window else (dummy, dummy)
        ctx = paged[0] if paged is not None else dummy
        self.relaunch((logits, ks_t, ke_t, ctx, idx_out, val_out if val_out is not None else idx_out, scratch, arrive,
                       dummy, *self.tail))


def _signature(logits, topk, ks, ke, idx_out, val_out, compressed, paged, cap, stats, tuning):
    """The fast path's key for a CUDA call without stats, else None (the full path every time). Config overrides
    (TUNING, tuning) are part of it: a sweep's candidates each get their own entry."""
    if stats is not None or type(logits) is not torch.Tensor or not logits.is_cuda:
        return None
    ctx, next_n, max_ctx = paged if paged is not None else (None, 0, 0)
    over = tuple(sorted({**TUNING, **(tuning or {})}.items())) if (TUNING or tuning) else ()
    return fastpath.signature((logits, ks, ke, idx_out, val_out, ctx),
                              (topk, bool(compressed), next_n, max_ctx, cap, over, sms.setting()))


def _record(sig, compiled, kernel, cfg, a) -> None:
    """Remember the launch of `a` for later calls of `sig` (the integer arguments follow from the signature)."""
    if len(_FAST) >= fastpath.MAX_ENTRIES:
        _FAST.clear()
    r = fastpath.relaunch(compiled, kernel, a, sig[0][1])
    if r is None or len(a.args) < 9:
        _FAST[sig] = _NOT_FAST
        return
    f = _Fast()
    f.relaunch, f.tail = r, tuple(a.args[9:])
    f.scratch, f.arrive = cfg.schedule["scratch_elems"], bool(cfg.schedule["arrive"])
    f.window = bool(cfg.constexprs["WINDOW"])
    _FAST[sig] = f


def topk_select(logits: torch.Tensor, topk: int, ks: torch.Tensor | None = None, ke: torch.Tensor | None = None,
                *, compressed: bool = False, cap: int | None = None, stats: torch.Tensor | None = None,
                values: bool = True, tuning: dict | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-row top-k of an [R, N] fp32 or bf16 matrix, restricted to columns [ks, ke) when given.

    Returns (indices int32 [R, topk], values [R, topk] in the logits' dtype, or None when values=False): the
    set in ascending position order, ties at the k-th value to the lowest positions, -1 / -inf past each
    row's live entries. compressed: column c of row i is position ks[i] + c and the row has ke[i] - ks[i]
    columns (fp8_mqa_logits' max_seqlen_k form); indices are positions. cap: candidate capacity per row (a
    power of two >= 2 * topk; smaller values send short rows through the long-row paths, for tests). stats:
    an int32 [R] tensor to receive each row's path (0 in registers, 1 sampled candidates, 2 exact passes,
    3 split over programs, 4 torch.topk). tuning: config overrides (kind, num_warps, tile, programs_per_unit,
    sample, parts), for tests and sweeps.
    """
    topk = _check_topk(topk)
    if logits.dim() != 2 or logits.dtype not in LOGITS_DTYPES:
        raise UserError(f"logits must be a 2-D float32 or bfloat16 matrix, got {logits.dtype} {list(logits.shape)}")
    if (ks is None) != (ke is None):
        raise UserError("pass both ks and ke, or neither")
    if compressed and ks is None:
        raise UserError("compressed logits need ks and ke")
    R = logits.shape[0]
    if ks is not None:
        _check_window(ks, "ks", R, logits.device)
        _check_window(ke, "ke", R, logits.device)
    if stats is not None and (stats.dtype != torch.int32 or stats.numel() != R or not stats.is_contiguous()):
        raise UserError(f"stats must be a contiguous int32 tensor of {R} elements")
    idx = torch.empty(R, topk, dtype=torch.int32, device=logits.device)
    val = torch.empty(R, topk, dtype=logits.dtype, device=logits.device) if values else None
    _select_into(logits, topk, ks, ke, idx, val, compressed=compressed, cap=cap, stats=stats, tuning=tuning)
    return idx, val


def _workspace(cols: int, backend: str, given: int | None) -> int:
    """Bytes of logits held at once: the caller's figure, else the tuned one for this row length."""
    return int(given) if given is not None else tuned_workspace(cols, backend, DEFAULT_WORKSPACE)


def _rows_per_block(rows: int, cols: int, dtype: torch.dtype, workspace: int, chunk_rows) -> int:
    if chunk_rows is not None:
        if chunk_rows < 1:
            raise UserError(f"chunk_rows must be >= 1, got {chunk_rows}")
        return min(rows, int(chunk_rows))
    row_bytes = launch.padded_stride(cols, launch.row_align(dtype)) * _ESIZE[dtype]
    return max(1, min(rows, workspace // row_bytes))


def topk_memory(S: int, N: int, topk: int, *, logits_dtype=torch.float32, max_seqlen_k: int = 0,
                return_logits: bool = False, sorted: bool = True, chunk_rows: int | None = None,
                workspace_bytes: int | None = None, units: int = 132, backend: str = "cuda",
                paged: bool = False) -> dict:
    """Device bytes fp8_mqa_topk (paged: fp8_paged_mqa_topk, S = batch x next_n rows of N = max_context_len
    columns) holds beyond its inputs, for `explain`: logits block, selection scratch, outputs and the per-block
    sort, and the selection's config. Independent of S x N: O(S * topk) + a fixed workspace."""
    cols = max_seqlen_k if max_seqlen_k > 0 else N
    esz = _ESIZE[logits_dtype]
    rows = _rows_per_block(S, cols, logits_dtype, _workspace(cols, backend, workspace_bytes), chunk_rows)
    block = rows * launch.padded_stride(cols, launch.row_align(logits_dtype)) * esz
    cfg = topk_config(rows=rows, cols=cols, topk=topk, backend=backend, units=units, values=sorted or return_logits,
                      window=not paged, compressed=max_seqlen_k > 0, paged=paged)
    scratch = cfg.schedule["scratch_bytes"] + 4 * rows * (cfg.schedule["kind"] == "split")
    out = S * topk * 4 + (S * topk * esz if return_logits else 0)
    per_block = rows * topk * (esz + esz + 8 + 4) if sorted else 0  # values, sort values, order, gathered
    return {"rows_per_block": rows, "blocks": -(-S // rows), "logits_block_bytes": block, "scratch_bytes": scratch,
            "output_bytes": out, "per_block_bytes": per_block, "total_bytes": block + scratch + out + per_block,
            "select_kernel": cfg.kernel, "select": {**cfg.schedule, "num_warps": cfg.options["num_warps"],
                                                    "tile": cfg.constexprs["TILE"]}}


def fp8_mqa_topk(q: torch.Tensor, kv: torch.Tensor, kv_scales: torch.Tensor, weights: torch.Tensor,
                 ks: torch.Tensor, ke: torch.Tensor, topk: int, *, return_logits: bool = False,
                 logits_dtype: torch.dtype = torch.float32, chunk_rows: int | None = None, max_seqlen_k: int = 0,
                 sorted: bool = True, workspace_bytes: int | None = None, cap: int | None = None,
                 relative: bool = False, check_values: bool = False):
    """The top-k kv positions of each query row of fp8_mqa_logits, without the [S, N] logits.

    Same inputs as `mqa_logits(q, kv, kv_scales, weights, ks, ke)` plus topk. Returns int32 indices
    [S, topk] (absolute kv positions, -1 where a row has fewer than topk live positions) and, with
    return_logits, the selected logits [S, topk] in logits_dtype (-inf where the index is -1).
    sorted: by descending logit; sorted=False returns the set in ascending position order and skips the
    sort (engines take the set; no values are written unless return_logits). max_seqlen_k > 0 (an upper
    bound of ke - ks, known to the caller) computes compressed logits: blocks of [rows, max_seqlen_k]
    instead of [rows, N]. relative=True returns each index minus its row's ks (the position inside the window,
    what vLLM's prefill top-k hands on); -1 padding stays -1.

    Memory beyond the inputs, independent of S x N: the outputs (S * topk * 4 bytes, + S * topk * 2 or 4
    with return_logits), one logits block of chunk_rows rows (default: as many rows as fit in
    workspace_bytes, default the tuned table's figure for this row length or 256 MiB, at least one row),
    the selection scratch (at most programs x 2 x cap x 4 bytes, cap = max(1024, pow2(2 topk))) and, when
    sorted, the per-block sort buffers (rows_per_block * topk * ~16 bytes). `topk_memory` computes it.
    check_values=True (or MQA_LOGITS_CHECK=1) runs the logits ops' value checks first (they read data and sync),
    and refuses a max_seqlen_k below a row's window (its top-k would come from the window's first columns).
    """
    topk = _check_topk(topk)
    _logits_dtype(logits_dtype)
    if q.dim() != 3:
        raise UserError(f"q must be [S, H, D], got shape {list(q.shape)}")
    S = q.shape[0]
    if weights.dim() != 2 or weights.shape[0] != S:
        raise UserError(f"weights must be [{S}, H], got shape {list(weights.shape)}")
    for name, x in (("ks", ks), ("ke", ke)):
        _check_window(x, name, S, q.device)
    if _checking(check_values):
        from ..problem.tensors import Prefill, check_prefill, scales_1d, validate_values

        t = Prefill(q, kv, scales_1d(kv_scales), weights, ks, ke)
        check_prefill(t)
        validate_values(t, int(max_seqlen_k))
    N = kv.shape[0]
    cols = int(max_seqlen_k) if max_seqlen_k > 0 else N
    ws = _workspace(cols, target_for(q.device).backend, workspace_bytes)
    rows = _rows_per_block(S, cols, logits_dtype, ws, chunk_rows)
    idx = torch.empty(S, topk, dtype=torch.int32, device=q.device)
    val = torch.empty(S, topk, dtype=logits_dtype, device=q.device) if return_logits else None
    for r0 in range(0, S, rows):
        r1 = min(S, r0 + rows)
        logits = mqa_logits(q[r0:r1], kv, kv_scales, weights[r0:r1], ks[r0:r1], ke[r0:r1], clean_logits=False,
                            max_seqlen_k=int(max_seqlen_k), logits_dtype=logits_dtype)
        block = idx[r0:r1]
        _select_block_rows(logits, topk, ks[r0:r1], ke[r0:r1], block, None if val is None else val[r0:r1], sorted,
                           dict(compressed=max_seqlen_k > 0, cap=cap))
        if relative:  # minus each row's ks, in place; -1 padding stays -1 (on the device, no sync)
            block.copy_(torch.where(block >= 0, block - ks[r0:r1, None], block))
        del logits  # the next block reuses its memory
    return (idx, val) if return_logits else idx


def _select_block_rows(logits, topk: int, ks, ke, idx, val, sorted: bool, kw: dict) -> None:
    """One block of rows: select (values only when sorting or returning them), then sort when asked."""
    if not sorted:
        _select_into(logits, topk, ks, ke, idx, val, **kw)
        return
    v = torch.empty(idx.shape[0], topk, dtype=logits.dtype, device=logits.device)
    _select_into(logits, topk, ks, ke, idx, v, **kw)
    v_sorted, order = torch.sort(v, dim=1, descending=True, stable=True)  # stable: -1 padding (-inf) stays last
    idx.copy_(idx.gather(1, order))
    if val is not None:
        val.copy_(v_sorted)


def paged_row_ends(context_lens: torch.Tensor, next_n: int, max_context_len: int) -> torch.Tensor:
    """int32 [B * next_n]: one past the last token each decode row sees (on the device, no sync). The
    selection kernels compute the same from the context lengths themselves; this is the reference form."""
    if context_lens.dim() == 1:
        t = torch.arange(next_n, device=context_lens.device, dtype=torch.int64)
        ends = context_lens.long()[:, None] - next_n + 1 + t[None, :]
    elif context_lens.dim() == 2 and context_lens.shape[1] == next_n:
        ends = context_lens.long()
    else:
        raise UserError(f"context_lens must be [B] or [B, {next_n}], got shape {list(context_lens.shape)}")
    return ends.clamp(0, max_context_len).to(torch.int32).reshape(-1)


def fp8_paged_mqa_topk(q: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor, context_lens: torch.Tensor,
                       block_table: torch.Tensor, max_context_len: int, topk: int, *, schedule_meta=None,
                       return_logits: bool = False, logits_dtype: torch.dtype = torch.float32, sorted: bool = True,
                       workspace_bytes: int | None = None, chunk_batch: int | None = None,
                       cap: int | None = None, check_values: bool = False, offsets: torch.Tensor | None = None,
                       page_table: torch.Tensor | None = None):
    """The top-k token positions of each decode row of fp8_paged_mqa_logits, in bounded memory.

    Same inputs as fp8_paged_mqa_logits (schedule_meta by keyword; it is passed on only when the whole
    batch is one block). Returns int32 indices [B * next_n, topk] (token positions, -1 past a row's live
    tokens) and, with return_logits, the selected logits. Rows are computed in blocks of sequences
    (chunk_batch, default: as many as fit in workspace_bytes, default 256 MiB or the tuned figure). The
    selection reads each row's end from context_lens itself (no extra launches). Memory as fp8_mqa_topk's.
    check_values=True (or MQA_LOGITS_CHECK=1) runs fp8_paged_mqa_logits' value checks once, schedule_meta's too.
    The indices in an engine's layout (FlashInfer's transforms, which vLLM and SGLang hand to sparse attention;
    -1 stays -1): offsets, int32 [B * next_n], adds its row's offset to each index (top_k_ragged_transform);
    page_table, int32 [B, W] of token slots, maps index i of a row of sequence b to page_table[b, i]
    (top_k_page_table_transform).
    """
    topk = _check_topk(topk)
    bf16 = _logits_dtype(logits_dtype)
    if isinstance(max_context_len, bool) or not isinstance(max_context_len, int):
        raise UserError(f"max_context_len must be an int, got {type(max_context_len).__name__}")
    if q.dim() != 4:
        raise UserError(f"q must be [B, next_n, H, D], got shape {list(q.shape)}")
    B, T = q.shape[0], q.shape[1]
    S = B * T
    if weights.dim() != 2 or weights.shape[0] != S:
        raise UserError(f"weights must be [{S}, H], got shape {list(weights.shape)}")
    if context_lens.dtype != torch.int32 or tuple(context_lens.shape) not in ((B,), (B, T)):
        raise UserError(f"context_lens must be int32 [{B}] or [{B}, {T}], got {context_lens.dtype} "
                        f"{list(context_lens.shape)}")
    if chunk_batch is None:
        cols = max(1, max_context_len)
        per_seq = T * launch.padded_stride(cols, launch.row_align(logits_dtype)) * _ESIZE[logits_dtype]
        chunk_batch = max(1, _workspace(cols, target_for(q.device).backend, workspace_bytes) // per_seq)
    nb = max(1, min(B, int(chunk_batch)))
    if _checking(check_values):
        from ..problem.paged_tensors import Paged, check_paged, validate_paged_values

        t = Paged(q, kv_cache, weights, context_lens, block_table, max_context_len)
        check_paged(t)
        # the schedule as the logits call takes it: passed on in one block only, checked where its plan reads it
        validate_paged_values(t, read_schedule(q, kv_cache, max_context_len, False, bf16, schedule_meta)
                              if nb >= B else None)
    _check_layout(offsets, page_table, B, T, max_context_len, q.device)
    idx = torch.empty(S, topk, dtype=torch.int32, device=q.device)
    val = torch.empty(S, topk, dtype=logits_dtype, device=q.device) if return_logits else None
    if nb >= B:  # one block (a decode step): the caller's tensors as they are, no views to make
        logits = fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta,
                                      max_context_len, clean_logits=False, logits_dtype=logits_dtype)
        _select_block_rows(logits, topk, None, None, idx, val, sorted, dict(paged=(context_lens, T, max_context_len),
                                                                              cap=cap))
    else:
        for b0 in range(0, B, nb):
            b1 = min(B, b0 + nb)
            r0, r1 = b0 * T, b1 * T
            ctx = context_lens[b0:b1]
            logits = fp8_paged_mqa_logits(q[b0:b1], kv_cache, weights[r0:r1], ctx, block_table[b0:b1],
                                          None, max_context_len, clean_logits=False, logits_dtype=logits_dtype)
            _select_block_rows(logits, topk, None, None, idx[r0:r1], None if val is None else val[r0:r1], sorted,
                               dict(paged=(ctx, T, max_context_len), cap=cap))
            del logits
    _to_layout(idx, offsets, page_table, T)
    return (idx, val) if return_logits else idx


def _to_layout(idx: torch.Tensor, offsets, page_table, next_n: int) -> None:
    """idx (token positions of B * next_n rows, -1 padding) in place in an engine's layout: plus each row's offset
    (FlashInfer's ragged transform), or its sequence's page_table entries (the page-table transform); -1 stays."""
    if offsets is not None:
        idx.copy_(torch.where(idx >= 0, idx + offsets[:, None], idx))
    elif page_table is not None:
        seq = torch.arange(idx.shape[0], device=idx.device)[:, None] // next_n  # each row's sequence
        idx.copy_(torch.where(idx >= 0, page_table[seq, idx.clamp(min=0).long()], idx))


def _check_layout(offsets, page_table, B: int, T: int, max_context_len: int, device) -> None:
    """fp8_paged_mqa_topk's index layouts: at most one, int32, on the call's device, shaped for its rows."""
    if offsets is not None and page_table is not None:
        raise UserError("pass offsets (a ragged transform) or page_table (a page-table transform), not both")
    for name, x, ok in (("offsets", offsets, lambda s: s == (B * T,)),
                        ("page_table", page_table, lambda s: len(s) == 2 and s[0] == B and s[1] >= max_context_len)):
        if x is not None and (x.dtype != torch.int32 or x.device != device or not ok(tuple(x.shape))):
            want = f"[{B * T}]" if name == "offsets" else f"[{B}, >= {max_context_len}]"
            raise UserError(f"{name} must be int32 {want} on {device}, got {x.dtype} {list(x.shape)} on {x.device}")


def topk_recall(indices: torch.Tensor, ref_logits: torch.Tensor, k: int, ks: torch.Tensor | None = None,
                ke: torch.Tensor | None = None, *, per_row: bool = False, block_rows: int = 1024):
    """(min, mean) over rows of |selected ∩ reference top-k| / min(k, live).

    ref_logits: a float64 or float32 [S, N] reference (-inf or NaN entries, and columns outside [ks, ke)
    when given, are dead). A selected index counts as a hit when it is live and its reference value is
    >= the row's k-th largest reference value (ties at the k-th value are hits); -1, duplicates and dead
    picks count as misses. A row with no live entry has recall 1. Reads data (a sync): a verification
    tool, not a hot-path function. per_row=True also returns the per-row recall tensor.
    """
    S, N = ref_logits.shape
    if indices.dim() != 2 or indices.shape[0] != S:
        raise UserError(f"indices must be [{S}, topk], got shape {list(indices.shape)}")
    out = torch.empty(S, dtype=torch.float64, device=ref_logits.device)
    cols = torch.arange(N, device=ref_logits.device)
    kk = max(1, min(k, N))
    for r0 in range(0, S, block_rows):
        r1 = min(S, r0 + block_rows)
        ref = ref_logits[r0:r1]
        live = ~torch.isnan(ref) & (ref > float("-inf"))
        if ks is not None:
            live &= (cols[None, :] >= ks[r0:r1, None].long().to(cols.device)) & \
                    (cols[None, :] < ke[r0:r1, None].long().to(cols.device))
        refm = ref.masked_fill(~live, float("-inf"))
        nlive = live.sum(1)
        kth = torch.topk(refm, kk, dim=1).values[:, kk - 1]
        sel = indices[r0:r1].to(ref.device).long()
        ok = (sel >= 0) & (sel < N)
        s_sorted, _ = torch.sort(torch.where(ok, sel, -1), dim=1)
        first = torch.ones_like(ok)
        first[:, 1:] = s_sorted[:, 1:] != s_sorted[:, :-1]
        ok_u = (s_sorted >= 0) & first
        g = refm.gather(1, s_sorted.clamp(0, N - 1))
        g_live = live.gather(1, s_sorted.clamp(0, N - 1))
        hits = (ok_u & g_live & (g >= kth[:, None])).sum(1)
        den = torch.clamp(nlive, max=k)
        out[r0:r1] = torch.where(den > 0, torch.minimum(hits, den).double() / den.clamp_min(1).double(),
                                 torch.ones_like(den, dtype=torch.float64))
    lo, mean = float(out.min()), float(out.mean())
    return (lo, mean, out) if per_row else (lo, mean)
