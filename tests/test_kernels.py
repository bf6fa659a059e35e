"""Every prefill kernel against the float64 reference over the shared matrix (interpreter on CPU):
exact -inf pattern, relative error, calc_diff, every entry written, bitwise repeatable."""
import pytest
import torch

from mqa_cli.check.verify import DIFF_TOL, REL_TOL, verify
from mqa_cli.plan import dispatch, targets
from mqa_cli.problem import source
from mqa_cli.problem.matrix import VERIFY_MATRIX
from mqa_cli.problem.prefill import ProblemSpec

from .conftest import HEAVY, some_heavy

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
TARGET = targets.detect()
PREFILL_ROWS = [r.name for r in dispatch.PREFILL_ROWS if not r.name.startswith("gluon")]


def rows_to_check() -> list:
    """(row, spec) for every config the portable rows give a matrix problem on this target, each config once (rows
    that build the same config here run one kernel: the same constexprs, options, grid and schedule), less the config dispatch selects: `mqa-logits verify` checks that one
    over the same matrix with the same checks (test_cli.test_verify_matrix_passes, float64 reference)."""
    out = []
    for spec in VERIFY_MATRIX:
        shape = source.from_spec(spec).shape
        seen = [dispatch.plan(shape, TARGET).config]
        for row in PREFILL_ROWS:
            cfg = dispatch.plan(shape, TARGET, kernel=row, force=True).config
            if cfg not in seen:
                seen.append(cfg)
                heavy = shape.heads * shape.dim * shape.S * shape.N > 1.5 * 64 * 64 * 128 * 128  # the interpreter's slowest
                # heads_on_m (the AMD rows; gfx950's runs one query row per program) takes the interpreter 3-10 s
                # a shape past S x N 1000: those run in the heavy pass (test_amd_rows keeps windows, both block
                # orders and compressed output for each AMD row every run)
                heavy |= cfg.kernel == "mqa_logits_heads_on_m" and shape.S * shape.N > 200
                out.append(pytest.param(row, spec, id=f"{spec.label()}-{row}", marks=[HEAVY] if heavy else []))
    return out


@pytest.mark.parametrize("row, spec", rows_to_check())
def test_kernel_matches_reference(row, spec):
    prob = source.from_spec(spec)
    plan = dispatch.plan(prob.shape, TARGET, kernel=row, force=True)
    t = prob.materialise(DEVICE)
    r = verify(t, plan.config, spec.clean_logits, spec.label(), dtype=torch.float64)
    c = r.comparison
    assert c.inf_pattern_ok and c.unwritten == 0
    assert c.rel_error < REL_TOL and c.calc_diff < DIFF_TOL
    assert r.bitwise_repeat


def test_inputs_are_random_and_nonzero():
    t = source.from_spec(VERIFY_MATRIX[2]).materialise("cpu")
    for x in (t.q.float(), t.kv.float(), t.kv_scales, t.weights):
        assert (x != 0).float().mean() > 0.9
    t2 = source.from_spec(VERIFY_MATRIX[2].with_(seed=1)).materialise("cpu")
    assert not torch.equal(t.q.float(), t2.q.float())


def test_reference_matches_float64_definition():
    from mqa_cli.check.reference import reference_logits

    spec = VERIFY_MATRIX[5]
    t = source.from_spec(spec).materialise("cpu")
    q, kv = t.q.double(), t.kv.double()
    scores = torch.einsum("shd,nd->shn", q, kv).relu()
    dense = (scores * t.weights.double()[:, :, None]).sum(1) * t.kv_scales.double()[None, :]
    j = torch.arange(t.N)[None, :]
    live = (j >= t.ks[:, None]) & (j < t.ke[:, None])
    expect = torch.where(live, dense, torch.tensor(float("-inf"), dtype=torch.float64))
    got = reference_logits(t, dtype=torch.float64, budget_bytes=1 << 16)  # many chunks
    assert torch.equal(torch.isinf(got), ~live)
    assert torch.allclose(got[live], expect[live], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("order,dead", some_heavy([(0, 1), (1, 4), (2, 8)], keep={2}))
def test_h64d128_block_orders_and_dead_widths(order, dead):
    """Every block order and -inf store width writes the same, correct logits."""
    from dataclasses import replace

    # Two sequences of 512 kv (ratio 2): whole interior tiles and a dead region on both sides of them.
    spec = ProblemSpec(batch=2, seq=512, ratio=2, heads=8, dim=32, seed=3)
    prob = source.from_spec(spec)
    cfg = dispatch.plan(prob.shape, targets.get_target("sm90"), kernel="h64d128_sm90", force=True).config
    cfg = replace(cfg, constexprs=dict(cfg.constexprs, ORDER=order, DEAD_MULT=dead))
    assert f"ORDER_{order}_DEAD_MULT_{dead}" in cfg.name
    r = verify(prob.materialise(DEVICE), cfg, True, spec.label(), dtype=torch.float64)
    assert r.ok, r.as_dict()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a GPU target's rows run on that GPU; on the CPU the "
                                                           "interpreter runs the portable rows above")
@pytest.mark.parametrize("row", [r.name for r in dispatch.PREFILL_ROWS])
def test_every_row_dispatch_can_pick_here(row):
    """On a GPU: every prefill row whose conditions hold there, on the odd-sized GPU shapes it holds for."""
    from mqa_cli.problem.matrix import GPU_EXTRA

    ran = 0
    for spec in (s for s in GPU_EXTRA if s.S <= 8192):
        prob = source.from_spec(spec)
        plan = dispatch.plan(prob.shape, TARGET, kernel=row, force=True)
        if not plan.chosen.ok:
            continue
        r = verify(prob.materialise(DEVICE), plan.config, spec.clean_logits, spec.label())
        assert r.ok, r.as_dict()
        ran += 1
    if not ran:
        pytest.skip(f"{row} holds for none of the GPU shapes on {TARGET.name}")
