"""Dispatch: every row selected once and ruled out once, with the reason; explain's text and JSON agree;
explain with --target imports neither torch nor triton."""
import json
import subprocess
import sys

import pytest
from importlib.metadata import version

from mqa_cli.errors import UserError
from mqa_cli.plan import dispatch, targets
from mqa_kernels.common import versions
from mqa_cli.problem.shape import Shape

# The Gluon rows hold on the releases of version fact gluon_hopper; on another triton they are ruled out.
GLUON = versions.holds("gluon_hopper")

from .conftest import assert_one_line_error


def shape(S=8192, N=8192, H=64, D=128, clean=True, fp8="e4m3fn"):
    return Shape("prefill", S, N, H, D, clean, fp8)


# (row, a shape and target that select it, a shape and target that rule it out, the condition that does)
CASES = {
    "heads_on_m_gfx950": ((shape(), "gfx950"), (shape(S=4095), "gfx950"), "seq_len (S)"),
    "heads_on_m_gfx942": ((shape(fp8="e4m3fnuz"), "gfx942"), (shape(S=4095, fp8="e4m3fnuz"), "gfx942"), "seq_len (S)"),
    "gluon_ws_sm90": ((shape(H=32), "sm90"), (shape(H=32, D=32), "sm90"), "heads x dim"),  # (D 32: never swept)
    "h64d128_sm90": ((shape(H=32), "sm90", "h64d128_sm90"), (shape(H=16), "sm90"), "heads"),  # (forced: with Gluon
    # the row above holds wherever this one does; this one runs where Gluon is not there)
    "tiled": ((shape(H=32, D=64), "gfx950"), (shape(H=48), "sm90"), "heads"),
}


def test_every_row_has_a_case():
    names = [r.name for r in dispatch.PREFILL_ROWS]
    assert sorted(names) == sorted(n for n in CASES if n in names)
    missing = [n for n in names if n not in CASES]
    assert not missing


@pytest.mark.parametrize("row", list(CASES))
def test_row_selected_and_ruled_out(row):
    if row.startswith("gluon") and not GLUON:
        pytest.skip(f"{row} needs triton {versions.FACTS['gluon_hopper'].required()}; this is triton {version('triton')}")
    (sel_shape, sel_target, *requested), (out_shape, out_target), reason = CASES[row]
    p = dispatch.plan(sel_shape, targets.get_target(sel_target), kernel=(requested or [None])[0])
    assert p.chosen.row.name == row and p.chosen.ok
    cands = [dispatch.Candidate(r, r.conditions(out_shape, targets.get_target(out_target), dispatch.Capabilities()))
             for r in dispatch.TABLE if r.name == row]
    assert not cands[0].ok and cands[0].first_failure.name == reason
    try:
        p = dispatch.plan(out_shape, targets.get_target(out_target))
    except UserError as e:  # no row holds: the error names each row's reason
        assert f"{row}: {cands[0].first_failure.sentence()}" in str(e)
    else:
        assert p.chosen.row.name != row


def test_gfx950_rule_boundaries():
    g = targets.get_target("gfx950")
    assert dispatch.plan(shape(S=4096), g).chosen.row.name == "heads_on_m_gfx950"
    assert dispatch.plan(shape(S=4095), g).chosen.row.name == "tiled"
    h32 = dispatch.plan(shape(S=8192, H=32), g).chosen.row  # the row takes H 32 too: its name claims no head count
    assert h32.name == "heads_on_m_gfx950" and "aiter's rule (its H64 D128 kernel on gfx950 for seq_len >= 4096)" \
        in h32.summary
    assert dispatch.plan(shape(S=8192, H=32, D=64), g).chosen.row.name == "tiled"


def test_gfx942_needs_fnuz_and_cpu_refuses_fnuz():
    assert dispatch.plan(shape(fp8="e4m3fnuz"), targets.get_target("gfx942")).chosen.row.name == "heads_on_m_gfx942"
    assert dispatch.plan(shape(S=4095, fp8="e4m3fnuz"), targets.get_target("gfx942")).chosen.row.name == "tiled"
    with pytest.raises(UserError, match="fp8 flavour"):
        dispatch.plan(shape(), targets.get_target("gfx942"), kernel="heads_on_m_gfx942")
    with pytest.raises(UserError, match="e4m3fnuz"):
        dispatch.plan(shape(fp8="e4m3fnuz"), targets.get_target("cpu"))


def test_forced_kernel_names_failed_conditions():
    with pytest.raises(UserError, match="target must be == gfx950, is sm90"):
        dispatch.plan(shape(), targets.get_target("sm90"), kernel="heads_on_m_gfx950")
    p = dispatch.plan(shape(), targets.get_target("sm90"), kernel="heads_on_m_gfx950", force=True)
    assert p.forced and p.chosen.row.name == "heads_on_m_gfx950"
    with pytest.raises(UserError, match="unknown kernel"):
        dispatch.plan(shape(), targets.get_target("sm90"), kernel="nope")
    with pytest.raises(UserError, match="kernel h64d128_gfx942 is now named heads_on_m_gfx942"):
        dispatch.plan(shape(), targets.get_target("gfx942"), kernel="h64d128_gfx942")


def test_config_name_carries_config():
    p = dispatch.plan(shape(), targets.get_target("gfx950"))
    c = p.config.constexprs
    assert p.config.name.startswith("mqa_logits_heads_on_m_H_64_D_128_")
    assert f"BLOCK_Q_{c['BLOCK_Q']}" in p.config.name and "CLEAN_1" in p.config.name
    assert dispatch.plan(shape(clean=False), targets.get_target("gfx950")).config.name != p.config.name


def test_explain_text_and_json_agree(run_cli):
    args = ["explain", "--heads", "64", "--dim", "128", "--seq", "8192", "--target", "gfx950"]
    text = run_cli(*args)
    assert text.returncode == 0, text.stderr
    d = json.loads(run_cli(*args, "--json").stdout)
    assert d["plan"]["selected"] == "heads_on_m_gfx950"
    assert f"selected: {d['plan']['selected']}" in text.stdout
    assert d["plan"]["kernel_name"] in text.stdout
    assert d["problem"]["live"] == 33_558_528 and f"{d['problem']['live']:,}" in text.stdout
    assert d["floor"]["bound"] in ("compute", "memory") and f"{d['floor']['bound']}-bound" in text.stdout
    for row in d["plan"]["candidates"]:
        assert row["kernel"] in text.stdout
        if not row["ok"]:
            assert f"ruled out: {row['ruled_out_by']}" in text.stdout


def test_explain_shows_seq_len_failing(run_cli):
    out = run_cli("explain", "--heads", "64", "--dim", "128", "--seq", "4095", "--target", "gfx950").stdout
    assert "ruled out: seq_len (S) must be >= 4096, is 4095" in out
    assert "selected: tiled" in out


def test_explain_imports_neither_torch_nor_triton():
    code = ("import sys; from mqa_cli.cli import app; "
            "app(['explain', '--seq', '8192', '--target', 'sm90'], standalone_mode=False); "
            "bad = [m for m in ('torch', 'triton') if m in sys.modules]; "
            "print('IMPORTED', bad, file=sys.stderr); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_explain_bad_target(run_cli):
    assert_one_line_error(run_cli("explain", "--target", "sm70"), contains="unknown target")


def test_the_gluon_prefill_row_stops_where_its_block_offsets_would_pass_int32():
    """The Gluon prefill kernel addresses a query block's logits with int32 offsets from a 64-bit row base: up to 32
    rows of the padded output width must stay below 2^31 elements, or the shape goes to the next row, and explain
    says why."""
    sm90 = targets.get_target("sm90")
    ok = dispatch.plan(shape(N=2 ** 26 - 64), sm90)  # 32 x (2^26 - 64) < 2^31
    assert ok.chosen.row.name == "gluon_ws_sm90"
    big = dispatch.plan(shape(N=2 ** 26), sm90)  # 32 x 2^26 = 2^31
    assert big.chosen.row.name != "gluon_ws_sm90"
    gluon = next(c for c in big.candidates if c.row.name == "gluon_ws_sm90")
    assert [c.name for c in gluon.checks if not c.ok] == ["block offsets"]


def test_plan_spec_rebuilds_a_variant_with_its_schedule(monkeypatch):
    """`--kernel NAME:KEY=V` for run / verify: the row's config function is called again with the overrides, so
    the schedule follows them (a query block's items with kv_splits, BLOCK_Q with N); a key the row cannot take,
    or a row that cannot rebuild its config, is a one-line refusal."""
    if not GLUON:
        pytest.skip(f"the Gluon rows need triton {versions.FACTS['gluon_hopper'].required()}; this is triton {version('triton')}")
    from mqa_kernels.prefill.gluon_ws_sm90 import tuned

    monkeypatch.setattr(tuned, "CUDA_TUNED", {(8, 128): {"groups": (2, 1), "stages": 4, "q_in_lanes": True, "n": 128}})
    sm90 = targets.get_target("sm90")
    s8 = Shape("prefill", 8192, 8192, 8, 128)
    base = dispatch.plan(s8, sm90).config
    p = dispatch.plan_spec(s8, sm90, ":TMA_STORE=1,kv_splits=2")
    assert p.chosen.row.name == "gluon_ws_sm90" and p.config.constexprs["TMA_STORE"] is True
    assert p.config.schedule["args"]["kv_splits"] == 2 and p.config.schedule["items"] == 2 * base.schedule["items"]
    assert base.constexprs["TILE_PTR"] and not p.config.constexprs["TILE_PTR"]  # a per-thread store's option
    store = ("TMA_STORE", "TILE_PTR")
    assert {k: v for k, v in p.config.constexprs.items() if k not in store} == \
        {k: v for k, v in base.constexprs.items() if k not in store}  # the table's layout kept
    wide = dispatch.plan_spec(s8, sm90, "gluon_ws_sm90:BLOCK_Q=32").config
    assert wide.constexprs["BLOCK_Q"] == 32 and wide.schedule["items"] == 8192 // 64
    with pytest.raises(UserError, match="takes no config key 'num_warps'"):
        dispatch.plan_spec(s8, sm90, "gluon_ws_sm90:num_warps=8")
    with pytest.raises(UserError, match="cannot rebuild its schedule"):
        dispatch.plan_spec(shape(H=64), sm90, "h64d128_sm90:BLOCK_Q=2", force=True)
    with pytest.raises(UserError, match="cannot be configured"):
        dispatch.plan_spec(s8, sm90, ":BLOCK_Q=3")  # N 24: not a wgmma width
    paged = Shape("paged", 8, 8192, 64, 128, False, batch=8, next_n=1, block_size=64)
    assert dispatch.plan_spec(paged, sm90, ":STAGES=6").config.constexprs["STAGES"] == 6
