"""DeepGEMM 54e2261's own MQA-logits tests (its tests/test_attention.py: test_mqa_logits, test_paged_mqa_logits)
against the public API, with only the import swapped (tools/deepgemm_tests.py does the swap and runs each case alone;
its assertions are DeepGEMM's). Skipped where DeepGEMM's source is not found (DG_ROOT, /tmp/DeepGEMM,
.anchor/DeepGEMM, ../shared/anchors/deepgemm/DeepGEMM). DGT_CASES cases per kind (default 24, seeded sample;
DGT_CASES=0: all 216 on sm90); DGT_BUDGET_S (default 240) bounds each kind."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("kind", ["prefill", "paged"])
def test_deepgemm_own_cases_pass_against_the_api(tmp_path, kind):
    env = dict(os.environ, OUT=str(tmp_path), DGT_KINDS=kind, DGT_BUDGET_S=os.environ.get("DGT_BUDGET_S", "240"))
    cases = os.environ.get("DGT_CASES", "24")
    if cases == "0":
        env.pop("DGT_CASES", None)
    else:
        env["DGT_CASES"] = cases
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "deepgemm_tests.py")], capture_output=True, text=True,
                       cwd=ROOT, env=env, timeout=900)
    if r.returncode == 2:
        pytest.skip("DeepGEMM's tests cannot run here: " + (r.stdout.strip().splitlines() or ["?"])[-1])
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
