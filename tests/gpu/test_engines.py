"""The call forms of vLLM 0.33, SGLang 0.5.23 and DeepGEMM 0.2.5 (shared/context/engine-call-sites.md) on the card,
exactly as each engine passes its arguments: six positionals with max_seqlen_k an int, +inf written into the returned
logits, compressed with empty rows, seven / eight positionals on the paged op, layer views and row slices of
persistent buffers, num_sms // 2 schedule slots at next_n 4, GLM-5's clamped metadata, DeepGEMM's own schedule
format (when deep_gemm imports), set_num_sms. Each against the float32 reference on the entries the form defines,
or bitwise against the plain call."""
from __future__ import annotations

import functools

import pytest
import torch

import mqa_cli

from .inputs import (DEV, assert_against_ref, assert_bits_equal, embed_rows, layer_of, make_paged, make_prefill,
                     paged_ref_rows, prefill_ref_rows)

S, N, H, D = 2048, 4096, 64, 128
BLK = 64


@functools.lru_cache(maxsize=None)
def _pre():
    return make_prefill(S, N, H, D, "random", seed=61)  # empty rows, full rows and everything between


def test_vllm_033_prefill_six_positionals_max_seqlen_k_an_int():
    """fp8_fp4_mqa_logits((q[r0:r1], None), (k_ws[:N], s_ws[:N]), w[r0:r1], ks, ke, max_seqlen_k)."""
    pre = _pre()
    r0, r1 = S // 4, S // 4 + S // 2
    k_ws = embed_rows(pre["kv"], 0, N // 2)  # the workspace is longer than this chunk's kv
    s_ws = embed_rows(pre["sc"], 0, N // 2)
    ks, ke = pre["ks"][r0:r1], pre["ke"][r0:r1]
    M = max(1, int((ke - ks).max()))  # the chunk's longest window, not aligned
    out = mqa_cli.fp8_fp4_mqa_logits((pre["q"][r0:r1], None), (k_ws[:N], s_ws[:N]), pre["w"][r0:r1], ks, ke, M)
    assert tuple(out.shape) == (r1 - r0, M)
    sub = dict(pre, q=pre["q"][r0:r1], w=pre["w"][r0:r1], ks=ks, ke=ke)
    ref, live = prefill_ref_rows(sub, list(range(r1 - r0)), mcols=M)
    assert_against_ref(out, ref, live, clean=False)  # vLLM reads columns [0, ke - ks) only


def test_sglang_dsa_prefill_not_clean_then_inf_written_in_place():
    pre = _pre()
    out = mqa_cli.fp8_mqa_logits(pre["q"], (pre["kv"], pre["sc"]), pre["w"], pre["ks"], pre["ke"], clean_logits=False)
    assert out.shape[1] == N  # SGLang asserts absolute columns
    ref, live = prefill_ref_rows(pre, list(range(S)))
    assert_against_ref(out, ref, live, clean=False)
    rows = torch.arange(S, device=DEV)
    cols = pre["ks"].long().clamp_max(N - 1)
    out[rows, cols] = float("inf")  # SGLang marks each row's local tokens in the returned logits
    assert bool(torch.isposinf(out[rows, cols]).all())


def test_sglang_v4_prefill_compressed_ks_0_empty_rows_width_rounded_to_64():
    pre = _pre()
    ks, ke = torch.zeros_like(pre["ke"]), pre["ke"].clone()
    ke[::5] = 0
    rows = torch.arange(0, S, 3, device=DEV)
    M = -(-max(1, int(ke[rows].max())) // 64) * 64
    out = mqa_cli.fp8_mqa_logits(pre["q"][rows], (pre["kv"], pre["sc"]), pre["w"][rows], ks[rows], ke[rows],
                                 clean_logits=False, max_seqlen_k=M)
    sub = dict(pre, q=pre["q"][rows], w=pre["w"][rows], ks=ks[rows], ke=ke[rows])
    ref, live = prefill_ref_rows(sub, list(range(len(rows))), mcols=M)
    assert_against_ref(out, ref, live, clean=False)


def test_set_num_sms_around_a_prefill_call():
    """get_num_sms() / set_num_sms(n) around a call (SGLang's pipeline parallelism, vLLM's micro-batching): the call
    after set_num_sms is bitwise the same and get_num_sms says what was set."""
    pre = _pre()
    n0 = mqa_cli.get_num_sms()
    want = max(1, n0 - 8)
    before = mqa_cli.fp8_mqa_logits(pre["q"], (pre["kv"], pre["sc"]), pre["w"], pre["ks"], pre["ke"])
    try:
        mqa_cli.set_num_sms(want)
        assert mqa_cli.get_num_sms() == want
        after = mqa_cli.fp8_mqa_logits(pre["q"], (pre["kv"], pre["sc"]), pre["w"], pre["ks"], pre["ke"])
    finally:
        mqa_cli.set_num_sms(0)
    assert_bits_equal(after, before, None, "prefill after set_num_sms")


@functools.lru_cache(maxsize=None)
def _step(T):
    """One decode step at next_n T: 2-D context lengths with a padding request, its reference and the plain call."""
    B, C = 12, 3000
    g = torch.Generator().manual_seed(70 + T)
    ctx = torch.randint(1, C + 1, (B, T), generator=g)
    ctx[-1] = 0  # a padding request
    p = make_paged(B, T, H, D, BLK, ctx.tolist(), -(-C // BLK) * BLK, two_d=True, seed=80 + T)
    ref, live = paged_ref_rows(p, list(range(B * T)))
    plain = mqa_cli.fp8_paged_mqa_logits(p["q"], p["kv_cache"], p["w"], p["ctx"], p["bt"], None, p["max_len"],
                                         clean_logits=False)
    return p, ref, live, plain


NEXT_N = [1, 2, 4]


@pytest.mark.parametrize("T", NEXT_N)
def test_paged_plain_call_matches_the_reference(T):
    p, ref, live, plain = _step(T)
    assert_against_ref(plain, ref, live, clean=False)


@pytest.mark.parametrize("T", NEXT_N)
def test_vllm_033_paged_seven_positionals_layer_view_row_slices(T):
    """fp8_fp4_paged_mqa_logits((q, None), kv_layer, w, ctx2d, bt[:B], sched[:P+1], max_model_len): the schedule
    copied into a row slice of a fixed buffer, num_sms // 2 slots at next_n 4 (DeepGEMM 2.8.1's 2-CTA form)."""
    p, ref, live, _ = _step(T)
    sms = mqa_cli.get_num_sms()
    kv_layer = layer_of(p["flat"], BLK, D, layers=2, layer=1)
    bt_buf = torch.zeros(p["B"] + 5, p["bt"].shape[1] + 9, dtype=torch.int32, device=DEV)
    bt_buf[:p["B"], :p["bt"].shape[1]] = p["bt"]
    slots = max(1, sms // 2) if T == 4 else sms
    sched_buf = torch.zeros(sms + 1, 2, dtype=torch.int32, device=DEV)
    sched_buf[:slots + 1].copy_(mqa_cli.get_paged_mqa_logits_metadata(p["ctx"], BLK, slots))
    max_model_len = p["max_len"] + 4 * BLK  # the model's limit, past every context
    out = mqa_cli.fp8_fp4_paged_mqa_logits((p["q"], None), kv_layer, p["w"], p["ctx"], bt_buf[:p["B"]],
                                           sched_buf[:slots + 1], max_model_len)
    assert tuple(out.shape) == (p["B"] * T, max_model_len)
    assert_against_ref(out[:, :p["max_len"]], ref, live, clean=False)


@pytest.mark.parametrize("T", NEXT_N)
def test_sglang_paged_eight_positionals(T):
    """fp8_paged_mqa_logits(q, kv, w, ctx, bt[::n] (next_n > 1), meta, max_len, False)."""
    p, _, live, plain = _step(T)
    bt = p["bt"]
    if T > 1:
        rows = torch.zeros(p["B"] * T, p["bt"].shape[1], dtype=torch.int32, device=DEV)
        rows[::T] = p["bt"]
        bt = rows[::T]
    meta = mqa_cli.get_paged_mqa_logits_metadata(p["ctx"], BLK, mqa_cli.get_num_sms())
    out = mqa_cli.fp8_paged_mqa_logits(p["q"], p["kv_cache"], p["w"], p["ctx"], bt, meta, p["max_len"], False)
    assert_bits_equal(out, plain, live, "eight positionals")


@pytest.mark.parametrize("T", NEXT_N)
def test_glm5_pooled_decode_metadata_of_clamped_lengths(T):
    """Metadata from ctx.clamp(min=1), the call with the raw lengths (zeros)."""
    p, _, live, plain = _step(T)
    meta = mqa_cli.get_paged_mqa_logits_metadata(p["ctx"].clamp(min=1), BLK, mqa_cli.get_num_sms())
    out = mqa_cli.fp8_paged_mqa_logits(p["q"], p["kv_cache"], p["w"], p["ctx"], p["bt"], meta, p["max_len"],
                                       clean_logits=False)
    assert_bits_equal(out, plain, live, "clamped metadata")


@pytest.mark.parametrize("T", [2, 4])
def test_deepgemm_format_schedule_gives_the_plain_logits(T):
    """A schedule in DeepGEMM's own format (SGLang V4 builds one itself at large batches); run last in the file: a
    kernel that misread it could fault."""
    try:
        import deep_gemm
    except Exception as e:  # noqa: BLE001 (not built here, or its JIT cannot start: the form is not checkable)
        pytest.skip(f"deep_gemm does not import here: {type(e).__name__}: {e}")
    p, _, live, plain = _step(T)
    meta = deep_gemm.get_paged_mqa_logits_metadata(p["ctx"], BLK, mqa_cli.get_num_sms())
    out = mqa_cli.fp8_paged_mqa_logits(p["q"], p["kv_cache"], p["w"], p["ctx"], p["bt"], meta, p["max_len"],
                                       clean_logits=False)
    assert_bits_equal(out, plain, live, "DeepGEMM's schedule")
