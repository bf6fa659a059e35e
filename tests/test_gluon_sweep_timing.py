"""The prefill sweep's ranking (tools/tune/sweep_gluon_prefill.py), on the CPU: the GPU pieces replaced by fakes whose
candidates take known times, timed under a clock that falls 1 % per measurement. Candidates of equal time must
measure equal, and the table must take the fastest."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FAKE = textwrap.dedent(r'''
    import itertools, os, sys, types
    root = sys.argv[1]
    sys.path.insert(0, os.path.join(root, "tools", "tune"))
    sys.path.insert(0, root)
    import torch
    import sweep_gluon_prefill as m
    from mqa_cli.launch import families as launchers
    from mqa_cli.problem import matrix, source
    from mqa_cli.bench import timing
    from mqa_cli.check import reference, verify
    import mqa_kernels.prefill.gluon_ws_sm90.config as gc

    torch.cuda.get_device_properties = lambda i: types.SimpleNamespace(multi_processor_count=132)
    torch.cuda.get_device_name = lambda *a: "fake H200"
    torch.cuda.synchronize = torch.cuda.empty_cache = lambda: None
    T = types.SimpleNamespace(heads=32, dim=128, S=64, N=64)
    spec = types.SimpleNamespace(with_=lambda **kw: spec)
    matrix.SUITES = {"seed": [types.SimpleNamespace(name="1x64 fake", spec=spec)]}
    source.from_spec = lambda s: types.SimpleNamespace(materialise=lambda dev: T,
                                                       counts=types.SimpleNamespace(flop=1e9))
    reference.reference_logits = lambda t: None
    verify.compare = lambda out, ref, clean, rel_tol: types.SimpleNamespace(ok=True, rel_error=1e-4)
    gc.gluon_ws_sm90_config = lambda **kw: kw
    launchers.output_for = lambda t, cfg: torch.zeros(2, 2)
    # a candidate's time: the baseline (2, 1) st4 takes 100, three stages 90, four FMA chains a logit 80
    def run(t, cfg, out):
        return 100.0 - 10 * (cfg["stages"] == 3) - 10 * (cfg["chains"] == 4)
    launchers.run = run
    count = itertools.count()
    real = timing.side_by_side
    timing.side_by_side = lambda calls, rounds, rep_ms: real(
        calls, rounds=rounds, time=lambda fn: fn() * (1 + 0.01 * next(count)))
    sys.argv = ["sweep_gluon_prefill.py", "--write-table"]
    m.main()
''')


def test_the_prefill_sweep_ranks_by_time_under_a_falling_clock(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GLUON_", "TRITON_INTERPRET"))}
    env.update({"OUT": str(tmp_path), "GLUON_WS_TABLE": str(tmp_path / "tuned.py")})
    r = subprocess.run([sys.executable, "-c", FAKE, str(ROOT)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [line.split(",") for line in (tmp_path / "gluon_sweep.csv").read_text().splitlines()[1:]]
    us = {(r[1], r[3]): float(r[4]) for r in rows if r[4]}
    for clean in ("0", "1"):  # equal times measure equal, whatever their place in the candidate list
        assert us[(clean, "g2x1-st3-lanes")] == us[(clean, "g2x1-st3-lanes-x2")] == us[(clean, "g2x1-st3-lanes-tma")]
        assert us[(clean, "g2x1-st3-lanes-c4")] < us[(clean, "g2x1-st3-lanes")] < us[(clean, "g2x1-st4")]
    ns: dict = {}
    exec((tmp_path / "tuned.py").read_text(), ns)
    assert ns["CUDA_TUNED"][(32, 128)].get("chains") == 4, ns["CUDA_TUNED"][(32, 128)]
