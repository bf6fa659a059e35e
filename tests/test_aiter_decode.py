"""aiter's decode form (mqa_cli.aiter.deepgemm_fp8_paged_mqa_logits), as vLLM's ROCm path calls it: the caller's
[B * next_n, max_model_len] fp32 buffer written in place, plain and pre-shuffled caches, the block sizes engines
use, against the float64 reference (exact -inf past each row's end; columns past max_model_len untouched).

The pre-shuffled cache is built here from aiter's definition (aiter.ops.shuffle.shuffle_weight, layout (16, 16),
on each block's [block_size, D] fp8 rows: view [nb, bs/16, 16, D/32, 2, 16], permute (0, 1, 3, 4, 2, 5)), written out
with torch ops, independent of the kernel's address formula.
"""
import pytest
import torch

from mqa_cli import aiter
from mqa_cli.errors import UserError

from .reference64 import FP8, assert_logits, fp8_q, fp8_rows, gen, paged64, paged_ends

SENTINEL = 12345.0


def aiter_shuffle(rows: torch.Tensor) -> torch.Tensor:
    """aiter's shuffle_weight(layout=(16, 16)) of fp8 [nb, bs, D] (1-byte elements: 16 per piece)."""
    nb, bs, D = rows.shape
    x = rows.view(torch.uint8).view(nb, bs // 16, 16, D // 32, 2, 16)
    return x.permute(0, 1, 3, 4, 2, 5).contiguous().view(nb, bs, D).view(FP8)


def problem(B, T, H, D, bs, contexts, seed, shuffled, pad=0, fp8_view=True):
    g = gen(seed)
    q = fp8_q((B, T, H, D), g)
    w = torch.randn(B * T, H, generator=g)
    blocks = [-(-c // bs) for c in contexts]
    nb = sum(blocks) + 2
    kv, sf = fp8_rows(nb * bs, D, g)
    kv_blocks, scales = kv.view(nb, bs, D), sf.view(nb, bs)
    data = aiter_shuffle(kv_blocks) if shuffled else kv_blocks
    raw = torch.zeros(nb, bs * (D + 4 + pad), dtype=torch.uint8)
    raw[:, : bs * D] = data.contiguous().view(torch.uint8).reshape(nb, bs * D)
    raw[:, bs * D: bs * (D + 4)] = scales.contiguous().view(torch.uint8).reshape(nb, bs * 4)
    cache = raw.view(nb, bs, 1, D + 4 + pad)
    if fp8_view:
        cache = cache.view(FP8)  # aiter passes the cache as an fp8 tensor
    perm = torch.randperm(nb, generator=g).to(torch.int32)
    table = torch.zeros(B, max(blocks) + 1, dtype=torch.int32)
    used = 0
    for b, n in enumerate(blocks):
        table[b, :n] = perm[used:used + n]
        used += n
    ctx = torch.tensor(contexts, dtype=torch.int32)
    return q, cache, w, ctx, table, kv_blocks, scales


def run_and_check(B, T, bs, contexts, shuffled, seed, H=16, D=64, pad=0, extra_cols=5):
    q, cache, w, ctx, table, kv_blocks, scales = problem(B, T, H, D, bs, contexts, seed, shuffled, pad)
    max_model_len = max(contexts) + 7
    buf = torch.full((B * T, max_model_len + extra_cols), SENTINEL)
    got = aiter.deepgemm_fp8_paged_mqa_logits(q, cache, w, buf, ctx, table, max_model_len, ChunkK=256,
                                              Preshuffle=shuffled, KVBlockSize=bs, WavePerEU=2)
    assert got is buf
    ref, mag = paged64(q, kv_blocks, scales, w, paged_ends(ctx, T), table, max_model_len)
    assert_logits(buf[:, :max_model_len], ref, mag, clean=True)
    assert (buf[:, max_model_len:] == SENTINEL).all(), "columns past max_model_len were written"


@pytest.mark.parametrize("next_n", [1, 2, 4])
@pytest.mark.parametrize("shuffled", [False, True], ids=["plain", "preshuffled"])
def test_decode_form_matches_reference(next_n, shuffled):
    # contexts shorter than next_n (empty rows), inside one block, and across several
    run_and_check(3, next_n, 16, [next_n - 1 if next_n > 1 else 1, 37, 70], shuffled, seed=40 + next_n)


@pytest.mark.parametrize("bs,shuffled", [(1, False), (64, True), (64, False), (256, True)])
def test_engine_block_sizes(bs, shuffled):
    run_and_check(2, 2, bs, [90, 300], shuffled, seed=bs, H=8, D=128 if bs == 64 else 64)


def test_padded_cache_and_bf16_free_buffer():
    """aiter's padded cast (kv_cache_cast_to_fp8(padding=True): the block padded to 16 bytes) read through the
    block stride, a uint8 cache as well as an fp8 one."""
    run_and_check(2, 2, 16, [20, 45], True, seed=9, pad=12)
    q, cache, w, ctx, table, kv_blocks, scales = problem(1, 1, 16, 64, 16, [33], 5, False, fp8_view=False)
    buf = torch.full((1, 40), SENTINEL)
    aiter.deepgemm_fp8_paged_mqa_logits(q, cache, w, buf, ctx, table, 40, KVBlockSize=16)
    ref, mag = paged64(q, kv_blocks, scales, w, paged_ends(ctx, 1), table, 40)
    assert_logits(buf, ref, mag, clean=True)


def test_decode_form_refusals():
    q, cache, w, ctx, table, *_ = problem(2, 2, 16, 64, 16, [20, 30], 3, False)
    buf = torch.zeros(4, 40)

    def call(**kw):
        args = dict(q_fp8=q, kv_cache=cache, weights=w, out_logits=buf, context_lens=ctx, kv_indices=table,
                    max_model_len=40, KVBlockSize=16)
        args.update(kw)
        with pytest.raises(UserError) as e:
            aiter.deepgemm_fp8_paged_mqa_logits(**args)
        assert "\n" not in str(e.value)
        return str(e.value)

    assert "KVBlockSize" in call(KVBlockSize=32)
    assert "ChunkK" in call(ChunkK=24)
    assert "out_logits" in call(out_logits=torch.zeros(3, 40))
    assert "out_logits" in call(out_logits=torch.zeros(4, 39))
    assert "out_logits" in call(out_logits=torch.zeros(4, 40, dtype=torch.bfloat16))
    assert "Preshuffle" in call(Preshuffle=1)
    assert "max_model_len" in call(max_model_len=torch.tensor(40))
    assert "WavePerEU" in call(WavePerEU=0)
    q1, cache1, w1, ctx1, table1, *_ = problem(1, 1, 16, 64, 1, [5], 3, False)
    assert "Preshuffle" in call(q_fp8=q1, kv_cache=cache1, weights=w1, context_lens=ctx1, kv_indices=table1,
                                out_logits=torch.zeros(1, 40), KVBlockSize=1, Preshuffle=True)


@pytest.mark.parametrize("shuffled", [False, True], ids=["plain", "preshuffled"])
def test_nan_in_the_cache_is_found_in_either_layout(shuffled):
    """check_values reads a pre-shuffled cache token by token too: a NaN byte of a token read is refused, naming the
    token and dim; the same byte one token past the sequence's end (not read) is not."""
    q, cache, w, ctx, table, *_ = problem(2, 2, 16, 64, 16, [20, 30], 3, shuffled)
    D, bs = 64, 16

    def with_nan(token: int, dim: int):
        blk, s = int(table[1, token // bs]), token % bs
        byte = (s // 16) * 16 * D + (dim // 16) * 256 + (s % 16) * 16 + dim % 16 if shuffled else s * D + dim
        raw = cache.view(torch.uint8).reshape(cache.shape[0], -1).clone()
        raw[blk, byte] = 0x7F
        return raw.view(cache.shape).view(cache.dtype), blk, s

    def call(c):
        return aiter.deepgemm_fp8_paged_mqa_logits(q, c, w, torch.zeros(4, 40), ctx, table, 40, KVBlockSize=bs,
                                                   Preshuffle=shuffled, check_values=True)

    bad, blk, s = with_nan(29, 37)
    with pytest.raises(UserError) as e:
        call(bad)
    assert str(e.value) == f"kv_cache holds NaN (fp8 byte 0x7f) at sequence 1, token 29 (block {blk}, slot {s}, dim 37)"
    assert torch.equal(call(with_nan(30, 37)[0]), call(cache))
