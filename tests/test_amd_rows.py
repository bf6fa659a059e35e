"""The AMD prefill rows (heads_on_m_gfx950, heads_on_m_gfx942: the heads_on_m kernel) checked where an AMD kernel can be
checked here: through the Triton interpreter against the float64 reference (S >= 4096 shapes, windows with
non-zero ks, clean and not, compressed), and the static cost model's reading of AMDGCN and its stored figures."""
import pytest
import torch

from mqa_cli.inspect import amdgcn_model
from mqa_cli.plan import dispatch, targets
from mqa_cli.problem.shape import Shape

from .conftest import some_heavy
from .reference64 import assert_logits, compress64, fp8_q, fp8_rows, gen, prefill64


def _config(S, N, H=64, D=128, clean=True, compressed=False, target="gfx950"):
    shape = Shape("prefill", S, N, H, D, clean, "e4m3fn", compressed=compressed)
    return dispatch.plan(shape, targets.get_target("cpu"), kernel=f"heads_on_m_{target}", force=True).config


def _window_problem(S, N, width, seed):
    """Sliding windows of `width` ending at each row's causal end ceil((i + 1) N / S): ks > 0 once the end passes
    `width`, so head, interior and tail tiles all run."""
    g = gen(seed)
    q = fp8_q((S, 64, 128), g)
    kv, sc = fp8_rows(N, 128, g)
    w = torch.randn(S, 64, generator=g)
    ke = ((torch.arange(S) + 1) * N + S - 1) // S
    ks = (ke - width).clamp(min=0)
    return q, kv, sc, w, ks.to(torch.int32), ke.to(torch.int32)


def _run(cfg, q, kv, sc, w, ks, ke, max_seqlen_k=0):
    from mqa_cli.launch import families as launchers
    from mqa_cli.problem.tensors import Prefill

    return launchers.run(Prefill(q, kv, sc, w, ks, ke), cfg, max_seqlen_k=max_seqlen_k)


BLOCK_Q = {"gfx950": 1, "gfx942": 4}  # the rows' block shapes (one-wave workgroups on gfx950)

# (S, N, window, clean, target). The interpreter runs a program's tiles one op at a time (about 0.1 s a tile, and
# gfx950's row has a program per query row): every run keeps a few programs per row; S = 4096, the rows'
# threshold, runs in the heavy pass with windows of one or two tiles (about 8 minutes for gfx950's 4096 programs).
WINDOWS = some_heavy([(4096, 512, 40, True, "gfx950"), (4096, 512, 40, False, "gfx942"),
                      (4096, 1024, 150, True, "gfx942"),
                      (16, 300, 150, True, "gfx950"), (24, 10, 6, False, "gfx950"),
                      (32, 300, 150, True, "gfx942"), (64, 30, 12, False, "gfx942")], keep=(3, 4, 5, 6),
                     ids=lambda p: f"S{p[0]}-N{p[1]}-{'clean' if p[3] else 'not-clean'}-{p[4]}")


@pytest.mark.parametrize("S,N,width,clean,target", WINDOWS)
def test_amd_rows_windows(S, N, width, clean, target):
    """Windows with ks > 0, with each row's own block shape, in both block orders (S >= 2N: short rows, zigzag)."""
    q, kv, sc, w, ks, ke = _window_problem(S, N, width, seed=11)
    assert (ks > 0).any() and (ks == 0).any()
    cfg = _config(S, N, clean=clean, target=target)
    assert cfg.name.startswith(f"mqa_logits_heads_on_m_H_64_D_128_BLOCK_Q_{BLOCK_Q[target]}_")
    out = _run(cfg, q, kv, sc, w, ks, ke)
    ref, mag = prefill64(q, kv, sc, w, ks, ke)
    assert_logits(out, ref, mag, clean=clean)


@pytest.mark.parametrize("S,target", some_heavy([(4099, "gfx942"), (16, "gfx950"), (18, "gfx942")], keep=(1, 2)))
def test_amd_rows_compressed(S, target):
    """Compressed output (column c = logit(i, ks + c)); S = 18 and 4099 are not multiples of gfx942's 4-row
    block."""
    N, width = (S // 6, 90) if S > 1000 else (300, 90)
    q, kv, sc, w, ks, ke = _window_problem(S, N, width, seed=12)
    out = _run(_config(S, N, compressed=True, target=target), q, kv, sc, w, ks, ke, max_seqlen_k=width)
    ref, mag = prefill64(q, kv, sc, w, ks, ke)
    cref, cmag = compress64(ref, mag, ks, ke, width)
    assert_logits(out, cref, cmag, clean=True)


@pytest.mark.parametrize("H", [32, 16])
def test_heads_on_m_other_head_counts(H):
    """H 32 (the row's other head count: one 32-head tile a row) and H 16 (fewer heads than a tile, as --force
    runs it): causal rows."""
    S = N = 40
    g = gen(13 + H)
    q = fp8_q((S, H, 128), g)
    kv, sc = fp8_rows(N, 128, g)
    w = torch.randn(S, H, generator=g)
    ke = torch.arange(1, S + 1, dtype=torch.int32)
    ks = torch.zeros(S, dtype=torch.int32)
    out = _run(_config(S, N, H=H), q, kv, sc, w, ks, ke)
    ref, mag = prefill64(q, kv, sc, w, ks, ke)
    assert_logits(out, ref, mag, clean=True)


def test_amd_rows_run_their_own_block_shape_here():
    """On the CPU each row plans the heads_on_m kernel with the block shape its AMD target compiles (the tests above
    check what gfx950 and gfx942 run), the interpreter's options aside."""
    for target in ("gfx950", "gfx942"):
        here = _config(4096, 4096, target=target)
        shape = Shape("prefill", 4096, 4096, 64, 128, True, targets.get_target(target).fp8)
        there = dispatch.plan(shape, targets.get_target(target)).config
        assert here.kernel == there.kernel == "mqa_logits_heads_on_m"
        assert {k: v for k, v in here.constexprs.items() if k != "EVEN_S"} == \
            {k: v for k, v in there.constexprs.items() if k != "EVEN_S"}
        assert here.constexprs["BLOCK_Q"] == here.options["num_warps"] == BLOCK_Q[target]


# ------------------------------------------------------------------------------------------ the cost model

AMDGCN = """
_k:
  s_load_dwordx2 s[0:1], s[4:5], 0x0
.LBB0_1:
  buffer_load_dword v1, v2, s[8:11], 0 offen
  buffer_load_dwordx4 v3, s[12:15], 0 offen lds
  ds_read_b128 v[4:7], v8
  ds_read_b128 v[9:12], v8 offset:16
  v_mfma_f32_32x32x64_f8f6f4 v[16:31], v[32:39], v[40:47], v[16:31]
  v_mfma_f32_32x32x64_f8f6f4 v[16:31], v[48:55], v[40:47], v[16:31]
  v_maximum3_f32 v0, v16, 0, 0
  v_pk_fma_f32 v[0:1], v[2:3], v[4:5], v[0:1]
  v_exp_f32_e32 v2, v2
  s_waitcnt vmcnt(0)
  s_barrier
  s_add_i32 s3, s3, 64
  s_cmp_lt_i32 s3, s22
  s_cbranch_scc1 .LBB0_1
  s_endpgm
"""


def test_model_reads_one_loop_and_its_bounds():
    (lp,) = amdgcn_model.model(AMDGCN, "gfx950")
    assert lp["mfma"] == {"32x32x64": 2} and lp["flop"] == 2 * 2 * 32 * 32 * 64
    assert lp["valu"] == 3 and lp["barriers"] == 1 and lp["waitcnts"] == 1
    assert lp["lds_bytes"] == 2 * 16 * 64 and lp["memory_bytes"] == (4 + 16) * 64
    u = lp["unit_cycles"]
    assert u["mfma"] == 2 * 64 and u["valu"] == 2 * 4 + 16 and u["scalar"] == 3  # add, cmp, branch
    assert lp["bound"] == "mfma" and lp["per_work"] == pytest.approx(128 * amdgcn_model.WORK_FLOP / lp["flop"])
    # gfx942 has no 32x32x64 MFMA: the model gives it no cycles, and says so by its bound
    text = amdgcn_model.table([lp], "gfx950")
    assert "not a timing" in text and "ISA" in text and "per 1.05 MFLOP" in text


def test_model_ignores_loops_without_mfma_and_refuses_other_targets():
    assert amdgcn_model.model("_k:\n.LBB0_1:\n  v_add_f32 v0, v0, v1\n  s_cbranch_scc1 .LBB0_1\n", "gfx942") == []
    with pytest.raises(ValueError):
        amdgcn_model.model(AMDGCN, "sm90")


def test_stored_figures_cover_the_amd_rows_and_meet_the_bar():
    """The figures `explain` shows exist for the AMD rows at H 64 D 128; the dispatched kernel's main loop is at
    most the portable kernel's per FLOP on both targets (and aiter's: 760 on gfx950, 1,976 on gfx942, as
    docs/CODEGEN.md records), at 2 waves per SIMD with no spill; on gfx950 with no barrier in the loop and at most
    213 instructions in it."""
    for target in ("gfx950", "gfx942"):
        shape = Shape("prefill", 8192, 8192, 64, 128, True, targets.get_target(target).fp8)
        cfg = dispatch.plan(shape, targets.get_target(target)).config
        ours = amdgcn_model.stored(target, cfg.dump_name)
        assert ours is not None, f"no stored figures for {target}: python -m mqa_cli.inspect.amdgcn_model --write"
        tiled = amdgcn_model.stored(target, dispatch.plan(shape, targets.get_target(target), kernel="tiled")
                                    .config.dump_name)
        assert ours["waves"] == 2 and ours["spills"] == 0 and ours["per_work"] <= tiled["per_work"]
        assert ours["per_work"] <= {"gfx950": 760, "gfx942": 1976}[target]
        assert ours["per_work"] == pytest.approx({"gfx950": 544, "gfx942": 1024}[target], rel=0.02)
    at_4096 = amdgcn_model.stored("gfx950", dispatch.plan(Shape("prefill", 4096, 4096, 64, 128, True, "e4m3fn"),
                                                          targets.get_target("gfx950")).config.dump_name)
    assert at_4096["barriers"] == 0 and at_4096["instructions"] <= 213


def test_wheel_ships_the_stored_figures():
    """setup.py's package_data names the figures file `explain` reads (an installed wheel has it too)."""
    from pathlib import Path

    setup = (Path(__file__).resolve().parents[1] / "setup.py").read_text()
    assert '"mqa_cli.inspect": ["amd_figures.json"]' in setup and Path(amdgcn_model.FIGURES).exists()
