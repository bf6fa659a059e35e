"""Paged decode: reference against hand-computed cases, kernel against the reference over the paged matrix
(interpreter), 2-D context_lens, counts (the library API's calls: test_api_forms.py and test_engine_forms.py)."""
import math

import pytest
import torch

from mqa_cli.check.paged_reference import reference_paged
from mqa_cli.check.verify import verify
from mqa_cli.plan import dispatch, targets
from mqa_cli.problem import matrix, source
from mqa_cli.problem.paged import PagedSpec, spec_counts
from mqa_cli.problem.paged_tensors import Paged, pack_cache, random_paged, unpack_blocks
from mqa_kernels.decode.paged.config import paged_rows

from .conftest import HEAVY

CPU = targets.TARGETS["cpu"]
FP8 = torch.float8_e4m3fn


def _hand_problem(next_n=2, contexts=(5, 3), bs=16, H=2, D=4):
    """Small exactly-representable inputs in a scattered cache: blocks assigned back to front."""
    B = len(contexts)
    g = torch.Generator().manual_seed(1)
    q = torch.randint(-3, 4, (B, next_n, H, D), generator=g).float().to(FP8)
    blocks_per = [-(-c // bs) for c in contexts]
    nb = sum(blocks_per) + 2
    kv = torch.randint(-2, 3, (nb * bs, D), generator=g).float().to(FP8)
    sf = torch.tensor([0.5, 0.25, 2.0, 1.0] * (nb * bs // 4), dtype=torch.float32)
    cache = pack_cache(kv, sf, bs)
    table = torch.full((B, max(blocks_per)), -1, dtype=torch.int32)  # unused entries: -1, never read
    nxt = nb - 1
    for b, n in enumerate(blocks_per):
        for i in range(n):
            table[b, i] = nxt
            nxt -= 1
    w = torch.tensor([[1.0, -0.5] * (H // 2)] * (B * next_n), dtype=torch.float32)
    return Paged(q, cache, w, torch.tensor(contexts, dtype=torch.int32), table, max(contexts)), kv, sf


def _hand_logit(t, kv, sf, b, row, k):
    bs = t.block_size
    tok = int(t.block_table[b, k // bs]) * bs + k % bs
    total = 0.0
    for h in range(t.heads):
        dot = sum(float(t.q[b, row, h, d].float()) * float(kv[tok, d].float()) for d in range(t.dim))
        total += float(t.weights[b * t.next_n + row, h]) * max(dot, 0.0)
    return total * float(sf[tok])


def test_reference_hand_computed_causal_draft_rows():
    t, kv, sf = _hand_problem(next_n=2, contexts=(5, 3))
    ref = reference_paged(t)
    assert ref.shape == (4, 5)
    # Row (b, t) sees k < ctx[b] - next_n + t + 1.
    ends = {(0, 0): 4, (0, 1): 5, (1, 0): 2, (1, 1): 3}
    for (b, row), e in ends.items():
        r = b * 2 + row
        for k in range(5):
            if k < e:
                assert ref[r, k].item() == pytest.approx(_hand_logit(t, kv, sf, b, row, k), abs=1e-6)
            else:
                assert ref[r, k].item() == -math.inf
    assert t.row_ends().tolist() == [[4, 5], [2, 3]]


def test_reference_unpack_matches_layout():
    """Block i: block_size*D fp8 bytes then block_size fp32 scales (DeepGEMM's byte layout)."""
    t, kv, sf = _hand_problem()
    raw = t.kv_cache[1].reshape(-1)
    bs, D = t.block_size, t.dim
    assert torch.equal(raw[: bs * D].view(FP8).float(), kv[bs:2 * bs].float().reshape(-1))
    assert torch.equal(raw[bs * D:].view(torch.float32), sf[bs:2 * bs])
    k2, s2 = unpack_blocks(t.kv_cache, torch.tensor([1]), FP8)
    assert torch.equal(k2.float(), kv[bs:2 * bs].float()) and torch.equal(s2, sf[bs:2 * bs])


@pytest.mark.parametrize("spec", matrix.PAGED_VERIFY_MATRIX, ids=lambda s: s.label())
def test_kernel_matches_reference(spec):
    prob = source.from_spec(spec)
    plan = dispatch.plan(prob.shape, CPU)
    assert plan.chosen.row.name == "paged"
    t = prob.materialise("cpu")
    r = verify(t, plan.config, spec.clean_logits, prob.label)
    assert r.comparison.inf_pattern_ok and r.comparison.unwritten == 0
    assert r.comparison.rel_error < 1e-3 and r.comparison.calc_diff < 1e-3
    assert r.bitwise_repeat


def test_matrix_covers_the_issue():
    m = matrix.PAGED_VERIFY_MATRIX
    assert {1, 2, 3, 4, 8} <= {s.next_n for s in m}
    assert {16, 32, 64} == {s.block_size for s in m}
    assert {8, 16, 32, 64} == {s.heads for s in m} and {64, 128} == {s.dim for s in m}
    assert {True, False} == {s.clean_logits for s in m}
    assert any(s.batch == 1 for s in m)
    assert any(s.contexts and max(s.contexts) > 20 * sorted(s.contexts)[len(s.contexts) // 2] for s in m)
    chunks = {paged_rows(s.next_n, s.heads)[1] for s in m}
    assert chunks == {1, 2}  # both kernel variants (one dot per tile, two dots per tile) run


def test_counts_and_floor_formula():
    spec = PagedSpec(batch=2, next_n=2, block_size=16, heads=8, dim=64, contexts=(10, 4))
    c = spec_counts(spec)
    # rows end at 9, 10 and 3, 4
    assert c.live == 26 and c.S == 4 and c.N == 10
    assert c.flop == 2 * 8 * 64 * 26
    assert c.bytes == (10 + 4) * (64 + 4) + 4 * 10 * 4
    assert random_paged(spec).row_ends().tolist() == [[9, 10], [3, 4]]


def test_contexts_jitter_and_scattered_table():
    spec = PagedSpec(batch=64, next_n=1, context_len=1000, context_jitter=0.3, block_size=16, heads=8, dim=64)
    ctx = spec.context_lengths()
    assert min(ctx) >= 700 and max(ctx) < 1300 and len(set(ctx)) > 10
    assert ctx == spec.context_lengths()  # from the seed
    t = random_paged(spec.with_(batch=2, context_len=200))
    used = t.block_table[0, : -(-int(t.context_lens[0]) // 16)]
    assert (used[1:] - used[:-1] != 1).any()  # not contiguous


@pytest.mark.parametrize("batch,next_n,context_len,block_size", [
    pytest.param(3, 1, 300, 16, marks=HEAVY), (3, 2, 300, 64), pytest.param(3, 3, 300, 32, marks=HEAVY),
    pytest.param(9, 1, 700, 64, marks=HEAVY), (2, 4, 200, 64)])
def test_sm90_config_runs_correctly_in_the_interpreter(batch, next_n, context_len, block_size):
    """The portable row's tuned Hopper configs (their tiles over 16/32/64-token pages, their schedule) compute the
    same function: run them through the interpreter (launch options do not apply there). The Gluon row that
    Hopper dispatches at block size 64 has no interpreter path: the GPU script checks it.

    The config is the one dispatch gives sm90 (same constexprs and options, asserted), over 7 schedule ranges
    instead of the H200's 132: the interpreter runs every program in turn, and 132 x SUBS programs of mostly
    empty ranges cost minutes without reaching another line. With 7 ranges each holds several cache blocks, ranges
    cut sequences mid-way, and some of each range's SUBS sub-programs get no tile (batch 9: the split's chunks of 4
    sequences end in a partial one); empty ranges and other widths are test_paged_kernel.test_any_schedule_width's."""
    from mqa_kernels.decode.paged.config import paged_config

    spec = PagedSpec(batch=batch, next_n=next_n, context_len=context_len, context_jitter=0.3, block_size=block_size,
                     heads=8 if batch > 8 else 16, dim=64, seed=5)
    prob = source.from_spec(spec)
    sm90 = dispatch.plan(prob.shape, targets.TARGETS["sm90"], kernel="paged").config
    t = prob.materialise("cpu")
    cfg = paged_config(heads=t.heads, dim=t.dim, next_n=next_n, block_size=block_size, batch=batch,
                       max_context_len=t.max_context_len, clean=True, backend="cuda", units=7)
    assert (cfg.name, cfg.constexprs, cfg.options) == (sm90.name, sm90.constexprs, sm90.options)
    assert sm90.grid[0] > cfg.grid[0] == 7 * cfg.constexprs["SUBS"]
    r = verify(t, cfg, True, prob.label)
    assert r.ok, r.as_dict()
