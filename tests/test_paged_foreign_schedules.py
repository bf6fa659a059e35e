"""Schedules from elsewhere (issues 28 and 30): DeepGEMM's sm90 format, metadata of clamped context lengths, of
num_sms // 2 programs as a row slice of a bigger buffer, stale and garbage ones. The portable decode kernel (through
the interpreter) must give the logits of its own split bit for bit with each, at next_n 1, 2 and 4: its clamped
reading makes any schedule cover every token, and each logit is computed whole by one program. check_values
accepts the formats an engine sends and refuses, in one line, a schedule computed for another call."""
from __future__ import annotations

import pytest
import torch

from mqa_cli.errors import UserError
from mqa_cli.launch import families as launchers
from mqa_cli.plan.build import with_schedule
from mqa_cli.problem.paged_tensors import Paged, validate_paged_values, validate_schedule
from mqa_kernels.decode.paged.config import paged_config
from tests.conftest import HEAVY
from tests.reference64 import assert_logits
from tests.test_adversarial import (CTX, deepgemm_schedule, garbage_schedule, own_schedule, paged_inputs,
                                    paged_reference)


def _paged(p: dict) -> Paged:
    return Paged(p["q"], p["kv_cache"], p["weights"], p["context_lens"], p["block_table"], p["max_context_len"])


def _kernel(t: Paged, meta, subs: int = 2) -> torch.Tensor:
    cfg = paged_config(heads=t.heads, dim=t.dim, next_n=t.next_n, block_size=t.block_size, batch=t.batch,
                       max_context_len=t.max_context_len, clean=True, backend="interpreter", units=3,
                       override={"SUBS": subs})
    out = torch.full((t.S, -(-t.max_context_len // 128) * 128), 7.25)[:, :t.max_context_len]
    launchers.run(t, with_schedule(cfg, meta is None), out, schedule_meta=meta)
    return out


def _foreign(ctx: torch.Tensor, next_n: int) -> dict:
    B = ctx.shape[0]
    buf = torch.full((133, 2), -9, dtype=torch.int32)  # vLLM's fixed (num_sms + 1, 2) buffer, a row slice of it
    buf[:67] = deepgemm_schedule(ctx, next_n, 66)
    return {
        "DeepGEMM's format": deepgemm_schedule(ctx, next_n, 5),
        "DeepGEMM's format, num_sms // 2 rows of a fixed buffer": buf[:67],
        "from ctx.clamp(min=1)": own_schedule(ctx.clamp(min=1), 4),
        "a smaller batch's": own_schedule(ctx[:B - 1], 3),
        "a larger batch's": own_schedule(torch.cat([ctx, ctx[:1]]), 3),
        "garbage": garbage_schedule("small", B, 4, next_n),
    }


@pytest.mark.parametrize("next_n", [1, pytest.param(2, marks=HEAVY), 4])
def test_foreign_schedules_give_the_kernels_own_logits_bit_for_bit(next_n):
    p = paged_inputs(next_n, CTX[next_n], seed=20 + next_n)
    t = _paged(p)
    own = _kernel(t, None)
    ref, mag = paged_reference(p)
    assert_logits(own, ref, mag, True)
    for what, meta in _foreign(t.context_lens, next_n).items():
        got = _kernel(t, meta, subs=1 if next_n == 4 else 2)
        assert torch.equal(got, own), f"{what} (next_n {next_n}): {int((got != own).sum())} logits differ"


def test_deepgemm_format_as_described():
    """The test's generator keeps the format: splits of 256 tokens per q atom (2 rows at next_n >= 2), the last
    programs one more, entry P = (batch x atoms, 0)."""
    ctx = torch.tensor([[0, 600], [10, 257], [0, 0]], dtype=torch.int32)  # ctx[b, next_n - 1]: 600, 257, 0
    s = deepgemm_schedule(ctx, 2, 3)  # splits 3, 2, 0: total 5 -> 1, 2, 2 per program
    assert s.tolist() == [[0, 0], [0, 1], [1, 0], [3, 0]]
    s4 = deepgemm_schedule(torch.tensor([[1, 2, 3, 300]], dtype=torch.int32), 4, 2)  # 2 atoms of 2 splits
    assert s4.tolist() == [[0, 0], [1, 0], [2, 0]]


def _t(next_n=2, ctx=None) -> Paged:
    return _paged(paged_inputs(next_n, ctx or CTX[next_n], seed=1))


@pytest.mark.parametrize("next_n", [1, 2, 4])
def test_check_values_accepts_what_engines_send(next_n):
    t = _t(next_n)
    ctx = t.context_lens
    for meta in (own_schedule(ctx, 7), own_schedule(ctx, 1), own_schedule(ctx.clamp(min=1), 5),
                 deepgemm_schedule(ctx, next_n, 7), _foreign(ctx, next_n)["DeepGEMM's format, num_sms // 2 rows "
                                                                          "of a fixed buffer"]):
        validate_schedule(t, meta)
        validate_paged_values(t, meta)


@pytest.mark.parametrize("meta, needle", [
    (lambda c: own_schedule(c[:3], 4), "ends at (3, 0)"),
    (lambda c: own_schedule(torch.cat([c, c]), 4), "another batch"),
    (lambda c: own_schedule(c, 4).flip(0).contiguous(), "[0]"),
    (lambda c: torch.tensor([[0, 0], [2, 1], [0, 2], [4, 0]], dtype=torch.int32), "order"),
    (lambda c: torch.tensor([[0, 0], [0, 99], [4, 0]], dtype=torch.int32), "out of range"),
    (lambda c: torch.tensor([[0, 0], [-1, 0], [4, 0]], dtype=torch.int32), "out of range"),
    (lambda c: torch.tensor([[0, 0], [1, -2], [4, 0]], dtype=torch.int32), "out of range"),
    (lambda c: torch.tensor([[0, 0], [4, 1], [4, 0]], dtype=torch.int32), "out of range"),
    (lambda c: torch.tensor([[0, 0]], dtype=torch.int32), "P >= 1"),
    (lambda c: torch.zeros(3, 2, dtype=torch.int64), "int32"),
])
def test_check_values_refuses_a_schedule_of_another_call(meta, needle):
    t = _t(2)
    with pytest.raises(UserError, match=None) as e:
        validate_paged_values(t, meta(t.context_lens))
    msg = str(e.value)
    assert needle in msg and "\n" not in msg, msg


def test_other_block_sizes_ignore_the_schedule_in_the_check_as_in_the_call():
    import mqa_cli as dg

    t = _paged(paged_inputs(1, [100, 37], bs=16, seed=2))
    args = (t.q, t.kv_cache, t.weights, t.context_lens, t.block_table)
    garbage = torch.full((3, 2), -7, dtype=torch.int32)  # not read at block size 16, so not checked either
    got = dg.fp8_paged_mqa_logits(*args, garbage, t.max_context_len, True, check_values=True)
    assert torch.equal(got, dg.fp8_paged_mqa_logits(*args, None, t.max_context_len, True))
