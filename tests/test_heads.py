"""Head counts and dims the reference cannot run on Hopper: the tiled kernel's swept table (kernels/prefill/tiled/tuned.py)
and what reads it, the head-major column order the sweep chooses from, and the floor bench measures them against."""
import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from mqa_cli.bench import suite as bench, timing
from mqa_cli.check.verify import verify
from mqa_cli.cli.options import ProblemOptions
from mqa_cli.plan import targets
from mqa_cli.problem import matrix, source, suites
from mqa_cli.problem.prefill import ProblemSpec, counts
from mqa_kernels.prefill.tiled import config as tiled

ROOT = Path(__file__).resolve().parents[1]
SM90 = targets.get_target("sm90")


def cfg(H, D, S=8192, N=8192, backend="cuda", **kw):
    return tiled.tiled_config(heads=H, dim=D, S=S, N=N, clean=True, backend=backend, units=132, **kw)


def test_table_entry_changes_the_config(monkeypatch):
    entry = {"BLOCK_Q": 16, "HEAD_MAJOR": True, "num_stages": 4, "SPLIT_TILES": 16}
    monkeypatch.setattr(tiled, "CUDA_TUNED", {(8, 128): entry})
    c = cfg(8, 128)
    assert c.constexprs["BLOCK_Q"] == 16 and c.constexprs["HEAD_MAJOR"] is True and "HEAD_MAJOR_1" in c.name
    assert c.options == {"num_warps": 4, "num_stages": 4, "enable_fp_fusion": True}
    assert c.grid == (512, 8) and c.schedule["args"]["tiles_per_split"] == 16 and c.schedule["config"] == "tuned.py"
    assert cfg(16, 128).schedule["config"] == "rule"  # another shape
    assert cfg(8, 128, backend="interpreter").constexprs["HEAD_MAJOR"] is False  # the table is the H200's
    assert cfg(8, 128, use_table=False).constexprs["BLOCK_Q"] == 32  # sweeps compare against the rule
    assert cfg(8, 128, S=5, N=5).constexprs["BLOCK_Q"] == 8  # a short problem still shrinks the block


def test_absent_entry_gives_the_rule(monkeypatch):
    monkeypatch.setattr(tiled, "CUDA_TUNED", {(16, 64): {"BLOCK_Q": 8}})
    c = cfg(8, 128)
    assert c.constexprs == {"H": 8, "D": 128, "BLOCK_Q": 32, "BLOCK_KV": 64, "CLEAN": True, "COMPRESSED": False,
                            "BF16": False, "HEAD_MAJOR": False}
    assert c.options == {"num_warps": 4, "num_stages": 3, "enable_fp_fusion": True} and c.schedule["config"] == "rule"
    # 256 query blocks < 2 x 132: the kv axis in 2 spans of 64 tiles; at H 64, 2048 blocks fill the device alone
    assert c.grid == (256, 2) and c.schedule["args"]["tiles_per_split"] == 64
    assert cfg(64, 128).constexprs["BLOCK_Q"] == 4 and cfg(64, 128).grid == (2048, 1)


@pytest.mark.parametrize("bad, why", [({"BLOCK_Q": 64}, "BLOCK_Q"), ({"num_stages": 9}, "num_stages"),
                                      ({"HEAD_MAJOR": 1}, "HEAD_MAJOR"), ({"SPLIT_TILES": 0}, "SPLIT_TILES"),
                                      ({"ORDER": 2}, "unknown"), ({"BLOCK_KV": 128}, "unknown")])
def test_a_config_the_kernel_cannot_take_is_refused(bad, why):
    with pytest.raises(ValueError, match=why):
        cfg(8, 128, override=bad)


def _check_runs(H, D, override, seq=40, **spec_kw):
    """The tiled kernel with `override` on the interpreter against the float64 reference: exact -inf, rel error."""
    spec = ProblemSpec(batch=spec_kw.pop("batch", 1), seq=seq, heads=H, dim=D, **spec_kw)
    prob = source.from_spec(spec)
    c = tiled.tiled_config(heads=H, dim=D, S=spec.S, N=spec.N, clean=spec.clean_logits, backend="interpreter",
                           units=4, override=override)
    r = verify(prob.materialise("cpu"), c, spec.clean_logits, spec.label(), dtype=torch.float64, repeats=1)
    assert r.ok, r.as_dict()
    return c


TABLE = sorted(tiled.CUDA_TUNED.items())


@pytest.mark.parametrize("key, entry", TABLE or [pytest.param(None, None, marks=pytest.mark.skip(
    reason="kernels/prefill/tiled/tuned.py holds no entry yet: tools/tune/sweep_heads.py --write-table fills it on the H200"))])
def test_every_table_entry_makes_a_config_the_kernel_runs(key, entry):
    H, D = key
    c = cfg(H, D)
    assert c.schedule["config"] == "tuned.py"
    assert all(c.constexprs.get(k, c.options.get(k, v)) == v for k, v in entry.items() if k != "SPLIT_TILES")
    ran = _check_runs(H, D, entry, seq=max(40, entry.get("BLOCK_Q", 1) + 7))
    assert ran.constexprs["BLOCK_Q"] == entry.get("BLOCK_Q", ran.constexprs["BLOCK_Q"])


@pytest.mark.parametrize("H, D, override, spec", [
    (16, 64, {"HEAD_MAJOR": True, "SPLIT_TILES": 1}, {"seq": 70}),  # N 256, a kv span per program: fills too
    (8, 128, {"HEAD_MAJOR": True, "BLOCK_Q": 16}, {"batch": 2, "seq": 50, "layout": "window", "window": 13}),
    (32, 64, {"HEAD_MAJOR": True}, {"batch": 2, "seq": 64, "ratio": 4}),  # short rows, mostly -inf
    (16, 32, {"HEAD_MAJOR": True}, {"seq": 33, "clean_logits": False}),
    (128, 32, {"HEAD_MAJOR": True, "BLOCK_Q": 1}, {"seq": 20}),  # one row per dot: the sum is over heads only
], ids=["causal-split", "window", "ratio4", "no-clean", "h128-q1"])
def test_head_major_columns_match_the_reference(H, D, override, spec):
    c = _check_runs(H, D, override, **spec)
    assert c.constexprs["HEAD_MAJOR"] is True


def test_head_major_compressed_and_bf16():
    spec = ProblemSpec(batch=1, seq=45, heads=8, dim=64)
    t = source.from_spec(spec).materialise("cpu")
    for compressed, bf16 in ((True, False), (False, True)):
        c = tiled.tiled_config(heads=8, dim=64, S=t.S, N=t.N, clean=True, compressed=compressed, bf16=bf16,
                               backend="interpreter", units=4, override={"HEAD_MAJOR": True})
        r = verify(t, c, True, spec.label(), dtype=torch.float64, repeats=1, max_seqlen_k=30 if compressed else 0)
        assert r.ok, r.as_dict()


def _sweep_module(monkeypatch):
    """tools/tune/sweep_heads.py as a module (its import does nothing but define)."""
    path = ROOT / "tools" / "tune" / "sweep_heads.py"
    spec = importlib.util.spec_from_file_location("sweep_heads_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, mod)  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_the_sweep_writes_a_table_the_config_reads(tmp_path, monkeypatch):
    sw = _sweep_module(monkeypatch)
    ov = {"BLOCK_Q": 16, "HEAD_MAJOR": True, "SPLIT_TILES": 16}
    res = [sw.Result(8, 128, "tiled", "rule", 482.0, 143.0, 64.7, 13.4, "write", 1e-4, "ok", {}),
           sw.Result(8, 128, "tiled", sw.tiled_label(ov), 100.0, 687.0, 64.7, 64.7, "write", 1e-4, "ok", ov),
           sw.Result(16, 64, "tiled", "rule", 240.0, 286.0, 64.7, 27.0, "write", 1e-4, "ok", {}),
           sw.Result(16, 64, "tiled", "hm-q16-kv64-w4-s3", 238.0, 288.0, 64.7, 27.2, "write", 1e-4, "ok",
                     {"BLOCK_Q": 16, "HEAD_MAJOR": True})]  # within the noise of the rule: no entry
    path = tmp_path / "tuned.py"
    path.write_text("CUDA_TUNED = {(16, 64): {'BLOCK_Q': 4}, (128, 256): {'num_stages': 2}}\n")
    sw.write_table(sw.table_entries(res), path, "NVIDIA H200", "3.6.0", "2.11", lambda *a: None)
    ns = {}
    exec(path.read_text(), ns)
    assert ns["CUDA_TUNED"] == {(8, 128): ov, (128, 256): {"num_stages": 2}}  # 16x64 dropped, 128x256 kept
    assert "NVIDIA H200" in ns["__doc__"] and "Swept this run: H8 D128, H16 D64" in ns["__doc__"]
    monkeypatch.setattr(tiled, "CUDA_TUNED", ns["CUDA_TUNED"])
    assert cfg(8, 128).constexprs["HEAD_MAJOR"] is True and cfg(16, 64).schedule["config"] == "rule"


def test_slot_variants_try_the_fastest_gluon_layouts_with_ptx_slots(monkeypatch):
    """After the first pass the two fastest Gluon layouts are tried again with the kv ring in PTX (ptx_slots); each
    variant's table entry gives, through the table, the config that was timed."""
    from mqa_kernels.prefill.gluon_ws_sm90 import tuned
    from mqa_kernels.prefill.gluon_ws_sm90.config import gluon_ws_sm90_config

    sw = _sweep_module(monkeypatch)
    shape = source.from_spec(ProblemSpec(batch=1, seq=8192, heads=16, dim=64, layout="causal")).shape
    cands = sw.gluon_candidates(16, 64, shape, 132)
    plain = next(c for c in cands if not c.cfg.constexprs["TMA_STORE"] and c.cfg.constexprs["BLOCK_Q"] <= 16)
    tma = next(c for c in cands if c.cfg.constexprs["TMA_STORE"])
    best = [(plain, None), (tma, None), (cands[0], None)]
    out = sw.slot_variants(best, 16, 64, shape, 132, tried=set())
    assert [c.label for c in out] == [plain.label + " ptx_slots1", tma.label + " ptx_slots1"]  # not the third
    layout = ("H", "D", "BLOCK_Q", "STAGES", "Q_GROUPS", "KV_GROUPS", "Q_IN_LANES", "TMA_STORE", "CHAINS", "TILE_PTR")
    for c in out:
        base = plain if c.label.startswith(plain.label + " ") else tma
        assert all(c.cfg.constexprs[k] == base.cfg.constexprs[k] for k in layout)
        assert c.cfg.schedule["items"] == base.cfg.schedule["items"]
        monkeypatch.setattr(tuned, "CUDA_TUNED", {(16, 64): c.override})
        from_table = gluon_ws_sm90_config(heads=16, dim=64, S=shape.S, N=shape.N, clean=True, units=132)
        assert from_table.constexprs == c.cfg.constexprs and from_table.name == c.cfg.name
    assert all(c.cfg.constexprs["PTX_SLOTS"] for c in out) and not plain.cfg.constexprs["PTX_SLOTS"]
    assert not sw.slot_variants(best, 16, 64, shape, 132, tried={c.label for c in out})  # none twice


def test_binding_floor_is_the_larger_of_fp8_and_bytes():
    c8 = counts(ProblemSpec(batch=1, seq=8192, heads=8, dim=128))
    f = timing.binding_floor(c8.flop, c8.bytes, SM90)
    assert (f.fp8_tflops, f.copy_tbs) == (1635.0, 4.3) and f.measured.startswith("measured on the h200")
    assert f.bound == "memory" and f.us == pytest.approx(64.705, abs=1e-3) and f.compute_us == pytest.approx(42.035, abs=1e-3)
    assert round(100 * f.fraction(482.0)) == 13  # the H 8 D 128 figure
    c128 = counts(ProblemSpec(batch=1, seq=8192, heads=128, dim=128))
    g = timing.binding_floor(c128.flop, c128.bytes, SM90)
    assert g.bound == "compute" and g.us == pytest.approx(672.57, abs=0.01)
    assert timing.binding_floor(c8.flop, c8.bytes, targets.get_target("cpu")) is None
    assert timing.binding_floor(c8.flop, c8.bytes, targets.get_target("sm100")).measured.startswith("datasheet")


def test_heads_suite_rows_show_floor_binding_and_fraction():
    jobs = suites.jobs("heads", ProblemOptions(), "e4m3fn")
    assert [name for name, _, _ in jobs] == [b.name for b in matrix.HEADS_SUITE] and len(jobs) == 8
    assert all(ref is None and prob.shape.clean_logits for _, prob, ref in jobs)
    rows = []
    for name, prob, _ in jobs[:2]:  # H 8 D 64 (write-bound) and H 8 D 128 (write-bound)
        c = prob.counts
        us = 482.0
        f = timing.binding_floor(c.flop, c.bytes, SM90)
        rows.append(bench.BenchRow(name, "tiled", "k", "kernel", True, c.live, c.flop, c.bytes, us, us, us,
                                   timing.tflops(c.flop, us), c.bytes / (us * 1e3), 100 * f.fraction(us), f.us,
                                   f.bound, write_bytes=bench.logits_written(c, False)))
    c = counts(ProblemSpec(batch=1, seq=8192, heads=128, dim=128))
    f = timing.binding_floor(c.flop, c.bytes, SM90)
    rows.append(bench.BenchRow("H128", "tiled", "k", "kernel", True, c.live, c.flop, c.bytes, 1155.0, 1155.0, 1155.0,
                               timing.tflops(c.flop, 1155.0), 0.0, 100 * f.fraction(1155.0), f.us, f.bound))
    text = bench.table(rows)
    assert "floor µs" in text and "binds" in text and "% of floor" in text
    lines = text.splitlines()
    assert "write" in lines[3] and "64.7" in lines[3] and "13%" in lines[3]  # H 8 D 128
    assert "fp8" in lines[4] and "672.6" in lines[4] and "58%" in lines[4]
    assert "1635 TF/s" in bench.floor_note(SM90) and "4.3 TB/s" in bench.floor_note(SM90)
