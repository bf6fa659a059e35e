"""Paged decode tensors: the Paged bundle, DeepGEMM's cache byte layout, random generation, checks, loading.

Checks come in two kinds: `check_paged` (dtypes, shapes, devices, strides, sizes: no data read, safe on the
hot path and inside CUDA-graph capture) and `validate_paged_values` (contexts, table bounds, finite scales, the
schedule: reads data, so it syncs; the CLI and file loading run it, the library only when asked).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from mqa_kernels.common.config import SCHEDULE_BLOCK

from ..errors import UserError
from .io import load_tensors
from .paged import KEYS, MAX_CONTEXT, PagedSpec, logits_bytes
from .finite import SLICE_ELEMS, bad_mask, first_true, refuse_nonfinite, what
from .tensors import FP8_DTYPES, FP8_NAMES, check_one_device, memory_of, quantize_per_token


@dataclass
class Paged:
    q: "torch.Tensor"  # fp8 [B, next_n, H, D]
    kv_cache: "torch.Tensor"  # uint8 [num_blocks, block_size, 1, D + 4]
    weights: "torch.Tensor"  # fp32 [B*next_n, H]
    context_lens: "torch.Tensor"  # int32 [B] or [B, next_n]
    block_table: "torch.Tensor"  # int32 [B, max_blocks]
    max_context_len: int

    @property
    def batch(self):
        return self.q.shape[0]

    @property
    def next_n(self):
        return self.q.shape[1]

    @property
    def heads(self):
        return self.q.shape[2]

    @property
    def dim(self):
        return self.q.shape[3]

    @property
    def block_size(self):
        return self.kv_cache.shape[1]

    @property
    def S(self):
        return self.batch * self.next_n

    @property
    def N(self):
        return self.max_context_len

    @property
    def fp8(self) -> str:
        return FP8_NAMES[self.q.dtype]

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in KEYS[:-1]}
        d["max_context_len"] = torch.tensor(int(self.max_context_len), dtype=torch.int64)
        return d

    def to(self, device) -> "Paged":
        return Paged(*(getattr(self, k).to(device) for k in KEYS[:-1]), self.max_context_len)

    def row_ends(self):
        """int64 [B, next_n]: one past the last kv token each row sees."""
        ctx = self.context_lens.long()
        if ctx.dim() == 2:
            return ctx.clamp_min(0)
        t = torch.arange(self.next_n, device=ctx.device)
        return (ctx[:, None] - self.next_n + t[None, :] + 1).clamp_min(0)


def pack_cache(kv, scales, block_size: int):
    """kv fp8 [num_blocks*block_size, D] and scales fp32 [num_blocks*block_size] -> uint8 cache
    [num_blocks, block_size, 1, D + 4] in DeepGEMM's byte layout."""
    T, D = kv.shape
    nb = T // block_size
    data = kv.view(torch.uint8).reshape(nb, block_size * D)
    sf = scales.float().contiguous().view(torch.uint8).reshape(nb, block_size * 4)
    return torch.cat([data, sf], dim=1).reshape(nb, block_size, 1, D + 4)


def unpack_blocks(kv_cache, blocks, fp8_dtype):
    """Dequantisable contents of `blocks` (int64 [n]): fp8 [n*block_size, D] and fp32 scales [n*block_size]."""
    nb, bs, _, dp4 = kv_cache.shape
    D = dp4 - 4
    flat = kv_cache[blocks].reshape(len(blocks), bs * dp4)
    kv = flat[:, : bs * D].contiguous().view(fp8_dtype).reshape(-1, D)
    sf = flat[:, bs * D:].contiguous().view(torch.float32).reshape(-1)
    return kv, sf


def random_paged(spec: PagedSpec, device="cpu", fp8: str = "e4m3fn") -> Paged:
    """Random, never-zero inputs from the seed: contexts, a shuffled block table (blocks not contiguous),
    q randn -> fp8, kv quantised per token into the cache, weights randn."""
    ctx = spec.context_lengths()
    B, T, H, D, bs = spec.batch, spec.next_n, spec.heads, spec.dim, spec.block_size
    if len(ctx) != B:
        raise UserError(f"{len(ctx)} context lengths for --batch {B}")
    blocks_per = [-(-c // bs) for c in ctx]
    max_blocks = max(blocks_per)
    num_blocks = sum(blocks_per) + 3  # a few spare blocks nobody references
    cpu = torch.Generator().manual_seed(spec.seed)
    perm = torch.randperm(num_blocks, generator=cpu).to(torch.int32)
    table = torch.zeros(B, max_blocks, dtype=torch.int32)
    used = 0
    for b, n in enumerate(blocks_per):
        table[b, :n] = perm[used:used + n]
        used += n
    gen = torch.Generator(device=device).manual_seed(spec.seed)
    q = torch.randn(B, T, H, D, generator=gen, device=device).to(FP8_DTYPES[fp8])
    weights = torch.randn(B * T, H, generator=gen, device=device)
    pieces = []
    step = max(1, (1 << 22) // (bs * D))  # blocks per generation chunk: ~16 MB of randn at a time
    for b0 in range(0, num_blocks, step):
        n = min(step, num_blocks - b0)
        kv, sf = quantize_per_token(torch.randn(n * bs, D, generator=gen, device=device), fp8)
        pieces.append(pack_cache(kv, sf, bs))
    kv_cache = torch.cat(pieces, dim=0)
    context_lens = torch.tensor(ctx, dtype=torch.int32, device=device)
    return Paged(q, kv_cache, weights, context_lens, table.to(device), max(ctx))


def check_paged(t: Paged) -> None:
    """Dtypes, shapes, devices and strides: no data is read (the library's hot path; safe inside capture).

    Honoured strides: q's batch/draft/head strides, weights' row stride, context_lens' strides, the
    block table's row stride (row slices, bt[::n]), the cache's block stride (a view inside a bigger
    multi-layer buffer). Refused: layouts whose innermost dimension is not contiguous.
    """
    if t.q.dtype not in FP8_NAMES:
        raise UserError(f"q must be fp8 e4m3 (float8_e4m3fn or float8_e4m3fnuz), got {t.q.dtype}")
    if t.q.dim() != 4:
        raise UserError(f"q must be [B, next_n, H, D], got shape {list(t.q.shape)}")
    B, T, H, D = t.q.shape
    if t.kv_cache.dtype != torch.uint8:
        raise UserError(f"kv_cache must be uint8 [num_blocks, block_size, 1, D + 4] (block_size*D fp8 bytes, then "
                        f"block_size fp32 scales per block), got {t.kv_cache.dtype}")
    if t.kv_cache.dim() != 4 or t.kv_cache.shape[2] != 1 or t.kv_cache.shape[3] != D + 4:
        raise UserError(f"kv_cache must be [num_blocks, block_size, 1, {D + 4}] uint8 (D = {D} fp8 bytes + 4 scale "
                        f"bytes per token), got shape {list(t.kv_cache.shape)}")
    nb, bs = t.kv_cache.shape[:2]
    if nb == 0:
        raise UserError("kv_cache holds no blocks")
    if t.kv_cache.stride(3) != 1 or t.kv_cache.stride(1) != D + 4 or t.kv_cache.stride(0) % 4:
        raise UserError(f"kv_cache blocks must be contiguous inside (strides [4k, {D + 4}, *, 1]), got strides "
                        f"{list(t.kv_cache.stride())}")
    if t.kv_cache.data_ptr() % 4:
        raise UserError("kv_cache must start on a 4-byte boundary (its fp32 scales are read in place)")
    if t.q.stride(3) != 1:
        raise UserError(f"q must be contiguous along D (stride(3) == 1), got strides {list(t.q.stride())}")
    if t.weights.dtype != torch.float32 or tuple(t.weights.shape) != (B * T, H):
        raise UserError(f"weights must be float32 [{B * T}, {H}], got {t.weights.dtype} {list(t.weights.shape)}")
    if t.weights.stride(1) != 1:
        raise UserError(f"weights must be contiguous along heads, got strides {list(t.weights.stride())}")
    if t.context_lens.dtype != torch.int32 or tuple(t.context_lens.shape) not in ((B,), (B, T)):
        raise UserError(f"context_lens must be int32 [{B}] or [{B}, {T}], got {t.context_lens.dtype} "
                        f"{list(t.context_lens.shape)}")
    if t.block_table.dtype != torch.int32 or t.block_table.dim() != 2 or t.block_table.shape[0] != B:
        raise UserError(f"block_table must be int32 [{B}, max_blocks], got {t.block_table.dtype} "
                        f"{list(t.block_table.shape)}")
    if t.block_table.stride(1) != 1 and t.block_table.shape[1] > 1:
        raise UserError(f"block_table must be contiguous along blocks, got strides {list(t.block_table.stride())}")
    m = int(t.max_context_len)
    if m < 1:
        raise UserError(f"max_context_len must be >= 1, got {t.max_context_len}")
    if m > MAX_CONTEXT:
        raise UserError(f"max_context_len {m:,} is past the decode kernels' 32-bit token offsets (at most "
                        f"{MAX_CONTEXT:,})")
    check_one_device(t, KEYS[1:-1])
    dev = t.q.device
    need, have = logits_bytes(B * T, m, 2), memory_of(dev)  # bf16, the smaller output: what any call needs
    if have is not None and need > have:
        raise UserError(f"max_context_len {m:,}: the logits [{B * T}, {m:,}] need {need:,} bytes, more than the "
                        f"{have:,} bytes of {dev}")


def validate_paged_values(t: Paged, schedule_meta=None, shuffled: bool = False) -> None:
    """The checks that read data (they sync): contexts against max_context_len and the table, table entries,
    no NaN or inf in q, the weights, or the cache's fp8 values and scales of the tokens the call reads (shuffled:
    aiter's pre-shuffled block layout), and schedule_meta when given (the API gives it where the call's plan
    reads it: mqa_cli.api.logits.read_schedule). A context shorter than next_n leaves empty rows (allowed)."""
    nb, bs = t.kv_cache.shape[:2]
    ctx = t.context_lens.long()
    if (ctx < 0).any():
        raise UserError(f"context_lens must be >= 0, found {int(ctx.min())}")
    ends = t.row_ends()
    seq_end = ends.max(dim=1).values  # [B]
    if int(seq_end.max()) > int(t.max_context_len):
        b = int(seq_end.argmax())
        raise UserError(f"sequence {b} has {int(seq_end[b])} tokens, more than max_context_len = {t.max_context_len}")
    need = (seq_end + bs - 1) // bs
    if int(need.max()) > t.block_table.shape[1]:
        b = int(need.argmax())
        raise UserError(f"sequence {b} has {int(seq_end[b])} tokens, longer than its block table covers "
                        f"({t.block_table.shape[1]} blocks of {bs} = {t.block_table.shape[1] * bs})")
    used = torch.arange(t.block_table.shape[1], device=ctx.device)[None, :] < need[:, None]
    bad = used & ((t.block_table < 0) | (t.block_table >= nb))
    if bad.any():
        b, i = (int(x) for x in bad.nonzero()[0])
        raise UserError(f"block_table[{b}, {i}] = {int(t.block_table[b, i])} is out of range [0, {nb}) "
                        f"(num_blocks of kv_cache)")
    refuse_nonfinite("q", t.q)
    refuse_nonfinite("weights", t.weights)
    refuse_nonfinite_cache(t, used, seq_end, shuffled)
    if schedule_meta is not None:
        validate_schedule(t, schedule_meta, seq_end)


def _token_rows(raw: torch.Tensor, bs: int, D: int, shuffled: bool) -> torch.Tensor:
    """uint8 [n, bs * D] fp8 bytes of n blocks -> [n, bs, D], token-major (aiter's pre-shuffled layout puts token s,
    dim d at byte (s // 16) * 16 D + (d // 16) * 256 + (s % 16) * 16 + d % 16)."""
    n = raw.shape[0]
    if not shuffled:
        return raw.reshape(n, bs, D)
    return raw.reshape(n, bs // 16, D // 16, 16, 16).permute(0, 1, 3, 2, 4).reshape(n, bs, D)


def refuse_nonfinite_cache(t: Paged, used: torch.Tensor, seq_end: torch.Tensor, shuffled: bool = False) -> None:
    """One-line UserError at the first NaN fp8 value or NaN / inf scale among the tokens the call reads: token p <
    its sequence's end, through the table entries `used` [B, max_blocks]. Other blocks and the slots past a
    sequence's end (an engine's free or not yet written memory) are not read by the kernels, nor here. Each
    referenced block is read once (shared prefix blocks too), in slices of bounded size."""
    nb, bs = t.kv_cache.shape[:2]
    D = t.dim
    pairs = used.nonzero()  # [P, 2]: (sequence, table column) of each referenced entry, in table order
    ids = t.block_table[used].long()
    blocks, inv = torch.unique(ids, return_inverse=True)
    bad = {"fp8": torch.zeros(len(blocks), bs, dtype=torch.bool, device=ids.device)}
    bad["scale"] = torch.zeros_like(bad["fp8"])
    step = max(1, SLICE_ELEMS // (bs * (D + 4)))
    for c0 in range(0, len(blocks), step):
        raw = t.kv_cache[blocks[c0:c0 + step]].reshape(-1, bs * (D + 4))
        bad["fp8"][c0:c0 + step] = bad_mask(_token_rows(raw[:, :bs * D], bs, D, shuffled), t.q.dtype).any(2)
        bad["scale"][c0:c0 + step] = bad_mask(raw[:, bs * D:].contiguous().view(torch.float32))
    token = pairs[:, 1:] * bs + torch.arange(bs, device=ids.device)  # [P, bs]
    live = token < seq_end.to(ids.device)[pairs[:, 0]][:, None]
    for kind, mask in bad.items():
        at = first_true(mask[inv] & live)
        if at is None:
            continue
        p, slot = at
        b, blk = int(pairs[p, 0]), int(ids[p])
        raw = t.kv_cache[blk:blk + 1].reshape(1, bs * (D + 4))
        if kind == "fp8":
            rows = _token_rows(raw[:, :bs * D], bs, D, shuffled)[0]
            dim = first_true(bad_mask(rows[slot], t.q.dtype))[0]
            value, where = what(rows, (slot, dim)), f"slot {slot}, dim {dim}"
        else:
            scales = raw[0, bs * D:].contiguous().view(torch.float32)
            value, where = f"{what(scales, (slot,))} as a scale", f"slot {slot}"
        raise UserError(f"kv_cache holds {value} at sequence {b}, token {int(token[p, slot])} (block {blk}, {where})")


def schedule_atoms(next_n: int) -> int:
    """Entries per sequence in DeepGEMM's sm90 schedule format: a q atom is 2 draft rows when next_n >= 2."""
    return 1 if next_n < 2 else -(-next_n // 2)


def validate_schedule(t: Paged, schedule_meta, seq_end=None) -> None:
    """schedule_meta fits this call: int32 [P + 1, 2] with P >= 1; entry 0 is (0, 0) and entry P is (batch, 0)
    (this library's and DeepGEMM's format at next_n 1 and 2) or (batch x atoms, 0) (DeepGEMM's q atoms of 2 draft
    rows); entries in (sequence or atom, block) order, each block within what its sequence has in 64-token
    blocks. The kernels read any schedule safely; this refuses one that was computed for another call."""
    s = schedule_meta
    if (not isinstance(s, torch.Tensor) or s.dtype != torch.int32 or s.dim() != 2 or s.shape[1] != 2
            or s.shape[0] < 2):
        raise UserError("schedule_meta must be int32 [P + 1, 2] with P >= 1 (get_paged_mqa_logits_metadata's)")
    e = s.detach().to("cpu", torch.int64)
    B, T = t.batch, t.next_n
    ends = {B: 1, B * schedule_atoms(T): schedule_atoms(T)}
    first, last = tuple(e[0].tolist()), tuple(e[-1].tolist())
    if first != (0, 0):
        raise UserError(f"schedule_meta[0] is {first}, not (0, 0)")
    if last[1] != 0 or last[0] not in ends:
        want = " or ".join(f"({n}, 0)" for n in sorted(ends))
        raise UserError(f"schedule_meta ends at {last}, not {want}: it was computed for another batch "
                        f"(get_paged_mqa_logits_metadata(context_lens, 64, num_sms) of this call's context_lens)")
    per = ends[last[0]]
    seq, blk = e[:, 0], e[:, 1]
    bad = (seq < 0) | (seq > last[0]) | (blk < 0)
    if not bad.any():
        if seq_end is None:
            seq_end = t.row_ends().max(dim=1).values
        blocks = torch.cat([(seq_end.to("cpu") + SCHEDULE_BLOCK - 1) // SCHEDULE_BLOCK, torch.zeros(1, dtype=torch.int64)])
        bad = blk > blocks[torch.clamp(seq // per, max=B)]
    if bad.any():
        i = int(bad.nonzero()[0, 0])
        raise UserError(f"schedule_meta[{i}] = {tuple(e[i].tolist())} is out of range for this call's batch "
                        f"{B} and context lengths")
    step = (seq[1:] - seq[:-1]) * (1 << 32) + (blk[1:] - blk[:-1])  # blocks fit 32 bits: the order of the pairs
    if (step < 0).any():
        i = int((step < 0).nonzero()[0, 0]) + 1
        raise UserError(f"schedule_meta[{i}] = {tuple(e[i].tolist())} comes before entry {i - 1} = "
                        f"{tuple(e[i - 1].tolist())}: entries must be in (sequence, block) order")


def load_paged(path, max_bytes: int | None = None) -> Paged:
    d = load_tensors(path, KEYS, max_bytes)
    m = d["max_context_len"]
    if m.numel() != 1 or m.dtype.is_floating_point or m.dtype == torch.bool:
        raise UserError(f"{path}: max_context_len must be a 0-d integer tensor, got {m.dtype} {list(m.shape)}")
    t = Paged(d["q"], d["kv_cache"], d["weights"], d["context_lens"], d["block_table"], int(m.item()))
    try:  # every check, data included
        check_paged(t)
        validate_paged_values(t)
    except UserError as e:
        raise UserError(f"{path}: {e}") from None
    return t


def meta_paged(shape) -> Paged:
    """A Paged of the shape's sizes on the meta device (for cross-compiling: shapes and strides, no memory)."""
    B, T, H, D, bs, N = shape.batch, shape.next_n, shape.heads, shape.dim, shape.block_size, shape.N
    nb = B * -(-N // bs)
    m = dict(device="meta")
    return Paged(torch.empty(B, T, H, D, dtype=FP8_DTYPES[shape.fp8], **m),
                 torch.empty(nb, bs, 1, D + 4, dtype=torch.uint8, **m), torch.empty(B * T, H, **m),
                 torch.empty(B, dtype=torch.int32, **m), torch.empty(B, -(-N // bs), dtype=torch.int32, **m), N)
