"""On the card, what `explain` names for an engine's decode call is the build the API launches: the Gluon row for the
cache as engines pass it and for a layer of an interleaved buffer, the portable row for a block stride TMA cannot
describe and for blocks of 32 tokens, the schedule read at block size 64 only. The launch is recorded and its config
compared with explain's, field by field (tests/test_plan_explained.py does the same through the interpreter)."""
from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

import mqa_cli
from mqa_cli.cli.app import app
from mqa_cli.plan import targets
from mqa_kernels.common import versions

from ..test_plan_explained import record_launches

from .inputs import layer_of, make_paged, untma_cache

B, T, H, D, C = 4, 2, 64, 128, 1024
FORMS = [("dense", 64, "given"), ("layer view", 64, "given"), ("untma", 64, "given"), ("dense", 32, "given"),
         ("dense", 64, "computed"), ("untma", 64, "computed")]


@pytest.mark.parametrize("cache, bs, schedule", FORMS, ids=[f"{c}-bs{b}-{s}" for c, b, s in FORMS])
def test_explain_names_what_the_engine_call_launches(monkeypatch, cache, bs, schedule):
    mqa_cli.set_num_sms(0)
    p = make_paged(B, T, H, D, bs, [C] * B, C, seed=9)
    kv = {"dense": p["kv_cache"], "layer view": layer_of(p["flat"], bs, D),
          "untma": untma_cache(p["flat"], bs, D)}[cache]
    ran = record_launches(monkeypatch)
    meta = mqa_cli.get_paged_mqa_logits_metadata(p["ctx"], bs, mqa_cli.get_num_sms()) if schedule == "given" else None
    mqa_cli.fp8_paged_mqa_logits(p["q"], kv, p["w"], p["ctx"], p["bt"], meta, C, False)
    torch.cuda.synchronize()
    assert len(ran) == 1
    r = CliRunner().invoke(app, ["explain", "--json", *map(str, ["--paged", "--batch", B, "--next-n", T, "--heads", H, "--dim", D,
                                 "--block-size", bs, "--context-len", C, "--context-jitter", 0, "--no-clean",
                                 "--schedule", schedule, "--cache-block-stride", kv.stride(0)])])
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)["plan"]
    assert plan["kernel_name"] == ran[0].name
    assert plan["config"]["constexprs"] == ran[0].constexprs and plan["config"]["options"] == ran[0].options
    if targets.detect().name == "sm90" and versions.holds("gluon_hopper"):
        assert ran[0].launcher == ("paged" if cache == "untma" or bs == 32 else "paged_ws_sm90")
    assert ran[0].constexprs["SELF_SCHEDULE"] is not (schedule == "given" and bs == 64)
