"""The decode sweep's ranking (tools/tune/paged_ws_experiment.py), on the CPU: every piece that needs a GPU replaced by
a fake whose configs take known times, timed under a clock that falls 1 % per measurement. The sweep must still
write the fastest config into the table, and give configs of equal time equal figures."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FAKE = textwrap.dedent(r'''
    import itertools, os, sys, types
    sys.path.insert(0, os.path.join(sys.argv[1], "tools", "tune"))
    import torch
    import paged_ws_experiment as m

    class T:
        S, max_context_len = 2, 8192

    m.make = lambda B, C, n, seed, two_d: T()
    m.nbytes = m.live_flop = lambda t: 1e9
    m.launch = types.SimpleNamespace(alloc_logits=lambda S, L, dev: torch.zeros(2, 2))
    m.portable_runner = lambda t, out: (lambda: 200.0)
    m.paged_ws_sm90_config = lambda **kw: types.SimpleNamespace(ov=kw["override"])
    # a config's time: 100 + 10 x STAGES (+5 with PIPE): STAGES 4 without it is the fastest
    m.ws_runner = lambda t, c, out: (lambda: 100.0 + 10 * c.ov["STAGES"] + 5 * bool(c.ov.get("PIPE")))
    m.compare = lambda t, out, clean: (1e-4, "")
    m.torch.cuda.synchronize = lambda: None
    count = itertools.count()
    real = m.timing.side_by_side
    m.timing.side_by_side = lambda calls, rounds, rep_ms: real(
        calls, rounds=rounds, time=lambda fn: fn() * (1 + 0.01 * next(count)))
    m.SHAPES = [(256, 65536), (8, 8192)]  # the fake's 8192 tokens: 32768 blocks at B 256 (large)
    m.sweep(True)
''')


def test_the_sweep_ranks_by_time_under_a_falling_clock(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAGED_WS_", "TRITON_INTERPRET"))}
    env.update({"OUT": str(tmp_path), "PAGED_WS_NEXT_N": "2", "PAGED_WS_TABLE": str(tmp_path / "tuned.py")})
    r = subprocess.run([sys.executable, "-c", FAKE, str(ROOT)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    ns: dict = {}
    exec((tmp_path / "tuned.py").read_text(), ns)
    for size in ("small", "large"):
        choice = ns["CUDA_TUNED"][128][size]
        assert choice["STAGES"] == 4 and not choice.get("PIPE"), choice
    rows = [line.split(",") for line in (tmp_path / "paged_ws_sweep.csv").read_text().splitlines()[1:]]
    us = {(r[0], r[3]): float(r[4]) for r in rows}
    # equal times measure equal, whatever their place in the candidate list
    assert us[("256", "st5-sub1-wg3")] == us[("256", "st5-sub1-wg4")] == us[("256", "st5-sub1-wg3-lanes")]
    assert us[("256", "st4-sub1-wg4")] < us[("256", "st4-sub2-pipe")]
