"""Arguments of the warp-specialised Gluon paged decode kernel (mqa_kernels.decode.paged_ws_sm90): TMA descriptors of q
and of the cache (its fp8 rows and its fp32 scales, two views of the same bytes), pointers and strides for the rest.

Nothing here reads tensor data or syncs (a launch can be captured in a CUDA graph). A cache whose blocks TMA cannot
describe never comes here: the plan rules this row out for it (mqa_cli.plan.build.cache_describable).
"""
from __future__ import annotations

import functools
import itertools

import torch

from ..errors import UserError
from . import barrier_offsets
from .common import TMA_ALIGN, LaunchArgs, desc_fields
from .paged import schedule_source

_CACHE_DESCS: dict = {}  # (cache pointer, _layout_id) -> (kv_desc, sc_desc); a few entries
_LAYOUT_IDS: dict = {}  # (cache shape, strides, D, BS) -> id
_NEXT_ID = itertools.count()


@functools.lru_cache(maxsize=32)
def _layouts(q_block: tuple, block_size: int, D: int):
    """Shared layouts of the q, kv and scale tiles (built once per shape: each costs µs of host time)."""
    from triton.experimental.gluon import language as gl

    return (gl.NVMMASharedLayout.get_default_for(list(q_block), gl.float8e4nv),
            gl.NVMMASharedLayout.get_default_for([block_size, D], gl.float8e4nv),
            gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=2))


def _q_rows(q: torch.Tensor) -> torch.Tensor:
    """q [B, T, H, D] as [B*T*H, D] rows at stride D (a copy only when the layout is not already that)."""
    B, T, H, D = q.shape
    if (q.stride(3) == 1 and q.stride(2) == D and q.stride(1) == H * D and (q.stride(0) == T * H * D or B == 1)
            and q.data_ptr() % TMA_ALIGN == 0):
        return q
    return q.contiguous() if not q.is_contiguous() else q.clone()


def _cache_descs(cache: torch.Tensor, D: int, BS: int, kv_layout, sc_layout, layout_id: int | None = None):
    """(fp8 rows, fp32 scales) descriptors of the cache: rows [(blocks-1)*RPB + BS, D] at stride D (block i's
    tokens from row i*RPB), and scales [blocks, BS] from byte BS*D of each block at row stride stride(0)/4.
    layout_id: _layout_id of the cache's (shape, strides, D, BS) when the caller already knows it (a rebuild, whose
    signature fixes them), so that only the address is read per call."""
    if layout_id is None:
        layout_id = _layout_id(cache, D, BS)
    key = (cache.data_ptr(), layout_id)
    hit = _CACHE_DESCS.get(key)
    if hit is not None:
        return hit
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    nb, sb = cache.shape[0], cache.stride(0)
    rpb = sb // D
    blocks = cache.as_strided((nb, BS * (D + 4)), (sb, 1))
    kv_desc = TensorDescriptor(blocks.view(torch.float8_e4m3fn), [(nb - 1) * rpb + BS, D], [D, 1], [BS, D], kv_layout)
    scales = blocks[:, BS * D:].view(torch.float32)  # [nb, BS], strides (sb / 4, 1)
    sc_desc = TensorDescriptor(scales, [nb, BS], [sb // 4, 1], [1, BS], sc_layout)
    if len(_CACHE_DESCS) >= 4:  # engines keep one cache per layer group; do not pin old ones
        _CACHE_DESCS.clear()
    _CACHE_DESCS[key] = (kv_desc, sc_desc)
    return kv_desc, sc_desc


def _layout_id(cache: torch.Tensor, D: int, BS: int) -> int:
    """A small int naming the cache's (shape, strides, D, BS): _CACHE_DESCS keys on (address, it), a lookup of 1.1 µs
    against 1.5 µs with the tuples (this project's 2-CPU box, 2026-12-05; the card's host not measured). Ids are never reused (the table starts over past a bound, the counter does not),
    so an id a rebuild holds always names the same layout."""
    layout = (tuple(cache.shape), tuple(cache.stride()), D, BS)
    lid = _LAYOUT_IDS.get(layout)
    if lid is None:
        if len(_LAYOUT_IDS) >= 1024:
            _LAYOUT_IDS.clear()
        lid = _LAYOUT_IDS[layout] = next(_NEXT_ID)
    return lid


def paged_ws_sm90_args(t, cfg, out: torch.Tensor, schedule_meta: torch.Tensor | None) -> LaunchArgs:
    """LaunchArgs of paged_mqa_logits_ws_sm90 for paged tensors `t` and the [B*next_n, max_context_len] view `out`.
    The grid is (ranges) x SUBS: ranges = schedule_meta's entries - 1, or cfg.schedule["programs"] when the kernel
    computes its own split (SELF_SCHEDULE)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    c = cfg.constexprs
    B, T, H, D = t.q.shape
    BS = t.block_size
    sb = t.kv_cache.stride(0)
    if sb % TMA_ALIGN or sb % D or t.kv_cache.data_ptr() % TMA_ALIGN:
        raise UserError(f"{cfg.kernel} reads the cache by TMA, which cannot describe block stride {sb} bytes at base "
                        f"offset {t.kv_cache.data_ptr() % TMA_ALIGN}: plan the call with its cache (the portable row runs it)")
    q_rows = _q_rows(t.q)
    if c.get("Q_IN_LANES"):  # [H/R, B*T, R, D]: head group j, draft row, head j*R + r (R = 8 / NP; see the kernel)
        R = 8 // c["NP"]
        q_shape, q_block, q_strides = [H // R, B * T, R, D], [H // R, c["NP"], R, D], [R * D, H * D, D, 1]
    else:
        # NP*H rows of each sequence in one box, or (MMA_N) one box of MMA_N rows per part of the draft rows
        q_shape, q_block, q_strides = [B * T * H, D], [c.get("MMA_N") or c["NP"] * H, D], [D, 1]
    q_layout, kv_layout, sc_layout = _layouts(tuple(q_block), BS, D)
    q_desc = TensorDescriptor(q_rows, q_shape, q_strides, q_block, q_layout)  # validated once here
    kv_desc, sc_desc = _cache_descs(t.kv_cache, D, BS, kv_layout, sc_layout)
    self_schedule = bool(c.get("SELF_SCHEDULE"))
    schedule_meta, ranges = schedule_source(cfg, t, schedule_meta)
    ctx = t.context_lens
    two_d = ctx.dim() == 2
    args = [q_desc, kv_desc, sc_desc, t.weights, ctx, t.block_table, schedule_meta, out,
            B, int(t.max_context_len), t.kv_cache.stride(0) // D, t.weights.stride(0),
            ctx.stride(0), ctx.stride(1) if two_d else 0, 0 if two_d else 1, t.block_table.stride(0), out.stride(0),
            t.block_table.shape[1]]
    tail = tuple(args[8:])  # sizes and strides: fixed by the call's signature (mqa_cli.api.fastpath)
    placeholder = schedule_meta if self_schedule else None  # the config's choice, as the full path followed it
    # Fixed by the signature of a later call (q's shape, strides and address mod 16; the cache's shape and strides):
    # whether q is read in place, the cache's layout id, the q descriptor's fields.
    q_in_place = q_rows is t.q
    cache_id = _layout_id(t.kv_cache, D, BS)
    desc_cls, q_fields = desc_fields(q_desc)
    new = object.__new__

    def rebuild(ins, out):
        q, kv_cache, weights, ctx, table, meta = ins
        kv_d, sc_d = _CACHE_DESCS.get((kv_cache.data_ptr(), cache_id)) or _cache_descs(
            kv_cache, D, BS, kv_layout, sc_layout, cache_id)
        q_d = new(desc_cls)
        q_d.__dict__.update(q_fields)
        q_d.base = q if q_in_place else _q_rows(q)
        return (q_d, kv_d, sc_d, weights, ctx, table, meta if placeholder is None else placeholder, out, *tail)

    la = LaunchArgs((ranges * c["SUBS"],), args, dict(c), dict(cfg.options), rebuild)
    la.constexprs["DESC_PARAMS"] = descriptor_params(cfg.name, (len(q_shape), 2, 2))
    barrier_offsets.resolve_on_device(cfg, la, t.q)
    return la


def descriptor_params(symbol: str, ranks: tuple) -> str:
    """The kernel parameters that hold the TMA descriptors (leading arguments of ranks `ranks`), as the kernel's
    prefetch names them: triton 3.6 passes a rank-r descriptor as its 128-byte map, then r sizes and r strides
    (1 + 2r parameters), and the PTX names parameter i `<symbol>_param_<i>`. A wrong name fails the build."""
    first, names = 0, []
    for r in ranks:
        names.append(f"{symbol}_param_{first}")
        first += 1 + 2 * r
    return ",".join(names)
