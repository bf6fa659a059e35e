"""The persistent paged decode kernel (mqa_kernels.decode.paged) through the interpreter, against a float64 reference,
and its device-side schedule metadata (mqa_cli.launch.schedule)."""
from __future__ import annotations

import pytest
import torch

from mqa_cli.launch import families as launchers
from mqa_cli.launch.paged import paged_args
from mqa_cli.plan.build import with_schedule
from mqa_cli.launch.schedule import get_paged_mqa_logits_metadata
from mqa_cli.problem.paged_tensors import Paged as PagedInputs
from mqa_kernels.decode.paged.config import paged_config, paged_rows

from .reference64 import inside, pack_blocks, paged64, paged_ends

FP8 = torch.float8_e4m3fn
POISON = 12345.0


def make_inputs(ctx, next_n=1, H=8, D=64, bs=16, *, seed=0, table_step=1, q_rows_sliced=False,
                block_pad=0, max_context_len=None) -> PagedInputs:
    """Random non-zero inputs: shuffled block table (with stale entries past each context), a cache whose
    blocks may sit `block_pad` bytes apart (a strided view), optional row-sliced q / weights and bt[::step]."""
    g = torch.Generator().manual_seed(seed)
    ctx = torch.as_tensor(ctx, dtype=torch.int32)
    B = ctx.shape[0]
    hi = paged_ends(ctx, next_n).max(dim=1).values
    n_ctx = int(hi.max()) if B else 0
    N = max_context_len if max_context_len is not None else max(1, n_ctx)
    max_blocks = max(1, -(-N // bs)) + 1
    num_blocks = B * max_blocks + 3
    perm = torch.randperm(num_blocks, generator=g).to(torch.int32)
    table_full = perm[: B * max_blocks].reshape(B, max_blocks)
    table = table_full if table_step == 1 else inside(  # the engine's bt[::n]: rows of a bigger table
        table_full, (B * table_step, max_blocks + 2), (slice(0, None, table_step), slice(max_blocks)), num_blocks - 1)
    # Stale entries past each sequence's blocks point nowhere valid: the kernel must never read them.
    for b in range(B):
        used = -(-int(hi[b]) // bs)
        table[b, used:] = 10 ** 8
    kv = (torch.randn(num_blocks, bs, D, generator=g) * 2).to(FP8)
    sf = torch.rand(num_blocks, bs, generator=g) + 0.5
    row_bytes = bs * (D + 4)  # a block's bytes, `block_pad` more between blocks
    cache = inside(pack_blocks(kv, sf), (num_blocks, row_bytes + block_pad), (slice(None), slice(row_bytes)), 0)
    cache = cache.view(num_blocks, bs, 1, D + 4)
    extra = 3 if q_rows_sliced else 0
    q_full = torch.randn(B + extra, next_n, H, D, generator=g).to(FP8)
    w_full = torch.randn((B + extra) * next_n, H, generator=g)
    q = q_full[extra:] if q_rows_sliced else q_full
    w = w_full[extra * next_n:] if q_rows_sliced else w_full
    return PagedInputs(q, cache, w, ctx, table, N)


def reference(t: PagedInputs) -> torch.Tensor:
    """float64 [B*next_n, N], -inf where dead: tests/reference64.py's, from the blocks' bytes (a block's bs*D fp8
    values, then its bs fp32 scales)."""
    nb, bs, D, N = t.kv_cache.shape[0], t.block_size, t.dim, t.max_context_len
    flat = torch.as_strided(t.kv_cache, (nb, bs * (D + 4)), (t.kv_cache.stride(0), 1))
    kv = flat[:, : bs * D].contiguous().view(FP8).reshape(nb, bs, D)
    sf = flat[:, bs * D:].contiguous().view(torch.float32).reshape(nb, bs)
    ends = paged_ends(t.context_lens, t.next_n).clamp_max(N)
    return paged64(t.q, kv, sf, t.weights, ends, t.block_table, N)[0]


def run(t: PagedInputs, clean: bool, *, bf16=False, meta=None, programs=None, override=None, out_stride=None):
    cfg = paged_config(heads=t.heads, dim=t.dim, next_n=t.next_n, block_size=t.block_size, batch=t.batch,
                       max_context_len=t.max_context_len, clean=clean, bf16=bf16, backend="interpreter",
                       units=programs, override=override)
    dtype = torch.bfloat16 if bf16 else torch.float32
    stride = out_stride or -(-t.max_context_len // 128) * 128
    buf = torch.full((t.S, stride), POISON, dtype=dtype)
    out = buf[:, : t.max_context_len]
    launchers.run(t, with_schedule(cfg, meta is None), out, schedule_meta=meta)
    return out, buf


def check(t: PagedInputs, clean: bool, *, bf16=False, **kw):
    out, buf = run(t, clean, bf16=bf16, **kw)
    ref = reference(t)
    got = out.to(torch.float64)
    live = torch.isfinite(ref)
    if clean:
        assert torch.equal(torch.isneginf(got), torch.isneginf(ref)), "-inf pattern differs"
    else:
        assert not torch.isneginf(got[live]).any()
    # Columns past max_context_len are never written.
    assert (buf[:, t.max_context_len:] == POISON).all()
    if live.any():
        a, r = got[live], ref[live]
        assert torch.isfinite(a).all()
        err = ((a - r).norm() / r.norm().clamp_min(1e-30)).item()
        assert err < (1e-2 if bf16 else 1e-5), err


def covers_once(meta: torch.Tensor, ctx: torch.Tensor, block_kv: int) -> None:
    """Every (sequence, block) unit belongs to exactly one range, ranges balanced within one block."""
    if ctx.dim() == 2:
        ctx = ctx.amax(dim=1) if ctx.shape[1] else ctx.new_zeros(ctx.shape[0])
    units = [-(-max(0, int(c)) // block_kv) for c in ctx]
    cum = [0]
    for u in units:
        cum.append(cum[-1] + u)
    lin = []
    for s, blk in meta.tolist():
        lin.append(cum[s] + blk if s < len(units) else cum[-1])
        if s < len(units):
            assert 0 <= blk < units[s]
    assert lin[0] == 0 and lin[-1] == cum[-1] and meta[-1].tolist() == [len(units), 0]
    sizes = [b - a for a, b in zip(lin, lin[1:])]
    assert min(sizes) >= 0 and max(sizes) - min(sizes) <= 1 and sum(sizes) == cum[-1]


# ------------------------------------------------------------------------------------------------ metadata

@pytest.mark.parametrize("ctx, block_kv, P", [
    ([100, 0, 37, 4000, 1], 64, 7),
    ([0, 0, 0], 16, 4),
    ([5], 64, 132),
    ([[3, 9], [0, 0], [70, 65], [1, 200]], 32, 5),
    (list(range(0, 3000, 97)), 16, 13),
])
def test_metadata_balanced_and_complete(ctx, block_kv, P):
    c = torch.tensor(ctx, dtype=torch.int32)
    meta = get_paged_mqa_logits_metadata(c, block_kv, P)
    assert meta.dtype == torch.int32 and meta.shape == (P + 1, 2)
    covers_once(meta, c, block_kv)
    # A strided (non-contiguous) view gives the same answer.
    big = torch.zeros(c.shape[0] * 2, *c.shape[1:], dtype=torch.int32)
    big[::2] = c
    assert torch.equal(get_paged_mqa_logits_metadata(big[::2], block_kv, P), meta)


# ------------------------------------------------------------------------------------------------ kernel

@pytest.mark.parametrize("ctx, next_n, H, D, bs, clean", [
    ([37, 100, 1, 64], 1, 8, 64, 16, True),
    ([200, 3, 129], 2, 16, 128, 32, True),
    ([130, 64, 7], 3, 8, 64, 64, False),
    ([90, 45], 4, 32, 64, 16, True),
    ([70], 8, 8, 64, 32, True),
    ([66, 150], 8, 64, 64, 16, False),  # next_n x H = 512: two dots per tile
    ([150, 1, 0, 33], 2, 64, 128, 64, False),
])
def test_kernel_matches_reference(ctx, next_n, H, D, bs, clean):
    check(make_inputs(ctx, next_n, H, D, bs, seed=len(ctx) + next_n), clean)


def test_two_d_context_lens_with_zeros_clean():
    ctx = torch.tensor([[5, 0, 40], [0, 0, 0], [77, 80, 3], [16, 16, 16]], dtype=torch.int32)
    check(make_inputs(ctx, 3, 16, 64, 16, seed=3), True)
    check(make_inputs(ctx, 3, 16, 64, 16, seed=4), False)


def test_one_d_zero_and_short_contexts_clean():
    # ctx 0 and ctx < next_n: empty or partly empty rows; max_context_len past every context.
    check(make_inputs([0, 1, 2, 50], 2, 8, 64, 32, seed=5, max_context_len=70), True)
    check(make_inputs([0, 0], 1, 8, 64, 16, seed=6, max_context_len=20), True)


def test_bf16_output():
    check(make_inputs([80, 33, 129], 2, 16, 64, 32, seed=7), True, bf16=True)
    check(make_inputs([80, 33], 1, 8, 128, 64, seed=8), False, bf16=True)


def test_strided_forms():
    # bt[::2], row-sliced q and weights, cache blocks 64 bytes apart, a wider output row stride.
    t = make_inputs([100, 31, 64], 2, 8, 64, 16, seed=9, table_step=2, q_rows_sliced=True, block_pad=64)
    assert t.block_table.stride(0) > t.block_table.shape[1] and t.q.storage_offset() > 0
    assert t.kv_cache.stride(0) > t.block_size * (t.dim + 4)
    check(t, True, out_stride=260)
    t2 = make_inputs(torch.tensor([[10, 60], [33, 0]], dtype=torch.int32)[::1], 2, 8, 64, 32, seed=10, block_pad=4)
    check(t2, False)


def test_strided_two_d_context_lens():
    base = torch.tensor([[9, 0, 50, 0], [31, 0, 32, 0], [0, 0, 0, 0]], dtype=torch.int32)
    t = make_inputs(base[:, ::2], 2, 8, 64, 16, seed=11)
    assert t.context_lens.stride(1) == 2
    check(t, True)


@pytest.mark.parametrize("programs, subs, block_kv", [(1, 1, 16), (3, 2, 32), (9, 3, 16), (64, 1, 64), (5, 2, 64)])
def test_any_schedule_width(programs, subs, block_kv):
    """Many or few ranges, several sub-programs per range, ranges cutting sequences mid-way."""
    t = make_inputs([300, 0, 45, 129, 16], 2, 8, 64, 16, seed=12 + programs)
    meta = get_paged_mqa_logits_metadata(t.context_lens, t.block_size, programs)
    check(t, True, meta=meta, override={"SUBS": subs, "BLOCK_KV": block_kv})


def test_rows_override_splits_the_dot():
    """next_n rows over two narrower dots (ROWS 1 at next_n 2; ROWS 2 at next_n 4)."""
    check(make_inputs([77, 130, 5], 2, 16, 64, 32, seed=21), True, override={"ROWS": 1})
    check(make_inputs([[40, 0, 3, 9], [9, 99, 98, 97]], 4, 64, 128, 16, seed=22), False, override={"ROWS": 2})
    with pytest.raises(ValueError):
        run(make_inputs([10], 4, 16, 64, 16), False, override={"ROWS": 1})


def test_args_and_config_shapes():
    t = make_inputs([64, 10], 2, 16, 128, 64, seed=13)
    cfg = paged_config(heads=16, dim=128, next_n=2, block_size=64, batch=2, max_context_len=64, clean=False,
                       bf16=False, backend="cuda", units=132)
    assert cfg.variant == "paged" and cfg.launcher == "paged" and cfg.grid == (132 * cfg.constexprs["SUBS"],)
    meta = get_paged_mqa_logits_metadata(t.context_lens, 64, 132)
    out = torch.empty(4, 128)[:, :64]
    a = paged_args(t, cfg, out, meta)
    assert a.grid == (132 * cfg.constexprs["SUBS"],)
    assert paged_rows(8, 64) == (4, 2) and paged_rows(1, 8) == (2, 1) and paged_rows(3, 16) == (4, 1)
    assert len(a.args) == len(cfg.jitted().arg_names) - len(cfg.constexprs)


# ------------------------------------------------------------------------------------- in-kernel schedule
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from mqa_kernels.decode.paged.kernel import _split_point  # noqa: E402


@triton.jit
def _points(ctx_ptr, out_ptr, batch, stride_b, stride_t, P, NEXT_N: tl.constexpr, NP: tl.constexpr,
            BS: tl.constexpr):
    """Every split point p = 0..P as the paged kernel computes it for itself (chunks of 4 sequences)."""
    for p in range(0, P + 1):
        seq, off = _split_point(ctx_ptr, batch, stride_b, stride_t, p, P, NEXT_N, NP, BS, 4)
        tl.store(out_ptr + 2 * p, seq)
        tl.store(out_ptr + 2 * p + 1, off)


def _split_points(ctx: torch.Tensor, next_n: int, block_kv: int, P: int) -> torch.Tensor:
    out = torch.full((P + 1, 2), -7, dtype=torch.int32)
    two_d = ctx.dim() == 2
    np_ = 1 << max(0, (next_n - 1).bit_length())
    _points[(1,)](ctx, out, ctx.shape[0], ctx.stride(0), ctx.stride(1) if two_d else 0, P, NEXT_N=next_n, NP=np_,
                  BS=block_kv)
    return out


@pytest.mark.parametrize("ctx,next_n,block_kv,P", [
    ([100, 0, 37, 4000, 1, 0, 64], 1, 64, 5),
    ([0, 0, 0, 129], 2, 16, 7),
    ([[5, 70], [0, 0], [64, 65], [300, 1]], 2, 32, 3),
    ([9, 9, 9, 9, 9, 9, 9, 9, 9], 3, 16, 1),
])
def test_self_schedule_matches_the_metadata(ctx, next_n, block_kv, P):
    """The split each program computes for itself (schedule_meta=None) is the metadata's, entry for entry."""
    from mqa_cli.launch.schedule import _metadata_torch

    c = torch.tensor(ctx, dtype=torch.int32)
    assert torch.equal(_split_points(c, next_n, block_kv, P), _metadata_torch(c, block_kv, P))
