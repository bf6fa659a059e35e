"""The sweeps write the tables the configs read, by rule, from what they measured (no hand-copied figures):
rebuilt here on CPU from a run's files (--table-from, for a GPU run whose table did not come back) and read
back through the configs."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(script: str, args: list, env_extra: dict) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(env_extra)
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "tune" / script), *args], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gluon_prefill_table_from_its_csv(tmp_path, monkeypatch):
    """Per head count the layout with the least mean time relative to the old one (each run weighs alike), kept
    only when it beats it by more than the noise; the config then builds that layout."""
    rows = ["shape,clean,H,config,us,tflops,rel_err,status"]
    for shape in ("a", "b"):
        for clean in (0, 1):
            rows += [f"{shape},{clean},64,g2x1-st4,100.0,,,ok", f"{shape},{clean},64,g2x1-st3-lanes,90.0,,,ok",
                     f"{shape},{clean},64,g1x3-st5,110.0,,,ok", f"{shape},{clean},64,g2x1-st4-lanes,,,,WRONG: x",
                     f"{shape},{clean},32,g2x1-st4,100.0,,,ok", f"{shape},{clean},32,g2x1-st4-lanes,99.5,,,ok"]
    csv_path = tmp_path / "gluon_sweep.csv"
    csv_path.write_text("\n".join(rows) + "\n")
    table = tmp_path / "gluon_tuned.py"
    other = "{'groups': (2, 1), 'stages': 4, 'q_in_lanes': True, 'n': 128}"
    table.write_text(f"CUDA_TUNED = {{\n    (8, 64): {other},  # the head-count sweep's\n}}\n")
    _run("sweep_gluon_prefill.py", ["--table-from", str(csv_path)], {"GLUON_WS_TABLE": str(table)})
    got = _load(table).CUDA_TUNED
    assert got[(8, 64)]["n"] == 128 and "the head-count sweep's" in table.read_text()  # another writer's key kept
    assert got[(64, 128)] == {"groups": (2, 1), "stages": 3, "q_in_lanes": True}
    assert got[(32, 128)] == {"groups": (2, 1), "stages": 4, "q_in_lanes": False}  # 0.995: within the noise
    from mqa_kernels.prefill.gluon_ws_sm90 import config, tuned

    monkeypatch.setattr(tuned, "CUDA_TUNED", got)
    c64 = config.gluon_ws_sm90_config(heads=64, dim=128, S=4096, N=4096, clean=True).constexprs
    c32 = config.gluon_ws_sm90_config(heads=32, dim=128, S=4096, N=4096, clean=True).constexprs
    assert (c64["STAGES"], c64["Q_IN_LANES"], c64["Q_GROUPS"], c64["KV_GROUPS"]) == (3, True, 2, 1)
    assert (c32["STAGES"], c32["Q_IN_LANES"]) == (4, False)


def test_decode_sweep_csvs_write_the_table(tmp_path):
    """paged_ws_experiment.py --table-from A.csv B.csv: per wgmma N and size class the choice with the least mean
    time relative to the portable kernel; B's rows replace A's for every next_n B holds (a sweep of some next_n
    merged into a full one), the other next_n keep A's choice."""
    head = "B,C,next_n,config,us,pct_copy,pct_floor,rel_err,portable_us"
    a = [head, "8,8192,1,st4-sub3,6.0,0,0,1e-4,9.0", "8,8192,1,st4-sub1,7.0,0,0,1e-4,9.0",
         "64,8192,4,st6-sub1-wg2,40.0,0,0,1e-4,60.0", "64,8192,4,st8-sub1,45.0,0,0,1e-4,60.0"]
    # next_n 2 (N 128): PIPE wins the small shape, three warpgroups the large one
    for B, label, us, port in [(8, "st5-sub2-pipe", 8.0, 12.0), (8, "st5-sub1-wg3", 9.0, 12.0),
                               (4096, "st5-sub2-pipe", 1500.0, 1900.0), (4096, "st5-sub1-wg3", 1440.0, 1900.0)]:
        a.append(f"{B},8192,2,{label},{us},0,0,1e-4,{port}")
    b = [head, "64,8192,4,st6-sub1-wg2,40.0,0,0,1e-4,60.0", "64,8192,4,st6-sub1-wg2-mma128,35.0,0,0,1e-4,60.0"]
    (tmp_path / "a.csv").write_text("\n".join(a) + "\n")
    (tmp_path / "b.csv").write_text("\n".join(b) + "\n")
    table = tmp_path / "tuned.py"
    _run("paged_ws_experiment.py", ["--table-from", str(tmp_path / "a.csv"), str(tmp_path / "b.csv")],
         {"OUT": str(tmp_path), "PAGED_WS_TABLE": str(table), "PAGED_WS_DEVICE": "test"})
    got = _load(table).CUDA_TUNED
    assert got[128] == {"small": {"PIPE": True, "STAGES": 5, "SUBS": 2},
                        "large": {"MATH_WG": 3, "STAGES": 5, "SUBS": 1}}
    assert got[64] == {"small": {"STAGES": 4, "SUBS": 3}}
    assert got[256] == {"small": {"MATH_WG": 2, "MMA_N": 128, "STAGES": 6, "SUBS": 1}}


def test_head_sweep_gives_a_shape_to_the_gluon_kernel_only_where_it_wins(tmp_path, monkeypatch):
    """sweep_heads.py: a shape's Gluon entry is written where its fastest checked layout beats the fastest portable
    config by more than the noise, and dropped where it does not; a wrong layout never counts; the layout keys of
    the other sweep are left alone. The entry is then what dispatch reads."""
    monkeypatch.syspath_prepend(str(ROOT / "tools" / "tune"))
    monkeypatch.setenv("GLUON_WS_TABLE", str(tmp_path / "gluon_tuned.py"))
    import sweep_heads as sh

    def res(H, D, kernel, label, us, override=None):
        return sh.Result(H, D, kernel, label, us, None, 60.0, None if us is None else 6000 / us, "write", None,
                         "ok" if us else "WRONG", override)

    lanes = {"groups": (2, 1), "stages": 3, "q_in_lanes": True, "n": 128}
    results = [res(8, 64, "tiled", "rule", 200.0), res(8, 64, "tiled", "hm-q16", 120.0),
               res(8, 64, "gluon_ws_sm90", "gluon n128 st3 lanes", 80.0, lanes),
               res(8, 64, "gluon_ws_sm90", "gluon n256 st4 lanes", None, {**lanes, "n": 256}),  # wrong: not ranked
               res(16, 64, "tiled", "rule", 100.0), res(16, 64, "gluon_ws_sm90", "gluon n128 st4 lanes", 98.0, lanes),
               res(64, 128, "tiled", "rule", 900.0), res(64, 128, "gluon_ws_sm90", "gluon n128 st4 lanes", 500.0, lanes)]
    entries = sh.gluon_entries(results)
    assert entries[(8, 64)][0] == lanes and "80.0 us" in entries[(8, 64)][1]
    assert entries[(16, 64)] is None  # 2 % ahead: within the noise, the portable kernel keeps it
    assert (64, 128) not in entries  # sweep_gluon_prefill.py's key
    (tmp_path / "gluon_tuned.py").write_text("CUDA_TUNED = {(16, 64): {'groups': (2, 1), 'stages': 4}, "
                                             "(64, 128): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True}}\n")
    sh.write_gluon_table(entries, "test", print)
    got = _load(tmp_path / "gluon_tuned.py").CUDA_TUNED
    assert set(got) == {(8, 64), (64, 128)}
    from mqa_cli.plan import dispatch, targets
    from mqa_kernels.prefill.gluon_ws_sm90 import config, tuned

    monkeypatch.setattr(tuned, "CUDA_TUNED", got)
    assert config.tuned_shapes() == [(8, 64), (64, 128)]
    c = config.gluon_ws_sm90_config(heads=8, dim=64, S=8192, N=8192, clean=True).constexprs
    assert (c["BLOCK_Q"], c["STAGES"], c["Q_IN_LANES"]) == (16, 3, True)
    shape = dispatch.Shape("prefill", 8192, 8192, 8, 64)
    check = next(ch for ch in dispatch._gluon_ws_sm90_conditions(shape, targets.get_target("sm90"),
                                                                  dispatch.Capabilities()) if ch.name == "heads x dim")
    assert check.ok and "H8 D64" in check.required
    assert not dispatch._check_swept(dispatch.Shape("prefill", 8192, 8192, 16, 64)).ok


def test_topk_table_from_its_log(tmp_path, monkeypatch):
    """Per regime and power-of-two row length, the checked candidate with the least summed time over the bucket's
    shapes (a failed check never wins); WORKSPACE only where a larger one was > 3 % faster."""
    log = ["device NVIDIA H200, 132 units, k = 2048",
           "  1x8192 causal        num_warps=4,tile=512,narrow=256,programs_per_unit=4      300.0 us  regs 150 spills 0  checked",
           "  1x8192 causal        num_warps=4,tile=1024,programs_per_unit=8                350.0 us  regs 160 spills 0  checked",
           "  1x8192 causal        num_warps=8,tile=1024,programs_per_unit=2                200.0 us  regs 111 spills 0  WRONG top-k",
           "  ratio 4              num_warps=4,tile=512,narrow=256,programs_per_unit=4      100.0 us  regs 150 spills 0  checked",
           "  ratio 4              num_warps=4,tile=1024,programs_per_unit=8                 40.0 us  regs 160 spills 0  checked",
           "  ratio 4              num_warps=8,tile=1024,programs_per_unit=2                 10.0 us  regs 111 spills 0  WRONG top-k",
           "  paged B64 C64K n1    kind=split,num_warps=8,tile=2048,maxnreg=128,programs_per_unit=4  90.0 us  regs 128 spills 0  checked",
           "  paged B64 C64K n1    kind=torch                                               700.0 us  regs 128 spills 0  checked"]
    (tmp_path / "run.log").write_text("\n".join(log) + "\n")
    summary = ["shape,kind,cols,fused_ws256M_us,fused_ws1024M_us,fused_ws2048M_us",
               "1x8192 causal,prefill,8192,1000,950,990", "ratio 4,prefill,8192,500,495,",
               "paged B64 C64K n1,paged,84000,,,"]
    (tmp_path / "summary.csv").write_text("\n".join(summary) + "\n")
    table = tmp_path / "topk_tuned.py"
    _run("sweep_topk.py", ["--table-from", str(tmp_path / "run.log"), str(tmp_path / "summary.csv")],
         {"TOPK_TABLE": str(table)})
    mod = _load(table)
    # 8192 bucket: narrow/tile 512 sums 400 us over both shapes, tile 1024 390: the latter; the fastest (210 us)
    # failed its check on both shapes and is never ranked
    assert mod.CUDA_TUNED["rows"][8192] == {"num_warps": 4, "tile": 1024, "programs_per_unit": 8}
    assert mod.CUDA_TUNED["split"][131072] == {"num_warps": 8, "tile": 2048, "maxnreg": 128, "programs_per_unit": 4}
    assert mod.WORKSPACE == {8192: 1 << 30}  # 950 < 0.97 * 1000 on 1x8192; ratio 4's 495 is not
    from mqa_kernels.topk import config, tuned

    monkeypatch.setattr(tuned, "CUDA_TUNED", mod.CUDA_TUNED)
    cfg = config.topk_config(rows=8192, cols=8192, topk=2048, backend="cuda", units=132)
    assert cfg.constexprs["TILE"] == 1024 and cfg.constexprs["NARROW"] == 0 and cfg.grid == (8 * 132,)
