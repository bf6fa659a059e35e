"""The library API: DeepGEMM's argument form, validation as ValueError, dispatch once per shape."""
import pytest
import torch

from mqa_cli import fp8_mqa_logits, mqa_logits
from mqa_cli.check.reference import reference_logits
from mqa_cli.errors import UserError
from mqa_cli.problem.prefill import ProblemSpec
from mqa_cli.problem.tensors import random_prefill

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def test_deepgemm_form_equals_explicit_form():
    t = random_prefill(ProblemSpec(seq=70, heads=16, dim=64, layout="window", window=20), device=DEVICE)
    a = fp8_mqa_logits(t.q, (t.kv, t.kv_scales), t.weights, t.ks, t.ke)
    b = fp8_mqa_logits(t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke)
    assert torch.equal(a, b)
    ref = reference_logits(t)
    live = torch.isfinite(ref)
    assert torch.equal(torch.isneginf(a), ~live)
    assert ((a[live] - ref[live]).norm() / ref[live].norm()) < 1e-3


def _bad(t, **changes):
    d = t.as_dict()
    d.update(changes)
    return d


@pytest.mark.parametrize("change,needle", [
    (lambda t: dict(q=t.q.float()), "q must be fp8"),
    (lambda t: dict(kv=t.kv[:, :16]), "kv must be"),
    (lambda t: dict(weights=t.weights[:, :3]), "weights must have shape"),
    (lambda t: dict(ks=t.ks.long()), "ks must be torch.int32"),
    (lambda t: dict(ks=t.ke + 1), "ks > ke"),
    (lambda t: dict(ke=t.ke + 1000), "ke > N"),
    (lambda t: dict(ks=t.ks - 5), "ks must be >= 0"),
    (lambda t: dict(kv_scales=torch.where(torch.arange(t.N, device=t.kv.device) == 3, float("nan"), t.kv_scales)),
     "kv_scales holds NaN"),
])
def test_validation(change, needle):
    """Every check raises a clear UserError when asked for (check_values=True); value checks, which read
    data and sync, do not run by default (the hot path), but dtype/shape checks always do."""
    t = random_prefill(ProblemSpec(seq=16, heads=8, dim=32), device=DEVICE)
    d = _bad(t, **change(t))
    args = (d["q"], d["kv"], d["kv_scales"], d["weights"], d["ks"], d["ke"])
    with pytest.raises(UserError, match=needle.replace("(", r"\(")):
        mqa_logits(*args, check_values=True)
    assert issubclass(UserError, ValueError)
    value_check = needle in ("ks > ke", "ke > N", "ks must be >= 0", "kv_scales holds NaN")
    if value_check:
        out = mqa_logits(*args)  # no data read: no error; the result is unspecified
        assert out.shape == (t.S, t.N)
    else:
        with pytest.raises(UserError, match=needle.replace("(", r"\(")):
            mqa_logits(*args)


def test_unsupported_heads_is_a_clear_error():
    t = random_prefill(ProblemSpec(seq=4, heads=12, dim=32), device=DEVICE)
    with pytest.raises(UserError, match="heads must be a power of two"):
        fp8_mqa_logits(t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke)
