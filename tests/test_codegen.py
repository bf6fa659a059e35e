"""The code the dispatched rows compile to, per triton release, pinned: tests/codegen/triton-<release>.json hold what
`python -m mqa_cli.inspect.codegen --write` measured (registers, spills, each tensor-core loop's length) for every row's
configs on 3.6, 3.8 and 3.9 (docs/CODEGEN.md shows them as a table).

- The stored tables meet the bar: on 3.8 and 3.9 each tensor-core loop is at most 3.6's length (+2 %) and no config
  spills where it does not on 3.6 (checked without compiling); where a release compiles another config because its
  own tuned table chose one on its timings (kernels/common/tuned_by_triton.py), the two are not compared.
- On the installed release, the pinned cases (a few per row) compile again to what its table says: the same kernel,
  as many loops, none longer than stored (+2 %), no more spills. A change that lengthens a loop fails here; one that
  shortens it passes, and the table is rewritten with the command above.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mqa_cli.inspect import codegen
from mqa_kernels.common import versions

pytestmark = pytest.mark.versions
ROOT = Path(__file__).resolve().parents[1]
TABLES = sorted((ROOT / "tests" / "codegen").glob("triton-*.json"))
RELEASE = codegen.release(versions.installed())

# Where 3.8 / 3.9 still compile worse than 3.6 ("release case" as mqa_cli.inspect.codegen.regressions names it), and why:
# the list to clear next; an entry that no longer regresses fails the test, so the list stays true. (Empty since the
# decode kernel's WAIT_BARRIER: next_n 8 small given had been 882 against 3.6's 860 on 3.8.)
KNOWN: dict = {}


def _tables() -> dict:
    return codegen.load_tables(TABLES)


def test_a_table_for_every_release_the_facts_name():
    have = set(_tables())
    want = {f"{a}.{b}" for a, b in versions.FACTS["triton_kernels"].releases}
    assert want <= have, f"no stored table for triton {sorted(want - have)}: python -m mqa_cli.inspect.codegen --write ..."
    labels = {c.label for c in codegen.cases()}
    for rel, t in _tables().items():
        assert set(t["cases"]) == labels, f"triton {rel}'s table has other cases than mqa_cli.inspect.codegen.cases()"


def _own_config(tables: dict) -> set:
    """"release case" where the release compiles another config than 3.6 because its own tuned table
    (kernels/common/tuned_by_triton.py) chose one on its own timings: loops of two configs are not compared."""
    base = tables["3.6"]["cases"]
    return {f"{rel} {label}" for rel, t in tables.items() if rel != "3.6" for label, m in t["cases"].items()
            if label in base and m.get("kernel_name") != base[label].get("kernel_name")}


def test_release_tables_explain_every_other_config():
    """A case compiles another config on 3.8 / 3.9 than on 3.6 only where that release's tuned table says so."""
    from mqa_kernels.common.tuned_by_triton import BY_RELEASE

    own = _own_config(_tables())
    rows = {label.split(" ")[0] for label in (k.split(" ", 1)[1] for k in own)}
    assert rows <= {v for v, per in BY_RELEASE.items() if per}, sorted(own)
    assert any("next_n 5 small, engines' form" in k for k in own), "3.8's parts of MMA_N 64 are gone from the table"


def test_newer_releases_compile_no_worse_than_3_6():
    tables = _tables()
    own = _own_config(tables)
    bad = [b for b in codegen.regressions(tables) if b.split(": ")[0] not in own]
    cases = {b.split(": ")[0] for b in bad}
    unknown = [b for b in bad if b.split(": ")[0] not in KNOWN]
    assert not unknown, "\n".join(unknown)
    stale = sorted(set(KNOWN) - cases)
    assert not stale, f"KNOWN lists what no longer regresses: {stale}"


def test_regressions_catch_a_longer_loop_and_a_new_spill():
    base = {"cases": {"a": {"loops": [100], "spills": 0}, "b": {"loops": [200, 210], "spills": 4}}}
    ok = {"cases": {"a": {"loops": [102], "spills": 0}, "b": {"loops": [150, 214], "spills": 9}}}
    worse = {"cases": {"a": {"loops": [103], "spills": 1}, "b": {"loops": [200], "spills": 4}}}
    assert codegen.regressions({"3.6": base, "3.8": ok}) == []
    bad = codegen.regressions({"3.6": base, "3.9": worse})
    assert any("a: loop 0 103" in b for b in bad) and any("a: 1 spill" in b for b in bad)
    assert any("b: 1 tensor-core loops" in b for b in bad)


@pytest.mark.heavy  # (CI runs it on 3.8 after the README's command, and on 3.6 and 3.9)
@pytest.mark.skipif(not versions.holds("triton_kernels"), reason="no stored table for this triton")
def test_pinned_cases_compile_as_this_release_s_table_says(tmp_path):
    stored = _tables()[RELEASE]["cases"]
    out = tmp_path / "pinned.json"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # (a compiling process)
    p = subprocess.run([sys.executable, "-m", "mqa_cli.inspect.codegen", "--pinned", "--write", str(out)], capture_output=True,
                       text=True, env=env, cwd=ROOT, timeout=1800)
    assert p.returncode == 0, p.stderr[-3000:]
    now = json.loads(out.read_text())["cases"]
    pinned = [c.label for c in codegen.cases() if c.pinned]
    assert sorted(now) == sorted(pinned) and {c.row for c in codegen.cases() if c.pinned} >= {
        "tiled", "h64d128_sm90", "gluon_ws_sm90", "paged_ws_sm90", "paged", "topk"}
    worse = []
    for label in pinned:
        m, s = now[label], stored[label]
        assert "error" not in m, (label, m)
        assert m["kernel_name"] == s["kernel_name"], f"{label}: the table is stale (another config); rewrite it"
        if len(m["loops"]) != len(s["loops"]):
            worse.append(f"{label}: {len(m['loops'])} tensor-core loops, the table {len(s['loops'])}")
        worse += [f"{label}: loop {i} {x} instructions, the table {y}" for i, (x, y) in
                  enumerate(zip(m["loops"], s["loops"])) if x > y * (1 + codegen.TOLERANCE)]
        if m["spills"] > s["spills"]:
            worse.append(f"{label}: {m['spills']} spill instructions, the table {s['spills']}")
    assert not worse, "\n".join(worse)
