"""What `explain` names for an engine's decode call is what the API launches for that call: the plan decides whether
the schedule is read, whether TMA can read the cache and the block size's consequences (mqa_cli.plan.build), and
the launch layer runs the config it is handed. Each engine form here is called through the public API with the
launch recorded, then explained with the flags that describe it (--schedule, --cache-block-stride, --block-size);
the two configs must be the same build. On sm90 (plan only, no launch) a strided cache rules the TMA row out."""
from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

import mqa_cli
from mqa_cli.api import sms
from mqa_cli.cli.app import app
from mqa_cli.launch import families as launchers
from mqa_cli.plan import dispatch, targets
from mqa_cli.errors import UserError
from mqa_kernels.common import versions

from .reference64 import assert_logits
from .test_api_forms import DEVICE, paged_problem
from .test_engine_forms import layer_view

C = 48  # every sequence's context: explain's --context-len with no jitter gives the same max_context_len


def record_launches(monkeypatch) -> list:
    """The configs the API launches from now on (in order), recorded around launchers.launch_config."""
    ran = []
    real = launchers.launch_config

    def recording(*a, **kw):
        launched = real(*a, **kw)
        ran.append(launched.config)
        return launched

    monkeypatch.setattr(launchers, "launch_config", recording)
    return ran


def _explain(*flags) -> dict:
    target = "cpu" if DEVICE == "cpu" else targets.detect().name
    r = CliRunner().invoke(app, ["explain", "--json", "--target", target, *map(str, flags)])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.parametrize("bs, schedule, layers", [(64, "given", 1), (64, "given", 3), (32, "given", 1),
                                                  (32, "computed", 3), (64, "computed", 1)],
                         ids=["given", "given-layer-view", "given-block-32", "computed-block-32-view", "computed"])
def test_explain_names_the_build_an_engine_call_launches(monkeypatch, bs, schedule, layers):
    # as on a GPU, get_num_sms() is the call's program count (the CPU path's default is 4 programs against 1 SM)
    sms.set_num_sms(4)
    monkeypatch.setattr(sms, "_SETTING", 4)
    p = paged_problem(B=2, T=2, H=16, D=64, bs=bs, ctx=(C, C), seed=7)
    cache = layer_view(p.cache, layers=layers) if layers > 1 else p.cache
    ran = record_launches(monkeypatch)
    meta = mqa_cli.get_paged_mqa_logits_metadata(p.ctx, bs, mqa_cli.get_num_sms()) if schedule == "given" else None
    mqa_cli.fp8_paged_mqa_logits(p.q, cache, p.w, p.ctx, p.table, meta, C, False)
    assert len(ran) == 1
    d = _explain("--paged", "--batch", 2, "--next-n", 2, "--heads", 16, "--dim", 64, "--block-size", bs,
                 "--context-len", C, "--context-jitter", 0, "--no-clean", "--schedule", schedule,
                 "--cache-block-stride", cache.stride(0))
    plan = d["plan"]
    assert plan["kernel_name"] == ran[0].name
    assert plan["config"]["constexprs"] == ran[0].constexprs and plan["config"]["options"] == ran[0].options
    read = schedule == "given" and bs == 64
    assert ran[0].constexprs["SELF_SCHEDULE"] is (not read)
    assert ("is read" in plan["decisions"]["schedule_meta"]) is read
    if schedule == "given" and bs != 64:
        assert "not read" in plan["decisions"]["schedule_meta"]


@pytest.mark.parametrize("stride, bs, row", [(64 * 132, 64, "paged_ws_sm90"), (3 * 64 * 132, 64, "paged_ws_sm90"),
                                             (64 * 132 + 4, 64, "paged"), (32 * 132, 32, "paged")])
def test_on_sm90_the_plan_names_the_row_a_strided_cache_or_block_32_runs(stride, bs, row):
    """A layer view keeps TMA; a block stride TMA cannot describe, or a block of 32 tokens, runs the portable row,
    and the plan says why (the cache decision and the row's ruled-out condition)."""
    shape = dispatch.Shape("paged", 16, 8192, 64, 128, False, batch=8, next_n=2, block_size=bs, schedule_given=True,
                           cache_block_stride=stride)
    if row == "paged_ws_sm90" and not versions.holds("gluon_hopper"):
        pytest.skip(versions.FACTS["gluon_hopper"].required())
    p = dispatch.plan(shape, targets.TARGETS["sm90"])
    assert p.chosen.row.name == row
    assert p.config.constexprs["SELF_SCHEDULE"] is (bs != 64)
    ws = next(c for c in p.candidates if c.row.name == "paged_ws_sm90")
    if row == "paged":
        assert not ws.ok


@pytest.mark.parametrize("ranges", [2, 4, 6])
def test_a_schedule_of_fewer_ranges_than_programs_is_not_read(monkeypatch, ranges):
    """vLLM builds its next_n 4 schedule for num_sms // 2 programs (DeepGEMM's 2-SM clusters): read as given it would
    run on half the SMs. The plan reads a schedule only with at least as many ranges as the call has programs, else
    each program computes its split over all of them; explain --schedule given:R says the same, and the logits are
    the reference's either way. The value checks follow the plan: a stale schedule (last entry not (batch, 0)) is
    refused where the plan reads it and passes where it does not."""
    sms.set_num_sms(4)
    try:
        p = paged_problem(B=3, T=4, H=16, D=64, bs=64, ctx=(100, 7, 180), seed=3)
        ran = record_launches(monkeypatch)
        meta = mqa_cli.get_paged_mqa_logits_metadata(p.ctx, 64, ranges)
        out = mqa_cli.fp8_paged_mqa_logits(p.q, p.cache, p.w, p.ctx, p.table, meta, p.max_context_len, True)
        assert_logits(out.cpu(), p.ref, p.mag, clean=True)
        read = ranges >= 4
        assert ran[0].constexprs["SELF_SCHEDULE"] is (not read)
        d = _explain("--paged", "--batch", 3, "--next-n", 4, "--heads", 16, "--dim", 64, "--block-size", 64,
                     "--context-len", 180, "--context-jitter", 0, "--schedule", f"given:{ranges}")
        decided = d["plan"]["decisions"]["schedule_meta"]
        assert ("is read" in decided) is read and (f"fewer than the 4 programs" in decided) is (not read)
        assert d["plan"]["config"]["constexprs"]["SELF_SCHEDULE"] is (not read)
        stale = meta.clone()
        stale[-1] = torch.tensor([1, 2], dtype=torch.int32)

        def call():
            return mqa_cli.fp8_paged_mqa_logits(p.q, p.cache, p.w, p.ctx, p.table, stale, p.max_context_len, True,
                                                check_values=True)

        if read:
            with pytest.raises(UserError, match="schedule_meta ends at"):
                call()
        else:
            assert_logits(call().cpu(), p.ref, p.mag, clean=True)
    finally:
        sms.set_num_sms(0)


@pytest.mark.parametrize("shuffled, pad", [(False, 0), (True, 0), (True, 12)], ids=["plain", "shuffled", "padded"])
def test_explain_names_the_build_aiters_decode_call_launches(monkeypatch, shuffled, pad):
    """aiter's decode form plans as fp8_paged_mqa_logits does (one plan, one cache of plans): a pre-shuffled cache is
    a cache layout the plan reads (the pointer kernel's KV_SHUFFLED build), a padded cache a block stride; explain
    --cache-layout / --cache-block-stride names the build the call launched."""
    from mqa_cli import aiter

    from .test_aiter_decode import problem

    q, cache, w, ctx, table, *_ = problem(2, 2, 16, 64, 16, [C, C], 5, shuffled, pad=pad)
    out = torch.empty(4, C)
    ran = record_launches(monkeypatch)
    aiter.deepgemm_fp8_paged_mqa_logits(q, cache, w, out, ctx, table, C, Preshuffle=shuffled, KVBlockSize=16)
    assert len(ran) == 1 and bool(ran[0].constexprs.get("KV_SHUFFLED")) is shuffled
    d = _explain("--paged", "--batch", 2, "--next-n", 2, "--heads", 16, "--dim", 64, "--block-size", 16,
                 "--context-len", C, "--context-jitter", 0, "--clean", "--cache-block-stride", 16 * (64 + 4 + pad),
                 "--cache-layout", "shuffled" if shuffled else "plain")
    plan = d["plan"]
    assert plan["kernel_name"] == ran[0].name
    assert plan["config"]["constexprs"] == ran[0].constexprs and plan["config"]["options"] == ran[0].options
    assert ("pre-shuffled" in plan["decisions"]["cache"]) is shuffled


def test_on_sm90_a_shuffled_cache_runs_the_pointer_kernel_and_the_plan_says_why():
    shape = dispatch.Shape("paged", 16, 8192, 64, 128, True, batch=8, next_n=2, block_size=64,
                           cache_layout="shuffled")
    p = dispatch.plan(shape, targets.TARGETS["sm90"])
    assert p.chosen.row.name == "paged" and p.config.constexprs["KV_SHUFFLED"] is True
    ws = next(c for c in p.candidates if c.row.name == "paged_ws_sm90")
    assert not ws.ok and any(not ch.ok and ch.name == "cache layout" for ch in ws.checks)
    odd = dispatch.Shape("paged", 2, 100, 16, 64, True, block_size=1, cache_layout="shuffled")
    with pytest.raises(UserError, match="cache layout"):
        dispatch.plan(odd, targets.TARGETS["cpu"])

