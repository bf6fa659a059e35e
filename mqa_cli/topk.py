"""The indexer's top-k in bounded memory: logits for a block of query rows into a reused workspace, then a
per-row selection kernel (mqa_kernels.topk), so no [S, N] matrix is ever held.

Indices follow the engines' convention: absolute kv positions (paged: token positions in the sequence),
-1 where a row has fewer than topk live positions. Entries that are -inf or NaN, or outside the row's
window, are never selected. Ties at the k-th value are broken deterministically (the kernel's block
order); sorted=True orders by descending value, ties by that order.

Hot path: shape/dtype/stride checks only, no host sync, no tensor data read on the host.
"""
from __future__ import annotations

import torch

from mqa_kernels.topk.config import topk_cap, topk_config

from . import interpreter, launch
from .api import LOGITS_DTYPES, fp8_paged_mqa_logits, mqa_logits, target_for
from .errors import UserError

DEFAULT_WORKSPACE = 256 << 20  # bytes of logits held at once (one block of query rows)

_CONFIGS: dict = {}
TUNING: dict = {}  # num_warps / tile / programs_per_unit overrides for every launch (GPU sweeps)


def _config(rows: int, cols: int, topk: int, device, window: bool, compressed: bool, stats: bool, cap):
    tgt = target_for(device)
    key = (rows, cols, topk, tgt.name, tgt.units, window, compressed, stats, cap, tuple(sorted(TUNING.items())))
    cfg = _CONFIGS.get(key)
    if cfg is None:
        try:
            cfg = _CONFIGS[key] = topk_config(rows=rows, cols=cols, topk=topk, backend=tgt.backend, units=tgt.units,
                                              window=window, compressed=compressed, values=True, stats=stats, cap=cap,
                                              **TUNING)
        except ValueError as e:
            raise UserError(str(e)) from None
    return cfg


def _check_topk(topk) -> int:
    if isinstance(topk, bool) or not isinstance(topk, int) or topk < 1:
        raise UserError(f"topk must be an int >= 1, got {topk!r}")
    return topk


def _check_window(x, name: str, rows: int, device) -> None:
    if x.dtype != torch.int32 or x.dim() != 1 or x.shape[0] != rows:
        raise UserError(f"{name} must be int32 [{rows}], got {x.dtype} {list(x.shape)}")
    if x.device != device:
        raise UserError(f"{name} is on {x.device}, the logits on {device}")


# Few long rows (decode: one row per sequence, tens of thousands of columns) leave most SMs idle in the
# selection kernel (one program per row): on the H200, B 64 x 64K columns took 2680 µs there against 167 µs
# for torch.topk, while 64 x 8K took 32 µs against 100 (scripts/bench_indexer.py, 2026-11-30).
FEW_ROWS_PER_SM, LONG_ROW = 2, 32768


def _torch_select_into(logits, topk: int, ks, ke, idx_out, val_out, compressed: bool) -> None:
    """torch.topk over the window-masked rows, in the kernel's conventions (-1 / -inf past the live entries)."""
    R, cols = logits.shape
    x = logits
    if ks is not None:
        c = torch.arange(cols, device=logits.device)
        lo, hi = ks.long()[:, None], ke.long()[:, None]
        live = c[None, :] < (hi - lo) if compressed else (c[None, :] >= lo) & (c[None, :] < hi)
        x = logits.masked_fill(~live, float("-inf"))
    k = min(topk, cols)
    v, i = torch.topk(x, k, dim=1)
    i = i.to(torch.int32)
    if compressed:
        i = i + ks.to(torch.int32)[:, None]
    dead = ~torch.isfinite(v) | (v == float("-inf"))
    idx_out[:, :k] = torch.where(dead, -1, i)
    val_out[:, :k] = v.masked_fill(dead, float("-inf")).to(val_out.dtype)
    if k < topk:
        idx_out[:, k:] = -1
        val_out[:, k:] = float("-inf")


def _select_into(logits, topk: int, ks, ke, idx_out, val_out, *, compressed: bool = False, cap=None,
                 stats=None) -> None:
    """Select into idx_out / val_out ([R, topk] views) from an [R, cols] logits view: the selection kernel,
    or torch.topk for a few very long rows (see FEW_ROWS_PER_SM)."""
    R, cols = logits.shape
    if R == 0:
        return
    if (stats is None and cap is None and logits.is_cuda and cols >= LONG_ROW
            and R < FEW_ROWS_PER_SM * torch.cuda.get_device_properties(logits.device).multi_processor_count):
        _torch_select_into(logits, topk, ks, ke, idx_out, val_out, compressed)
        return
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    window = ks is not None
    cfg = _config(R, cols, topk, logits.device, window, compressed, stats is not None, cap)
    dev = logits.device
    dummy = torch.empty(1, dtype=torch.int32, device=dev)
    scratch = torch.empty(max(1, cfg.schedule["scratch_elems"]) if cols > cfg.constexprs["CAP"] else 1,
                          dtype=torch.int32, device=dev)
    ks_t, ke_t = (ks, ke) if window else (dummy, dummy)
    st = stats if stats is not None else dummy
    args = [logits, ks_t, ke_t, idx_out, val_out, scratch, st, R, cols, topk, logits.stride(0),
            ks_t.stride(0), ke_t.stride(0), idx_out.stride(0), val_out.stride(0)]
    a = launch.LaunchArgs(tuple(cfg.grid), args, dict(cfg.constexprs), dict(cfg.options))
    launch.run_kernel(launch.kernel_for(cfg, dev), cfg, a, interpreter.active())


def topk_select(logits: torch.Tensor, topk: int, ks: torch.Tensor | None = None, ke: torch.Tensor | None = None,
                *, compressed: bool = False, cap: int | None = None,
                stats: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row top-k of an [R, N] fp32 or bf16 matrix, restricted to columns [ks, ke) when given.

    Returns (indices int32 [R, topk], values [R, topk] in the logits' dtype): the set in a deterministic
    order (position order except for rows of more than cap live entries), -1 / -inf past each row's live
    entries. compressed: column c of row i is position
    ks[i] + c and the row has ke[i] - ks[i] columns (fp8_mqa_logits' max_seqlen_k form); indices are
    positions. cap: candidate capacity per row (a power of two >= 2 * topk; smaller values send short
    rows through the long-row path, for tests). stats: an int32 [R] tensor to receive each row's path
    (0 in registers, 1 sampled candidates, 2 exact passes).
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
    val = torch.empty(R, topk, dtype=logits.dtype, device=logits.device)
    _select_into(logits, topk, ks, ke, idx, val, compressed=compressed, cap=cap, stats=stats)
    return idx, val


def _sort_desc(idx: torch.Tensor, val: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Descending value (stable: -1 padding, valued -inf, stays last)."""
    v, order = torch.sort(val, dim=1, descending=True, stable=True)
    return idx.gather(1, order), v


def _rows_per_block(rows: int, cols: int, dtype: torch.dtype, workspace_bytes: int, chunk_rows) -> int:
    if chunk_rows is not None:
        if chunk_rows < 1:
            raise UserError(f"chunk_rows must be >= 1, got {chunk_rows}")
        return min(rows, int(chunk_rows))
    row_bytes = launch.padded_stride(cols) * torch.tensor([], dtype=dtype).element_size()
    return max(1, min(rows, workspace_bytes // row_bytes))


def topk_memory(S: int, N: int, topk: int, *, logits_dtype=torch.float32, max_seqlen_k: int = 0,
                return_logits: bool = False, sorted: bool = True, chunk_rows: int | None = None,
                workspace_bytes: int = DEFAULT_WORKSPACE, units: int = 132) -> dict:
    """Device bytes fp8_mqa_topk holds beyond its inputs (for `explain`): logits block, selection scratch,
    outputs and the per-block sort. Independent of S x N: O(S * topk) + a fixed workspace."""
    cols = max_seqlen_k if max_seqlen_k > 0 else N
    esz = torch.tensor([], dtype=logits_dtype).element_size()
    rows = _rows_per_block(S, cols, logits_dtype, workspace_bytes, chunk_rows)
    block = rows * launch.padded_stride(cols) * esz
    scratch = (min(rows, 4 * units) * 2 * topk_cap(topk) * 4) if cols > topk_cap(topk) else 0
    out = S * topk * 4 + (S * topk * esz if return_logits else 0)
    per_block = rows * topk * (esz + (esz + 8 + 4 if sorted else 0))  # values (+ sort values, order, gathered)
    return {"rows_per_block": rows, "blocks": -(-S // rows), "logits_block_bytes": block, "scratch_bytes": scratch,
            "output_bytes": out, "per_block_bytes": per_block, "total_bytes": block + scratch + out + per_block}


def fp8_mqa_topk(q: torch.Tensor, kv: torch.Tensor, kv_scales: torch.Tensor, weights: torch.Tensor,
                 ks: torch.Tensor, ke: torch.Tensor, topk: int, *, return_logits: bool = False,
                 logits_dtype: torch.dtype = torch.float32, chunk_rows: int | None = None, max_seqlen_k: int = 0,
                 sorted: bool = True, workspace_bytes: int = DEFAULT_WORKSPACE, cap: int | None = None):
    """The top-k kv positions of each query row of fp8_mqa_logits, without the [S, N] logits.

    Same inputs as `mqa_logits(q, kv, kv_scales, weights, ks, ke)` plus topk. Returns int32 indices
    [S, topk] (absolute kv positions, -1 where a row has fewer than topk live positions) and, with
    return_logits, the selected logits [S, topk] in logits_dtype (-inf where the index is -1).
    sorted: by descending logit; sorted=False returns the set in the kernel's order and skips the sort
    (engines take the set). max_seqlen_k > 0 (an upper bound of ke - ks, known to the caller) computes
    compressed logits: blocks of [rows, max_seqlen_k] instead of [rows, N].

    Memory beyond the inputs, independent of S x N: the outputs (S * topk * 4 bytes, + S * topk * 2 or 4
    with return_logits), one logits block of chunk_rows rows (default: as many rows as fit in
    workspace_bytes = 256 MiB, at least one row), the selection scratch (at most 4 programs per SM x
    2 x cap x 4 bytes, cap = max(1024, pow2(2 topk)): 17 MiB at topk 2048 on 132 SMs) and the per-block
    values and sort buffers (rows_per_block * topk * ~16 bytes). `topk_memory` computes it.
    """
    topk = _check_topk(topk)
    if logits_dtype not in LOGITS_DTYPES:
        raise UserError(f"logits_dtype must be torch.float32 or torch.bfloat16, got {logits_dtype}")
    if q.dim() != 3:
        raise UserError(f"q must be [S, H, D], got shape {list(q.shape)}")
    S = q.shape[0]
    if weights.dim() != 2 or weights.shape[0] != S:
        raise UserError(f"weights must be [{S}, H], got shape {list(weights.shape)}")
    for name, x in (("ks", ks), ("ke", ke)):
        _check_window(x, name, S, q.device)
    N = kv.shape[0]
    cols = int(max_seqlen_k) if max_seqlen_k > 0 else N
    rows = _rows_per_block(S, cols, logits_dtype, workspace_bytes, chunk_rows)
    idx = torch.empty(S, topk, dtype=torch.int32, device=q.device)
    val = torch.empty(S, topk, dtype=logits_dtype, device=q.device) if return_logits else None
    for r0 in range(0, S, rows):
        r1 = min(S, r0 + rows)
        logits = mqa_logits(q[r0:r1], kv, kv_scales, weights[r0:r1], ks[r0:r1], ke[r0:r1], clean_logits=False,
                            max_seqlen_k=int(max_seqlen_k), logits_dtype=logits_dtype)
        v = val[r0:r1] if (val is not None and not sorted) else torch.empty(r1 - r0, topk, dtype=logits_dtype,
                                                                             device=q.device)
        _select_into(logits, topk, ks[r0:r1], ke[r0:r1], idx[r0:r1], v, compressed=max_seqlen_k > 0, cap=cap)
        del logits  # the next block reuses its memory
        if sorted:
            i_sorted, v_sorted = _sort_desc(idx[r0:r1], v)
            idx[r0:r1] = i_sorted
            if val is not None:
                val[r0:r1] = v_sorted
    return (idx, val) if return_logits else idx


def paged_row_ends(context_lens: torch.Tensor, next_n: int, max_context_len: int) -> torch.Tensor:
    """int32 [B * next_n]: one past the last token each decode row sees (on the device, no sync)."""
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
                       workspace_bytes: int = DEFAULT_WORKSPACE, chunk_batch: int | None = None,
                       cap: int | None = None):
    """The top-k token positions of each decode row of fp8_paged_mqa_logits, in bounded memory.

    Same inputs as fp8_paged_mqa_logits (schedule_meta by keyword; it is passed on only when the whole
    batch is one block). Returns int32 indices [B * next_n, topk] (token positions, -1 past a row's live
    tokens) and, with return_logits, the selected logits. Rows are computed in blocks of sequences
    (chunk_batch, default: as many as fit in workspace_bytes). Memory as fp8_mqa_topk's.
    """
    topk = _check_topk(topk)
    if logits_dtype not in LOGITS_DTYPES:
        raise UserError(f"logits_dtype must be torch.float32 or torch.bfloat16, got {logits_dtype}")
    if isinstance(max_context_len, bool) or not isinstance(max_context_len, int):
        raise UserError(f"max_context_len must be an int, got {type(max_context_len).__name__}")
    if q.dim() != 4:
        raise UserError(f"q must be [B, next_n, H, D], got shape {list(q.shape)}")
    B, T = q.shape[0], q.shape[1]
    S = B * T
    if weights.dim() != 2 or weights.shape[0] != S:
        raise UserError(f"weights must be [{S}, H], got shape {list(weights.shape)}")
    ends = paged_row_ends(context_lens, T, max_context_len)
    starts = torch.zeros(1, dtype=torch.int32, device=q.device).expand(S)  # stride 0: every row starts at 0
    if chunk_batch is None:
        per_seq = T * launch.padded_stride(max(1, max_context_len)) * torch.tensor([], dtype=logits_dtype).element_size()
        chunk_batch = max(1, workspace_bytes // per_seq)
    nb = max(1, min(B, int(chunk_batch)))
    idx = torch.empty(S, topk, dtype=torch.int32, device=q.device)
    val = torch.empty(S, topk, dtype=logits_dtype, device=q.device) if return_logits else None
    for b0 in range(0, B, nb):
        b1 = min(B, b0 + nb)
        r0, r1 = b0 * T, b1 * T
        meta = schedule_meta if (b0 == 0 and b1 == B) else None
        logits = fp8_paged_mqa_logits(q[b0:b1], kv_cache, weights[r0:r1], context_lens[b0:b1], block_table[b0:b1],
                                      meta, max_context_len, clean_logits=False, logits_dtype=logits_dtype)
        v = val[r0:r1] if (val is not None and not sorted) else torch.empty(r1 - r0, topk, dtype=logits_dtype,
                                                                             device=q.device)
        _select_into(logits, topk, starts[r0:r1], ends[r0:r1], idx[r0:r1], v, cap=cap)
        del logits
        if sorted:
            i_sorted, v_sorted = _sort_desc(idx[r0:r1], v)
            idx[r0:r1] = i_sorted
            if val is not None:
                val[r0:r1] = v_sorted
    return (idx, val) if return_logits else idx


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
