"""CUDA-graph capture of both APIs: a replay is bitwise equal to the eager call on every defined entry, and stays so
after new input values are copied into the captured tensors (the engines' pattern). Prefill full and compressed,
fp32 and bf16, clean on and off; paged with [B] and [B, next_n] context lengths holding zeros, the metadata computed
outside the graph (refreshed in place) or inside it."""
from __future__ import annotations

import pytest
import torch

from .inputs import (DEV, FP8, assert_bits_equal, call_paged, call_prefill, defined_paged, defined_prefill,
                     graph_capture, make_paged, make_prefill, paged_meta)

PREFILL = [(2048, 2048, 64, 128), (2048, 3000, 32, 128), (256, 512, 64, 128)]
PREFILL_FORMS = [(True, False, torch.float32), (False, False, torch.float32), (True, True, torch.float32),
                 (False, True, torch.float32), (True, False, torch.bfloat16), (False, True, torch.bfloat16)]


def _replays_as_eager(fn, mask, refresh, what):
    eager = fn()
    torch.cuda.synchronize()
    g, out = graph_capture(fn)
    g.replay()
    torch.cuda.synchronize()
    assert_bits_equal(eager, out, mask, what + ": replay vs eager")
    refresh()
    eager2 = fn()
    g.replay()
    torch.cuda.synchronize()
    assert_bits_equal(eager2, out, mask, what + ": replay vs eager after new inputs")


@pytest.mark.parametrize("S, N, H, D", PREFILL, ids=lambda v: str(v))
@pytest.mark.parametrize("clean, compressed, dtype", PREFILL_FORMS,
                         ids=["full-clean", "full", "cmp-clean", "cmp", "bf16-clean", "cmp-bf16"])
def test_prefill_replay_is_bitwise_eager(S, N, H, D, clean, compressed, dtype):
    p = make_prefill(S, N, H, D, "random" if S < 1024 else "causal", seed=S + H)
    mcols = int((p["ke"] - p["ks"]).max()) if compressed else 0

    def refresh():
        p["q"].copy_(torch.randn(p["q"].shape, device=DEV).to(FP8))
        p["w"].copy_(torch.randn(p["w"].shape, device=DEV))

    _replays_as_eager(lambda: call_prefill(p, clean, mcols, dtype), defined_prefill(p, clean, mcols), refresh,
                      f"prefill S{S} N{N} H{H}")


@pytest.mark.parametrize("B, T, H, D, blk, C", [(8, 2, 64, 128, 64, 4096), (3, 1, 64, 128, 64, 1000)])
@pytest.mark.parametrize("two_d", [False, True], ids=["ctx[B]", "ctx[B,n]"])
@pytest.mark.parametrize("clean, dtype", [(False, torch.float32), (True, torch.float32), (True, torch.bfloat16),
                                          (False, torch.bfloat16)], ids=["fp32", "fp32-clean", "bf16-clean", "bf16"])
def test_paged_replay_is_bitwise_eager(B, T, H, D, blk, C, two_d, clean, dtype):
    g = torch.Generator().manual_seed(B * 7 + T)
    ctx = torch.randint(0, C + 1, (B, T) if two_d else (B,), generator=g)
    ctx.view(-1)[0] = 0
    ctx.view(-1)[-1] = C
    p = make_paged(B, T, H, D, blk, ctx.tolist(), C, two_d=two_d, seed=B + T)
    meta = paged_meta(p["ctx"], blk)

    def refresh():
        p["q"].copy_(torch.randn(p["q"].shape, device=DEV).to(FP8))
        p["w"].copy_(torch.randn(p["w"].shape, device=DEV))
        meta.copy_(paged_meta(p["ctx"], p["block"]))  # engines refresh the schedule in place

    _replays_as_eager(lambda: call_paged(p, clean, dtype, meta=meta), defined_paged(p, clean), refresh,
                      f"paged B{B} n{T}")


@pytest.mark.parametrize("B, T, C", [(8, 2, 4096), (3, 1, 1000)])
def test_paged_metadata_and_logits_in_one_graph(B, T, C):
    p = make_paged(B, T, 64, 128, 64, [C] * B, C, seed=3)
    _replays_as_eager(lambda: call_paged(p, True, meta="auto"), None, lambda: None, f"paged B{B} n{T} with metadata")
