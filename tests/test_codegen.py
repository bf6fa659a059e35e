"""The code the dispatched rows compile to, per triton release, as a record: tests/codegen/triton-<release>.json hold
what `python -m mqa_cli.inspect.codegen --write` measured (registers, spills, each tensor-core loop's length and the
spills inside it) for every row's configs on 3.6, 3.8 and 3.9 (docs/CODEGEN.md shows them as a table). SASS explains
a time the card measured; it is not a target, so the tests fail only on what is worth a look on the card:

- in the stored tables, a 3.8 or 3.9 case with spill instructions inside its tensor-core loops where 3.6 has none, or a
  loop longer than 3.6's by more than codegen.JUMP (15 %), checked without compiling; where a release compiles
  another config because its own tuned table chose one on its timings (a variant's tuned_by_triton.py), the two are
  not compared;
- on the installed release, the pinned cases (a few per row) compiled again against its table: no loop longer by
  more than JUMP, no more spill instructions inside the loops.
A change that moves the code rewrites the tables with the command above.
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

# Where 3.8 / 3.9 compile worse than 3.6 by the rule above ("release case" as mqa_cli.inspect.codegen.regressions
# names it), and why: an entry that no longer regresses fails the test, so the list stays true.
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
    """"release case" where the release compiles another config than 3.6 because its own tuned table chose one on
    its own timings: loops of two configs are not compared."""
    base = tables["3.6"]["cases"]
    return {f"{rel} {label}" for rel, t in tables.items() if rel != "3.6" for label, m in t["cases"].items()
            if label in base and m.get("kernel_name") != base[label].get("kernel_name")}


def test_release_tables_explain_every_other_config():
    """A case compiles another config on 3.8 / 3.9 than on 3.6 only where that release's tuned table says so."""
    from mqa_kernels.decode.paged_ws_sm90.tuned_by_triton import BY_RELEASE

    own = _own_config(_tables())
    rows = {label.split(" ")[0] for label in (k.split(" ", 1)[1] for k in own)}
    assert rows <= {"paged_ws_sm90"}, sorted(own)  # the one variant with entries by release
    assert BY_RELEASE[(3, 8)] and any("next_n 5 small, engines' form" in k for k in own), \
        "3.8's own decode entries are gone from the table"


def test_newer_releases_compile_no_worse_than_3_6():
    tables = _tables()
    own = _own_config(tables)
    bad = [b for b in codegen.regressions(tables) if b.split(": ")[0] not in own]
    cases = {b.split(": ")[0] for b in bad}
    unknown = [b for b in bad if b.split(": ")[0] not in KNOWN]
    assert not unknown, "\n".join(unknown)
    stale = sorted(set(KNOWN) - cases)
    assert not stale, f"KNOWN lists what no longer regresses: {stale}"


def test_regressions_catch_a_large_jump_and_a_new_spill_in_a_loop():
    base = {"cases": {"a": {"loops": [100], "spills": 0, "loop_spills": [0]},
                      "b": {"loops": [200, 210], "spills": 4, "loop_spills": [0, 2]}}}
    ok = {"cases": {"a": {"loops": [114], "spills": 6, "loop_spills": [0]},  # +14 %, spills outside the loop
                    "b": {"loops": [150, 214], "spills": 9, "loop_spills": [3, 0]}}}  # (3.6 spills there too)
    worse = {"cases": {"a": {"loops": [116], "spills": 1, "loop_spills": [1]},
                       "b": {"loops": [200], "spills": 4, "loop_spills": [2]}}}
    assert codegen.regressions({"3.6": base, "3.8": ok}) == []
    bad = codegen.regressions({"3.6": base, "3.9": worse})
    assert any("a: loop 0 116" in b for b in bad) and any("a: 1 spill" in b for b in bad)
    assert any("b: 1 tensor-core loops" in b for b in bad)
    assert codegen.loop_spills({"spills": 3}) == 3  # a table from before the field: every spill counts
    # against its own table (the pinned compile), any spill more in the loops is new
    assert codegen.worse(ok["cases"]["b"], base["cases"]["b"]) == ["3 spill instructions in its tensor-core loops, "
                                                                    "against 2"]
    assert codegen.worse(ok["cases"]["b"], base["cases"]["b"], same_release=False) == []


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
    bad = []
    for label in pinned:
        m, s = now[label], stored[label]
        assert "error" not in m, (label, m)
        assert m["kernel_name"] == s["kernel_name"], f"{label}: the table is stale (another config); rewrite it"
        bad += [f"{label}: {w} in the table" for w in codegen.worse(m, s)]
    assert not bad, "\n".join(bad)
