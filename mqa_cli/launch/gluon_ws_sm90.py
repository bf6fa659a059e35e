"""Arguments of the gluon_ws_sm90 prefill variant (mqa_kernels.prefill.gluon_ws_sm90): TMA descriptors for q and kv,
pointers and strides for the rest.

Used to run (mqa_cli.launch.families) and by dump on "meta"-device tensors, so nothing here reads tensor data or
syncs: only dtypes, shapes, strides and (offset-based) alignment are looked at.
"""
from __future__ import annotations

import functools

import torch

from ..errors import UserError
from . import barrier_offsets
from .common import TMA_ALIGN, LaunchArgs, desc_fields, rebased



def _aligned(x: torch.Tensor) -> bool:
    # On a meta tensor data_ptr() is the storage offset in bytes, so views are judged as they would be on a GPU.
    return x.data_ptr() % TMA_ALIGN == 0


def _tma_copy(x: torch.Tensor) -> torch.Tensor:
    """A fresh contiguous tensor (a new allocation, so its base is aligned too)."""
    return x.clone(memory_format=torch.contiguous_format) if x.is_contiguous() else x.contiguous()


def _q_for_tma(q: torch.Tensor) -> torch.Tensor:
    """q [S, H, D] as a TMA can read it ([S*H, D] rows, dim contiguous); a copy only when it cannot be described."""
    S, H, D = q.shape
    if q.stride(2) == 1 and q.stride(1) == D and (q.stride(0) == H * D or S == 1) and _aligned(q):
        return q
    return _tma_copy(q)


def _q_rows_for_tma(q: torch.Tensor) -> torch.Tensor:
    """q for the [H/2, S, 2, D] view: heads at stride D, dims contiguous, a 16-byte row stride and base (row slices
    of a contiguous q keep them); else a contiguous copy."""
    ok = q.stride(2) == 1 and q.stride(1) == q.shape[2] and q.stride(0) % 16 == 0 and _aligned(q)
    return q if ok else _tma_copy(q)


def _kv_for_tma(kv: torch.Tensor) -> torch.Tensor:
    """kv [N, D] with dim contiguous and a 16-byte row stride (row slices and padded rows included); else a copy."""
    if kv.stride(1) == 1 and (kv.stride(0) * kv.element_size()) % TMA_ALIGN == 0 and _aligned(kv):
        return kv
    return _tma_copy(kv)


@functools.lru_cache(maxsize=64)
def _layouts(q_block: tuple, block_kv: int, D: int):
    """The shared-memory layouts of the q and kv tiles: the same for every call of a config (built once; each
    costs several µs of host time)."""
    from triton.experimental.gluon import language as gl

    return (gl.NVMMASharedLayout.get_default_for(list(q_block), gl.float8e4nv),
            gl.NVMMASharedLayout.get_default_for([block_kv, D], gl.float8e4nv))


def gluon_ws_sm90_args(t, cfg, out: torch.Tensor, max_seqlen_k: int = 0) -> LaunchArgs:
    """LaunchArgs of the gluon_ws_sm90 kernel for a Prefill `t` and its logits view `out`.

    Runtime arguments, in the kernel's order: q_desc, kv_desc, kv_scales, weights, ks, ke, out, S, N,
    max_seqlen_k, kv_scales stride, weights row stride, ks stride, ke stride, out row stride, then the
    config's schedule["args"] (n_items, kv_splits), then the logits descriptor (TMA_STORE) or None. kv_scales,
    ks and ke are passed as they are (any stride); weights
    need heads contiguous (stride(1) == 1, a Prefill guarantees it).

    Copies: none for the forms engines pass. q row slices ([s:e] of a contiguous [S, H, D]) and kv row
    slices or row-padded kv keep 16-byte aligned bases and strides, so the descriptors read them in place.
    Only a q whose rows are not [H, D] blocks at stride H*D (e.g. a head slice), or a kv with a base or row
    stride that is not a multiple of 16 bytes, is copied into a TMA-readable tensor first.
    """
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    c = cfg.constexprs
    S, N, H, D = t.S, t.N, t.heads, t.dim
    if H != c["H"] or D != c["D"]:
        raise UserError(f"config built for H={c['H']}, D={c['D']} but tensors have H={H}, D={D}")
    if t.q.dtype != torch.float8_e4m3fn or t.kv.dtype != torch.float8_e4m3fn:
        raise UserError(f"{cfg.kernel} needs float8_e4m3fn q and kv, got {t.q.dtype} and {t.kv.dtype}")
    if S == 0 or N == 0:
        raise UserError(f"{cfg.kernel} needs at least one query row and one kv row (S={S}, N={N})")
    if t.weights.stride(1) != 1:
        raise UserError("weights must be contiguous along heads (stride(1) == 1)")
    want = torch.bfloat16 if c.get("BF16") else torch.float32
    if out.dtype != want or out.stride(1) != 1:
        raise UserError(f"{cfg.kernel} writes {want} logits with contiguous columns; got {out.dtype}, "
                        f"strides {tuple(out.stride())}")
    if c.get("COMPRESSED"):
        if out.shape[1] < max_seqlen_k:
            raise UserError(f"compressed logits need {max_seqlen_k} columns, the output has {out.shape[1]}")
    elif out.stride(0) < -(-N // c["BLOCK_KV"]) * c["BLOCK_KV"]:
        raise UserError(f"logits row stride {out.stride(0)} must cover whole kv tiles of {c['BLOCK_KV']}")
    if (c["BLOCK_Q"] - 1) * out.stride(0) + -(-out.shape[1] // c["BLOCK_KV"]) * c["BLOCK_KV"] >= 2 ** 31:
        raise UserError(f"{cfg.kernel} addresses {c['BLOCK_Q']} logits rows of stride {out.stride(0)} with int32 "
                        "offsets: past 2^31 elements; pass a narrower output or choose the portable kernel")

    kv = _kv_for_tma(t.kv)
    bqh = c["BLOCK_Q"] * H
    if c.get("Q_IN_LANES"):
        # [H/2, S, 2, D]: head pair j, query row s, head parity e at s*stride(0) + (2j + e)*D; a block [H/2, BLOCK_Q,
        # 2, D] lands in shared memory as rows n = 8j + 2s + e, the column order the kernel's head sum wants.
        q = _q_rows_for_tma(t.q)
        q_layout, kv_layout = _layouts((H // 2, c["BLOCK_Q"], 2, D), c["BLOCK_KV"], D)
        q_desc = TensorDescriptor(q, [H // 2, S, 2, D], [2 * D, q.stride(0), D, 1], [H // 2, c["BLOCK_Q"], 2, D],
                                  q_layout)
    else:
        q = _q_for_tma(t.q)
        q_layout, kv_layout = _layouts((bqh, D), c["BLOCK_KV"], D)
        # q rows of [S*H, D]: row s*H + h at s*stride(0) + h*D (stride(0) == H*D, or S == 1).
        q_desc = TensorDescriptor(q, [S * H, D], [D, 1], [bqh, D], q_layout)
    kv_desc = TensorDescriptor(kv, [N, D], [kv.stride(0), 1], [c["BLOCK_KV"], D], kv_layout)
    out_desc = _out_desc(out, S, N, c) if c.get("TMA_STORE") else None
    args = [q_desc, kv_desc, t.kv_scales, t.weights, t.ks, t.ke, out, S, N, int(max_seqlen_k),
            t.kv_scales.stride(0), t.weights.stride(0), t.ks.stride(0), t.ke.stride(0), out.stride(0),
            *cfg.schedule.get("args", {}).values(), out_desc]
    # read in place, a later call's tensors go into the same descriptors; a copy (a new tensor per call) cannot
    rebuild = _rebuilder(args, q_desc, kv_desc) if q is t.q and kv is t.kv else None
    la = LaunchArgs(tuple(cfg.grid), args, dict(c), dict(cfg.options), rebuild)
    barrier_offsets.resolve_on_device(cfg, la, t.q)
    return la


def _out_desc(out: torch.Tensor, S: int, N: int, c: dict):
    """TMA_STORE: the logits [S, N] at their row stride, block [BLOCK_Q, BLOCK_KV] (the store clips past S and N)."""
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    if (out.stride(0) * out.element_size()) % TMA_ALIGN or not _aligned(out):
        raise UserError(f"{out.dtype} logits with row stride {out.stride(0)} cannot be written by TMA (16-byte base and "
                        "row stride)")
    bits = 16 if out.dtype == torch.bfloat16 else 32
    layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=bits, rank=2)
    return TensorDescriptor(out, [S, N], [out.stride(0), 1], [c["BLOCK_Q"], c["BLOCK_KV"]], layout)


def _rebuilder(args: list, q_desc, kv_desc):
    """LaunchArgs.rebuild of gluon_ws_sm90_args: fresh descriptors over the call's q, kv (and logits, with TMA_STORE), the
    rest as passed."""
    tail, q_fields, kv_fields = tuple(args[7:-1]), desc_fields(q_desc), desc_fields(kv_desc)
    out_fields = None if args[-1] is None else desc_fields(args[-1])

    def rebuild(ins, out):
        q, kv, kv_scales, weights, ks, ke = ins
        od = None if out_fields is None else rebased(out_fields, out)
        return (rebased(q_fields, q), rebased(kv_fields, kv), kv_scales, weights, ks, ke, out, *tail, od)

    return rebuild
