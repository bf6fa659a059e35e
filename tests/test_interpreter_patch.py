"""The interpreter's language swap, made once per launch (mqa_cli.launch.interpreter.patch_language_once_per_launch):
a launch swaps triton.language's builtins once, its jit helpers' calls do not swap them again, and when the launch
ends every attribute is back as it was; the logits are the reference's."""
import pytest
import torch

from mqa_cli.launch import interpreter

from .reference64 import assert_logits, fp8_q, fp8_rows, gen, prefill64

pytestmark = pytest.mark.skipif(not interpreter.active(), reason="the interpreter runs only without a GPU")


# what triton's interpreter itself leaves swapped in triton.language.core after a launch (its helpers' own swaps,
# never undone; the same with or without the wrapper): fresh objects each launch, so not compared
TRITONS_OWN_LEFTOVERS = {"range", "static_range", "static_assert", "multiple_of", "max_contiguous", "max_constancy"}


def _snapshot():
    import triton.language as tl

    return {(m.__name__, k): v for m in (tl, tl.core, tl.math) for k, v in vars(m).items()
            if not (m is tl.core and k in TRITONS_OWN_LEFTOVERS)} | \
        {("tensor", k): v for k, v in vars(tl.core.tensor).items()}


def test_one_swap_per_launch_and_everything_restored(monkeypatch):
    from triton.runtime import interpreter as ti

    import mqa_cli

    g = gen(3)
    S, N, H, D = 24, 90, 16, 64
    q = fp8_q((S, H, D), g)
    kv, sc = fp8_rows(N, D, g)
    w = torch.randn(S, H, generator=g)
    ke = torch.arange(S, dtype=torch.int32) * 3 + 20
    ks = (ke - 40).clamp(min=0).to(torch.int32)
    mqa_cli.fp8_mqa_logits(q, (kv, sc), w, ks, ke, clean_logits=True)  # installs the wrapper at first launch
    wrapper = ti._patch_lang
    assert wrapper.__module__ == interpreter.__name__
    swaps = []
    real_scope = ti._LangPatchScope

    class Counting(real_scope):
        def set_attr(self, obj, name, value):
            swaps.append(name)
            super().set_attr(obj, name, value)

    monkeypatch.setattr(ti, "_LangPatchScope", Counting)
    before = _snapshot()
    out = mqa_cli.fp8_mqa_logits(q, (kv, sc), w, ks, ke, clean_logits=True)
    assert _snapshot() == before
    ref, mag = prefill64(q, kv, sc, w, ks, ke)
    assert_logits(out, ref, mag, clean=True)
    once = len(swaps)
    # the interpreter's own swap, redone at every helper call: more attributes set, the same logits
    swaps.clear()
    monkeypatch.setattr(ti, "_patch_lang", wrapper.real)
    again = mqa_cli.fp8_mqa_logits(q, (kv, sc), w, ks, ke, clean_logits=True)
    assert torch.equal(again, out) and len(swaps) > once > 0
