"""The version facts (kernels/common/versions.py) agree with the installed triton, found by feature: the Gluon names the
kernels call, the launcher the direct launch takes, how a reduction orders its adds, whether a compile without an
fp-fusion setting warns, whether the interpreter can run with this numpy. Run on each release the project takes
(.ci/run: 3.8 in full, 3.6 and 3.9 with `-m versions`), this is what keeps a fact from drifting."""
import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import version

import pytest

from mqa_cli.launch import interpreter
from mqa_cli.plan import dispatch, targets
from mqa_kernels.common import versions

from .conftest import HEAVY

pytestmark = pytest.mark.versions
TRITON = version("triton")


def test_release_parsing_and_fact_lookup():
    assert versions.release("3.8.0") == (3, 8) and versions.release("3.10.1+git0abc") == (3, 10)
    assert versions.FACTS["gluon_hopper"].required() == "3.6, 3.8 or 3.9 (fact gluon_hopper)"
    assert versions.holds("gluon_hopper", "3.9.0") and not versions.holds("gluon_hopper", "3.5.1")
    assert not versions.holds("gluon_hopper", "3.10.0")  # a release nobody compiled the kernels on
    names = versions.facts_of("3.6.0")
    assert "gluon_names_3_6" in names and "gluon_names_3_8" not in names and "tree_reduce" not in names
    # every release a fact names is one pyproject admits
    for f in versions.FACTS.values():
        assert all((3, 6) <= r < (3, 10) for r in f.releases), f


def test_installed_triton_is_a_release_the_facts_cover():
    assert versions.holds("triton_kernels"), f"triton {TRITON}: not a release the facts cover"


@pytest.mark.skipif(not versions.holds("gluon_hopper"), reason="no Gluon on this triton")
def test_gluon_names_are_the_ones_the_facts_say():
    from mqa_kernels.common import gluon_compat

    api = gluon_compat.api()
    if versions.holds("gluon_names_3_8"):
        assert api == {"barrier": "barrier", "async_load": "async_load", "async_store": "async_store"}, api
    else:
        assert versions.holds("gluon_names_3_6")
        assert api == {"barrier": "thread_barrier", "async_load": "async_copy_global_to_shared",
                       "async_store": "async_copy_shared_to_global"}, api


def test_dispatch_rules_gluon_rows_by_the_fact():
    """On a release the fact lists the Gluon row is chosen for H 64 D 128 S 8192 on sm90; a release it does not
    list rules it out with the fact's name in the reason."""
    sm90 = targets.get_target("sm90")
    shape = dispatch.Shape("prefill", 8192, 8192, 64, 128)
    p = dispatch.plan(shape, sm90)
    assert (p.chosen.row.name == "gluon_ws_sm90") == versions.holds("gluon_hopper")

    class Old(dispatch.Capabilities):
        triton_version = "3.5.1"
        gluon = "available"

    q = dispatch.plan(shape, sm90, kernel="gluon_ws_sm90", force=True, caps=Old())
    gluon = next(c for c in q.candidates if c.row.name == "gluon_ws_sm90")
    assert not gluon.ok and "fact gluon_hopper" in gluon.first_failure.sentence()
    tiled = next(c for c in q.candidates if c.row.name == "tiled")
    assert not tiled.ok and "fact triton_kernels" in tiled.first_failure.sentence()


def test_interpreter_refuses_a_numpy_its_triton_cannot_take():
    assert interpreter.numpy_problem("3.6.0", "2.4.1") and "numpy < 2.4" in interpreter.numpy_problem("3.6.0", "2.4.1")
    assert interpreter.numpy_problem("3.6.0", "2.3.5") is None
    assert interpreter.numpy_problem("3.8.0", "2.4.1") is None and interpreter.numpy_problem("3.9.0", "2.4.6") is None


def test_interpreter_runs_with_the_installed_numpy():
    """Where the check passes, the interpreter really converts a tensor index (what 3.6 does with int())."""
    if interpreter.numpy_problem():
        pytest.skip(interpreter.numpy_problem())
    import numpy as np

    data = np.array([3], dtype=np.int32)
    assert int(data.squeeze()) == 3  # what triton 3.8+ does
    if versions.holds("interpreter_needs_numpy_below_2_4"):
        assert int(data) == 3  # what triton 3.6 does: fine on numpy < 2.4


PROBE = textwrap.dedent(r'''
    import json, os, sys, warnings
    os.environ.pop("TRITON_INTERPRET", None)
    os.environ.pop("TRITON_DEFAULT_FP_FUSION", None)
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    @gluon.jit
    def head_sum(x_ptr, w_ptr, o_ptr):
        # 16 values a thread along axis 1: the reduction is in-thread only
        lay: gl.constexpr = gl.BlockedLayout([1, 16], [32, 1], [4, 1], [1, 0])
        r = gl.arange(0, 128, layout=gl.SliceLayout(1, lay))
        c = gl.arange(0, 16, layout=gl.SliceLayout(0, lay))
        offs = gl.expand_dims(r, 1) * 16 + gl.expand_dims(c, 0)
        x = gl.load(x_ptr + offs)
        w = gl.load(w_ptr + offs)
        gl.store(o_ptr + r, gl.sum(x * w, axis=1))

    from triton.experimental.gluon._runtime import GluonASTSource
    sig = {"x_ptr": "*fp32", "w_ptr": "*fp32", "o_ptr": "*fp32"}
    target = GPUTarget("cuda", 90, 32)
    out = {}
    for fusion in (None, True):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            opts = {} if fusion is None else {"enable_fp_fusion": fusion}
            k = triton.compile(GluonASTSource(head_sum, sig, {}, {}), target=target, options=opts)
        out[str(fusion)] = {"warned": any("FP_FUSION" in str(w.message) or "fp fusion" in str(w.message).lower()
                                          for w in seen),
                            "fma": k.asm["ptx"].count("fma.rn.f32"), "mul": k.asm["ptx"].count("mul.f32"),
                            "add": k.asm["ptx"].count("add.f32")}
    print(json.dumps(out))
''')


@pytest.mark.skipif(not versions.holds("gluon_hopper"), reason="the probe is a Gluon kernel")
def test_reduction_order_and_fp_fusion_warning_are_the_ones_the_facts_say(tmp_path):
    """A plain gl.sum of 16 in-thread products: one FMA chain (15 FMA + 1 MUL) where reductions run in order, a
    tree (8 MUL, 8 FMA-or-ADD ...) where fact tree_reduce holds, the reason the kernels write fma_chain; and a compile
    that leaves enable_fp_fusion unset warns exactly where fact fp_fusion_default_warns holds."""
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TRITON_DEFAULT_FP_FUSION")}
    (tmp_path / "probe.py").write_text(PROBE)  # (a jitted function needs a source file)
    p = subprocess.run([sys.executable, str(tmp_path / "probe.py")], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    chain = out["True"]["fma"] >= 15
    assert chain != versions.holds("tree_reduce"), out
    assert chain == versions.holds("in_order_reduce"), out
    assert out["None"]["warned"] == versions.holds("fp_fusion_default_warns"), out
    assert not out["True"]["warned"], out


def test_the_reduction_order_facts_split_every_release():
    """Each release the kernels compile on reduces either in order or as a tree, never both or neither: the Gluon
    head sums take one form or the other by them (mqa_kernels.common.gluon_heads)."""
    for rel in versions.FACTS["gluon_hopper"].releases:
        v = f"{rel[0]}.{rel[1]}.0"
        assert versions.holds("in_order_reduce", v) != versions.holds("tree_reduce", v), v


@pytest.mark.skipif(not versions.holds("gluon_hopper"), reason="no Gluon on this triton")
def test_the_gluon_head_sums_take_the_form_the_fact_says():
    """The Gluon kernels read the fact for the triton they import: plain gl.sum head sums exactly where the release
    reduces in order (PLAIN_SUMS, a constexpr the JIT folds), and explain names the fact on their rows."""
    from mqa_kernels.common import gluon_compat, gluon_heads

    assert gluon_compat.in_order_reduce == versions.holds("in_order_reduce")
    assert bool(gluon_heads.PLAIN_SUMS.value) == versions.holds("in_order_reduce")
    p = dispatch.plan(dispatch.Shape("prefill", 8192, 8192, 64, 128), targets.get_target("sm90"),
                      kernel="gluon_ws_sm90", force=True)
    row = next(c for c in p.candidates if c.row.name == "gluon_ws_sm90")
    said = " ".join(c.required for c in row.checks)
    assert ("in_order_reduce" in said) == versions.holds("in_order_reduce"), said
    assert ("tree_reduce" in said) == versions.holds("tree_reduce"), said


@pytest.mark.skipif(interpreter.numpy_problem() is not None, reason="this numpy does not run this triton's interpreter")
@pytest.mark.parametrize("H,D,clean", [(16, 64, True), (64, 128, False)])
def test_the_interpreter_runs_the_prefill_kernel_on_this_release(H, D, clean):
    """The CPU path on this release: the dispatched Triton kernels through the interpreter, against float64."""
    from .reference64 import assert_logits
    from .test_api_forms import prefill, prefill_problem

    p = prefill_problem(S=40, N=150, H=H, D=D, seed=H + D)
    assert_logits(prefill(p, clean_logits=clean), p.ref, p.mag, clean)


@pytest.mark.skipif(interpreter.numpy_problem() is not None, reason="this numpy does not run this triton's interpreter")
def test_the_interpreter_runs_the_paged_kernel_on_this_release():
    from .reference64 import assert_logits
    from .test_api_forms import paged, paged_problem

    p = paged_problem(B=3, T=2, ctx=[[30, 31], [5, 6], [60, 61]], seed=7)
    assert_logits(paged(p, clean_logits=True), p.ref, p.mag, True)


@HEAVY  # (two uncached Gluon compiles)
@pytest.mark.skipif(not versions.holds("gluon_hopper"), reason="no Gluon on this triton")
def test_a_gluon_compile_leaks_at_exit_where_the_fact_says_and_the_command_shows_none(tmp_path):
    """A process that compiles a Gluon TMA kernel (uncached) and exits normally prints nanobind's leak warnings
    exactly where fact gluon_bindings_leak_at_exit holds; the mqa-logits script never does."""
    args = ["dump", "--paged", "--batch", "1", "--next-n", "1", "--context-len", "8192", "--heads", "64", "--dim",
            "128", "--target", "sm90"]
    err = {}
    for how in ("plain", "script"):
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env["TRITON_CACHE_DIR"] = str(tmp_path / f"cache-{how}")  # (uncached: the compile runs)
        # plain: the CLI's main with the interpreter's ordinary exit; script: what `mqa-logits` runs (cli.console)
        cmd = ([sys.executable, "-c", "import sys; from mqa_cli.cli import main; sys.argv[0] = 'mqa-logits'; main()"]
               if how == "plain" else [sys.executable, "-m", "mqa_cli"])
        p = subprocess.run(cmd + args + ["--dump-dir", str(tmp_path / how)], capture_output=True, text=True, env=env,
                           timeout=600)
        assert p.returncode == 0, p.stderr[-2000:]
        assert "tensor-core loops" in p.stdout
        err[how] = p.stderr
    assert ("nanobind: leaked" in err["plain"]) == versions.holds("gluon_bindings_leak_at_exit"), err["plain"][-800:]
    assert "nanobind" not in err["script"], err["script"][-800:]
