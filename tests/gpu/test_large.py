"""Past 2^31 output elements (S x padded N, 8.6 GB of fp32 logits): the dispatched prefill row through the API (fp32
and bf16, full and compressed, clean on and off), every other prefill row of the card that holds at that shape
through its plan, and the paged API (B*next_n x max_context_len past 2^31 over a small shared block pool). Sampled
rows (first, around the 2^31-th element, last, random) against a float32 reference; the allocator is handed a
NaN-filled block of the output's size first, so an unwritten entry shows. A row that dispatch rules out at this size
must say so by its size condition. S = N = 65536 (16 GiB of logits) is heavy: MQA_LOGITS_HEAVY=1 runs it."""
from __future__ import annotations

import functools

import pytest
import torch

from mqa_cli.launch import families as launchers
from mqa_cli.plan import dispatch, targets
from mqa_cli.problem.tensors import Prefill

from ..conftest import HEAVY
from .inputs import (DEV, INT31, NEG_INF, assert_against_ref, call_paged, call_prefill, make_paged, make_prefill,
                     paged_ref_rows, prefill_ref_rows, tol_for)

A = (46341, 46341, 64, 128)  # 46341 x 46464 (padded) = 2,153,188,224 > 2^31
A32 = (46341, 46341, 32, 128)
BIG = (65536, 65536, 64, 128)
SIZE_WORDS = ("2^31", "int32", "offset", "64-bit", "element")


def sample_rows(R, stride):
    """First rows, rows around the 2^31-th element, last rows, and a few random ones."""
    b = min(R - 1, INT31 // stride)
    rows = {0, 1, R // 2, max(0, b - 1), b, min(R - 1, b + 1), R - 2, R - 1}
    rows |= set(torch.randint(0, R, (6,), generator=torch.Generator().manual_seed(R)).tolist())
    return sorted(r for r in rows if 0 <= r < R)


def poison(elements, dtype):
    """Hand the allocator a NaN-filled block of the output's size, so that the output reuses it."""
    junk = torch.full((elements,), float("nan"), dtype=dtype, device=DEV)
    del junk


@functools.lru_cache(maxsize=1)
def _problem(S, N, H, D):
    return make_prefill(S, N, H, D, "causal", seed=5)


def _check_sampled(out, p, clean, mcols, dtype):
    stride = out.stride(0)
    assert p["S"] * stride > INT31, f"S x row stride {p['S']} x {stride} does not pass 2^31"
    rows = sample_rows(p["S"], stride)
    ref, live = prefill_ref_rows(p, rows, mcols)
    got = out[rows].float()
    if not clean:  # undefined entries may hold anything
        got = got.masked_fill(~live, NEG_INF)
    assert_against_ref(got, ref, live, True, tol_for(dtype), f"rows {rows}")


@pytest.mark.parametrize("shape", [A, A32, pytest.param(BIG, marks=HEAVY)], ids=["H64", "H32", "65536"])
@pytest.mark.parametrize("clean, compressed, dtype", [(True, False, torch.float32), (False, True, torch.float32),
                                                      (True, False, torch.bfloat16), (True, True, torch.bfloat16)],
                         ids=["full-clean", "cmp", "bf16-clean", "cmp-bf16-clean"])
def test_dispatched_prefill_past_2_31(shape, clean, compressed, dtype):
    if shape != A and (not clean or compressed or dtype != torch.float32):
        pytest.skip("the other sizes run the plain form only")
    p = _problem(*shape)
    mcols = p["N"] if compressed else 0
    poison(p["S"] * (-(-(mcols or p["N"]) // 128) * 128), dtype)
    out = call_prefill(p, clean, mcols, dtype)
    torch.cuda.synchronize()
    _check_sampled(out, p, clean, mcols, dtype)
    del out
    torch.cuda.empty_cache()


@pytest.mark.parametrize("row", [r.name for r in dispatch.PREFILL_ROWS])
def test_every_prefill_row_past_2_31_or_ruled_out_by_its_size(row):
    """Each row of this card that holds at A (named, as `run --kernel ROW` would) runs past 2^31 right; one that
    dispatch rules out there names a size limit."""
    S, N, H, D = A
    tgt = targets.detect()
    shape = dispatch.Shape("prefill", S, N, H, D, True)
    cand = next(c for c in dispatch.plan(shape, tgt).candidates if c.row.name == row)
    for_card = {c.name: c.ok for c in cand.checks}
    if not (for_card.get("target", True) and for_card.get("problem", True)):
        pytest.skip(f"{row} is not a row of {tgt.name}")
    if not cand.ok:
        why = cand.first_failure.sentence()
        if any(w.lower() in why.lower() for w in SIZE_WORDS):
            return  # ruled out by dispatch past its limit
        pytest.skip(f"{row} does not hold at {S}x{N} H{H}: {why}")
    p = _problem(*A)
    cfg = dispatch.plan(shape, tgt, kernel=row).config
    t = Prefill(p["q"], p["kv"], p["sc"], p["w"], p["ks"], p["ke"])
    poison(S * (-(-N // 128) * 128), torch.float32)
    out = launchers.run(t, cfg)
    torch.cuda.synchronize()
    _check_sampled(out, p, True, 0, torch.float32)
    del out
    torch.cuda.empty_cache()


@functools.lru_cache(maxsize=1)
def _paged():
    B, T, L = 1100, 2, 16385 * 64  # 2200 rows x 1,048,640 (+ padding): the last ~150 rows lie wholly past 2^31
    g = torch.Generator().manual_seed(11)
    ctx = torch.randint(0, L + 1, (B, T), generator=g)
    ctx[:4] = 0  # padding requests
    ctx[-4:] = L  # the last rows, past the 2^31-th element, live to the end
    return make_paged(B, T, 64, 128, 64, ctx.tolist(), L, two_d=True, seed=12, phys_blocks=20000)


@pytest.mark.parametrize("clean, dtype, one_d", [(True, torch.float32, False), (False, torch.float32, False),
                                                 (True, torch.bfloat16, False), (True, torch.float32, True)],
                         ids=["clean", "not-clean", "bf16-clean", "ctx[B]-clean"])
def test_paged_past_2_31(clean, dtype, one_d):
    p = _paged()
    B, T = p["B"], p["T"]
    if one_d:  # 1-D lengths: row (b, t) ends at ctx[b] - next_n + t + 1
        p = dict(p, ctx=p["ctx"][:, -1].contiguous())
        p["ends"] = (p["ctx"].long().view(B, 1) - T + torch.arange(T, device=DEV)[None] + 1).clamp_min(0)
    poison(B * T * (-(-p["max_len"] // 128) * 128), dtype)
    out = call_paged(p, clean, dtype)
    torch.cuda.synchronize()
    stride = out.stride(0)
    assert B * T * stride > INT31
    rows = sample_rows(B * T, stride)
    ref, live = paged_ref_rows(p, rows)
    got = out[rows].float()
    if not clean:
        got = got.masked_fill(~live, NEG_INF)
    assert_against_ref(got, ref, live, True, tol_for(dtype), f"rows {rows}")
    del out
    torch.cuda.empty_cache()
