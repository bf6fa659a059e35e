"""Foreign, stale and garbage schedule_meta, and block ids out of range (issue 30), on both decode kernels: the Gluon
row (the cache as engines pass it) and the portable one (the same cache inside a buffer whose block stride TMA cannot
describe, so the plan runs the portable row). Every call returns; a schedule in any format gives the logits of
schedule_meta=None bit for bit; bad block ids give, in the portable kernel, the reference of the ids clamped into
[0, num_blocks), in the Gluon one (TMA's bounds: zeros or a wrapped block) finite logits with the other sequences'
right; check_values refuses each bad one in one line. Under compute-sanitizer (tools/h200_check.sh's `badmetamc`)
this file also shows that nothing reads or writes outside the tensors. A hang is caught by the step's time box."""
from __future__ import annotations

import functools
import os

import pytest
import torch

import mqa_cli
from mqa_cli.errors import UserError

from .inputs import DEV, assert_against_ref, call_paged, make_paged, paged_ref_rows, untma_cache

B, H, D, BLK = 8, 64, 128, 64
LENS = [3000, 0, 700, 64, 1, 2049, 5000, 128]
NEXT_N = [int(x) for x in os.environ.get("BADMETA_NEXT_N", "1,2,4").split(",")]  # under memcheck one is enough
KERNELS = ["dispatched", "portable"]


def deepgemm_schedule(ctx, next_n, P):
    """DeepGEMM's sm90 schedule format, from its description (shared/context/engine-call-sites.md): entry p = (q atom,
    256-token split) where program p starts; atoms of 2 draft rows at next_n >= 2; every atom of sequence b has
    ceil(ctx[b, next_n - 1] / 256) splits; the total shared evenly, the last programs one more; entry P = (batch x
    atoms, 0)."""
    c = ctx.long().cpu()
    last = c[:, -1] if c.dim() == 2 else c
    atoms = 1 if next_n == 1 else -(-next_n // 2)
    splits = ((last.clamp_min(0) + 255) // 256).repeat_interleave(atoms).tolist()
    base, extra = divmod(sum(splits), P)
    rows, s = [], 0
    for p in range(P):
        acc, hit = 0, (len(splits), 0)
        for a, n in enumerate(splits):
            if s < acc + n:
                hit = (a, s - acc)
                break
            acc += n
        rows.append(hit)
        s += base + (1 if p >= P - extra else 0)
    rows.append((len(splits), 0))
    return torch.tensor(rows, dtype=torch.int32, device=ctx.device)


def schedules(ctx, next_n) -> tuple[dict, dict]:
    """(valid, bad) schedules of a call: valid ones fit it (check_values accepts them), bad ones do not."""
    sms, g = mqa_cli.get_num_sms(), torch.Generator().manual_seed(30)
    meta = lambda c, n: mqa_cli.get_paged_mqa_logits_metadata(c, BLK, n)  # noqa: E731
    buf = torch.full((sms + 1, 2), -7, dtype=torch.int32, device=DEV)
    buf[: sms // 2 + 1] = deepgemm_schedule(ctx, next_n, sms // 2)
    rnd = lambda lo, hi: torch.randint(lo, hi, (sms + 1, 2), generator=g, dtype=torch.int64).to(  # noqa: E731
        torch.int32).to(DEV)
    valid = {"own": meta(ctx, sms), "deepgemm": deepgemm_schedule(ctx, next_n, sms),
             "deepgemm num_sms//2 slice": buf[: sms // 2 + 1], "from ctx.clamp(min=1)": meta(ctx.clamp(min=1), sms)}
    bad = {"smaller batch": meta(ctx[: ctx.shape[0] - 1], sms), "larger batch": meta(torch.cat([ctx, ctx]), sms),
           "large negative": rnd(-2 ** 31, -2 ** 20), "small random [-3, 4)": rnd(-3, 4),
           "large positive": rnd(2 ** 20, 2 ** 31 - 1), "reversed": meta(ctx, sms).flip(0).contiguous()}
    return valid, bad


SCHEDULE_NAMES = [("own", True), ("deepgemm", True), ("deepgemm num_sms//2 slice", True),
                  ("from ctx.clamp(min=1)", True), ("smaller batch", False), ("larger batch", False),
                  ("large negative", False), ("small random [-3, 4)", False), ("large positive", False),
                  ("reversed", False)]


@functools.lru_cache(maxsize=None)
def _step(next_n, kernel):
    """(inputs with the cache as that kernel gets it, the logits of schedule_meta=None)."""
    ctx = [[max(0, c - 3 + t) for t in range(next_n)] for c in LENS[:B]]
    p = make_paged(B, next_n, H, D, BLK, ctx if next_n > 1 else [c[-1] for c in ctx], 5000, two_d=next_n > 1,
                   seed=next_n)
    if kernel == "portable":
        p = dict(p, kv_cache=untma_cache(p["flat"], BLK, D))
    none = call_paged(p, True, meta=None)
    torch.cuda.synchronize()
    return p, none


@pytest.mark.parametrize("next_n", NEXT_N)
@pytest.mark.parametrize("kernel", KERNELS)
def test_no_schedule_matches_the_reference(next_n, kernel):
    p, none = _step(next_n, kernel)
    ref, live = paged_ref_rows(p, list(range(B * next_n)))
    assert_against_ref(none, ref, live, True, 1e-3, "schedule_meta None")


@pytest.mark.parametrize("next_n", NEXT_N)
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("name, valid", SCHEDULE_NAMES, ids=[n for n, _ in SCHEDULE_NAMES])
def test_any_schedule_gives_the_logits_of_none_and_check_values_judges_it(next_n, kernel, name, valid):
    p, none = _step(next_n, kernel)
    good, bad = schedules(p["ctx"], next_n)
    sched = {**good, **bad}[name]
    out = call_paged(p, True, meta=sched)
    torch.cuda.synchronize()
    assert torch.equal(out, none), f"{int((out != none).sum())} logits differ from schedule_meta=None's"
    call = lambda: mqa_cli.fp8_paged_mqa_logits(p["q"], p["kv_cache"], p["w"], p["ctx"], p["bt"], sched,  # noqa
                                                p["max_len"], True, check_values=True)
    if valid:
        call()
    else:
        with pytest.raises(UserError) as e:
            call()
        assert "\n" not in str(e.value).strip()


BAD_IDS = [("num_blocks", None), ("num_blocks + 7", 7), ("-1", -1), ("2^30", 2 ** 30), ("-2^31", -2 ** 31),
           ("2^31 - 1", 2 ** 31 - 1)]


@pytest.mark.parametrize("next_n", NEXT_N)
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("name, value", BAD_IDS, ids=[n for n, _ in BAD_IDS])
def test_block_ids_out_of_range_never_fault(next_n, kernel, name, value):
    p, _ = _step(next_n, kernel)
    nb = p["flat"].shape[0]
    v = nb if name == "num_blocks" else nb + 7 if name == "num_blocks + 7" else value
    bt = p["bt"].clone()
    bt[0, 0] = v
    bt[-1, :] = v
    out = call_paged(p, True, meta=None, bt=bt)
    torch.cuda.synchronize()
    rows = list(range(B * next_n))
    if kernel == "portable":  # ids clamped into [0, num_blocks)
        ref, live = paged_ref_rows(dict(p, bt=bt.clamp(0, nb - 1)), rows)
        assert_against_ref(out, ref, live, True, 1e-3, "as the ids clamped into [0, num_blocks)")
    else:  # the Gluon row: TMA's bounds (zeros, or a block the wrapped coordinate names)
        mid = rows[next_n:-next_n]
        ref, live = paged_ref_rows(p, mid)
        assert_against_ref(out[mid], ref, live, True, 1e-3, "the untouched sequences")
        _, live_all = paged_ref_rows(p, rows)
        assert bool(torch.isfinite(out[live_all]).all()), "the others' live logits are not finite"
    with pytest.raises(UserError) as e:
        mqa_cli.fp8_paged_mqa_logits(p["q"], p["kv_cache"], p["w"], p["ctx"], bt, None, p["max_len"], True,
                                     check_values=True)
    assert "\n" not in str(e.value).strip()
