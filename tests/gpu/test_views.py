"""Every tensor argument passed as a view (row slices, strided rows, x[:, 0] of [n, 2], [N, 1] scales, a cache layer
inside a multi-layer buffer, block-table slices, 2-D context lengths with zeros) against the contiguous call: bitwise
equal on the defined entries, or refused in one line (UserError). The contiguous call itself is checked against the
float32 reference first: a wrong baseline would make every view "equal". On the H200: gluon_ws_sm90 (H 64), the
Gluon row or h64d128 at H 32 S >= 1024, tiled (S < 1024); paged_ws_sm90, and the portable decode row for a cache
TMA cannot describe."""
from __future__ import annotations

import functools

import pytest
import torch

from mqa_cli.errors import UserError

from .inputs import (DEV, FP8, assert_against_ref, assert_bits_equal, call_paged, call_prefill, col0, defined_paged,
                     defined_prefill, embed_rows, layer_of, make_paged, make_prefill, pad_last, paged_ref_rows,
                     prefill_ref_rows)

PREFILL = [(1024, 1024, 64, 128, "causal"), (1024, 1500, 32, 128, "random"), (300, 777, 32, 128, "random")]
PAGED = [(6, 2, 64, 128, 64, 3000), (5, 1, 32, 128, 64, 700)]


@functools.lru_cache(maxsize=None)
def _prefill(S, N, H, D, layout):
    return make_prefill(S, N, H, D, layout, seed=S)


def _prefill_views(p) -> dict:
    S, H, D = p["S"], p["H"], p["D"]
    big = torch.zeros(S, H, 2 * D, device=DEV).to(FP8)
    big[:, :, ::2] = p["q"]
    return {
        "q row slice": dict(q=embed_rows(p["q"])),
        "q rows padded (H+3 heads)": dict(q=pad_last(p["q"], 1, 3)),
        "q head-major (stride(1) = S*D)": dict(q=p["q"].transpose(0, 1).contiguous().transpose(0, 1)),
        "q strided D (stride(2) = 2)": dict(q=big[:, :, ::2]),
        "weights row slice": dict(w=embed_rows(p["w"])),
        "weights row-strided [S, 2H][:, :H]": dict(w=pad_last(p["w"], 1, H)),
        "weights transposed (stride(1) = S)": dict(w=p["w"].t().contiguous().t()),
        "ks/ke x[:, 0] of [S, 2]": dict(ks=col0(p["ks"]), ke=col0(p["ke"])),
        "ks/ke row slices": dict(ks=embed_rows(p["ks"]), ke=embed_rows(p["ke"])),
        "kv_scales [N, 1]": dict(sc=p["sc"][:, None].contiguous()),
        "kv_scales x[:, 0] of [N, 2]": dict(sc=col0(p["sc"])),
        "kv_scales [N, 1] view x[:, :1] of [N, 2]": dict(sc=torch.stack([p["sc"], p["sc"]], 1)[:, :1]),
        "kv row slice": dict(kv=embed_rows(p["kv"])),
        "kv row-strided [N, 2D][:, :D]": dict(kv=pad_last(p["kv"], 1, D)),
        "all views at once": dict(q=embed_rows(pad_last(p["q"], 1, 3)), w=embed_rows(pad_last(p["w"], 1, 2)),
                                  ks=col0(p["ks"]), ke=col0(p["ke"]), sc=col0(p["sc"])[:, None],
                                  kv=embed_rows(pad_last(p["kv"], 1, 16))),
    }


PREFILL_VIEW_NAMES = ["q row slice", "q rows padded (H+3 heads)", "q head-major (stride(1) = S*D)",
                      "q strided D (stride(2) = 2)", "weights row slice", "weights row-strided [S, 2H][:, :H]",
                      "weights transposed (stride(1) = S)", "ks/ke x[:, 0] of [S, 2]", "ks/ke row slices",
                      "kv_scales [N, 1]", "kv_scales x[:, 0] of [N, 2]", "kv_scales [N, 1] view x[:, :1] of [N, 2]",
                      "kv row slice", "kv row-strided [N, 2D][:, :D]", "all views at once"]


def _equal_or_refused(base, call, mask, what):
    try:
        out = call()
        torch.cuda.synchronize()
    except UserError as e:
        assert "\n" not in str(e).strip(), f"{what}: a refusal of several lines: {e}"
        return
    assert_bits_equal(base, out, mask, what)


@pytest.mark.parametrize("shape", PREFILL, ids=lambda s: f"S{s[0]}-N{s[1]}-H{s[2]}")
def test_prefill_contiguous_call_matches_the_reference(shape):
    p = _prefill(*shape)
    ref, live = prefill_ref_rows(p, list(range(p["S"])))
    assert_against_ref(call_prefill(p, True), ref, live, True, 1e-3, "contiguous")


@pytest.mark.parametrize("shape", PREFILL, ids=lambda s: f"S{s[0]}-N{s[1]}-H{s[2]}")
@pytest.mark.parametrize("view", PREFILL_VIEW_NAMES)
@pytest.mark.parametrize("clean", [True, False], ids=["full-clean", "compressed"])
def test_prefill_view_is_honoured_or_refused(shape, view, clean):
    p = _prefill(*shape)
    mcols = 0 if clean else int((p["ke"] - p["ks"]).max())
    over = _prefill_views(p)[view]
    base = call_prefill(p, clean, mcols)
    _equal_or_refused(base, lambda: call_prefill(p, clean, mcols, **over), defined_prefill(p, clean, mcols), view)


@pytest.mark.parametrize("shape", PREFILL, ids=lambda s: f"S{s[0]}-N{s[1]}-H{s[2]}")
def test_prefill_forms_and_bf16_views_agree(shape):
    p = _prefill(*shape)
    base = call_prefill(p, True)
    for form in ("explicit", "fp4name"):
        assert_bits_equal(base, call_prefill(p, True, form=form), None, form)
    mc = int((p["ke"] - p["ks"]).max())
    assert_bits_equal(call_prefill(p, False, mc), call_prefill(p, False, mc, form="mqa_logits"),
                      defined_prefill(p, False, mc), "mqa_logits compressed")
    bf = call_prefill(p, True, dtype=torch.bfloat16)
    assert_bits_equal(bf, call_prefill(p, True, dtype=torch.bfloat16, ks=col0(p["ks"]), ke=col0(p["ke"]),
                                       sc=col0(p["sc"]), q=embed_rows(p["q"])), None, "bf16 with views")


@functools.lru_cache(maxsize=None)
def _paged(B, T, H, D, blk, C, two_d):
    g = torch.Generator().manual_seed(B)
    ctx = torch.randint(0, C + 1, (B, T) if two_d else (B,), generator=g)
    ctx.view(-1)[0] = 0
    ctx.view(-1)[-1] = C
    return make_paged(B, T, H, D, blk, ctx.tolist(), -(-C // blk) * blk, two_d=two_d, seed=B + T)


PAGED_VIEW_NAMES = ["q row slice", "q heads padded [B, n, H+2, D][:, :, :H]", "weights row slice",
                    "weights row-strided", "context_lens strided or transposed", "context_lens row slice",
                    "block_table bt[::2]", "block_table buf[:r, :c]", "block_table row slice",
                    "kv cache layer of a [blocks, 3 layers, ...] buffer", "kv cache block slice (offset)",
                    "all views at once"]


def _paged_views(p, two_d) -> dict:
    B, D, blk = p["B"], p["D"], p["block"]
    kv_layer = layer_of(p["flat"], blk, D)
    bt2 = torch.zeros(2 * B, p["bt"].shape[1], dtype=torch.int32, device=DEV)
    bt2[::2] = p["bt"]
    btw = torch.zeros(B + 3, p["bt"].shape[1] + 5, dtype=torch.int32, device=DEV)
    btw[:B, :p["bt"].shape[1]] = p["bt"]
    ctx_view = p["ctx"].t().contiguous().t() if two_d else col0(p["ctx"])
    return {
        "q row slice": dict(q=embed_rows(p["q"])),
        "q heads padded [B, n, H+2, D][:, :, :H]": dict(q=pad_last(p["q"], 2, 2)),
        "weights row slice": dict(w=embed_rows(p["w"])),
        "weights row-strided": dict(w=pad_last(p["w"], 1, 4)),
        "context_lens strided or transposed": dict(ctx=ctx_view),
        "context_lens row slice": dict(ctx=embed_rows(p["ctx"])),
        "block_table bt[::2]": dict(bt=bt2[::2]),
        "block_table buf[:r, :c]": dict(bt=btw[:B, :p["bt"].shape[1]]),
        "block_table row slice": dict(bt=embed_rows(p["bt"])),
        "kv cache layer of a [blocks, 3 layers, ...] buffer": dict(kv_cache=kv_layer),
        "kv cache block slice (offset)": dict(kv_cache=embed_rows(p["kv_cache"])),
        "all views at once": dict(q=embed_rows(pad_last(p["q"], 2, 2)), w=embed_rows(pad_last(p["w"], 1, 4)),
                                  bt=bt2[::2], kv_cache=kv_layer, ctx=ctx_view),
    }


PAGED_IDS = lambda s: f"B{s[0]}-n{s[1]}-H{s[2]}"  # noqa: E731


@pytest.mark.parametrize("shape", PAGED, ids=PAGED_IDS)
@pytest.mark.parametrize("two_d", [False, True], ids=["ctx[B]", "ctx[B,n]"])
def test_paged_contiguous_call_matches_the_reference(shape, two_d):
    p = _paged(*shape, two_d)
    ref, live = paged_ref_rows(p, list(range(p["B"] * p["T"])))
    assert_against_ref(call_paged(p, True), ref, live, True, 1e-3, "contiguous")


@pytest.mark.parametrize("shape", PAGED, ids=PAGED_IDS)
@pytest.mark.parametrize("two_d", [False, True], ids=["ctx[B]", "ctx[B,n]"])
@pytest.mark.parametrize("view", PAGED_VIEW_NAMES)
@pytest.mark.parametrize("clean", [True, False], ids=["clean", "not-clean"])
def test_paged_view_is_honoured_or_refused(shape, two_d, view, clean):
    p = _paged(*shape, two_d)
    over = _paged_views(p, two_d)[view]
    base = call_paged(p, clean)
    _equal_or_refused(base, lambda: call_paged(p, clean, **over), defined_paged(p, clean), view)


@pytest.mark.parametrize("shape", PAGED, ids=PAGED_IDS)
@pytest.mark.parametrize("two_d", [False, True], ids=["ctx[B]", "ctx[B,n]"])
def test_paged_fp4_name_and_no_schedule_agree(shape, two_d):
    p = _paged(*shape, two_d)
    base = call_paged(p, True)
    assert_bits_equal(base, call_paged(p, True, fp4name=True), None, "fp8_fp4_paged_mqa_logits((q, None), ...)")
    assert_bits_equal(base, call_paged(p, True, meta=None), None, "schedule_meta None")
