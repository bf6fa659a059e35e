"""bench on the CPU: the table, the base-vs-variant table, CSV and plot come out (times there mean nothing); the plot
of made-up bench rows against the H200's ceilings, and no file overwritten without --force; the side-by-side timing
the A/B scripts use, where a clock that falls during the measurement must not favour the call timed first."""
import csv
import importlib.util
import itertools

import pytest

from mqa_cli.bench import suite as bench, timing
from mqa_cli.bench.timing import median_in_rounds, ratio_in_rounds, side_by_side
from mqa_cli.plan import targets
from mqa_cli.problem.prefill import ProblemSpec, counts

from .cli_batch import run_many
from .conftest import HEAVY, assert_one_line_error

SMALL = ["--seq", "64", "--heads", "16", "--dim", "32"]
HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
SM90 = targets.get_target("sm90")


def test_bench_two_kernels_csv_and_plot(run_cli, tmp_path):
    """The plot part only where matplotlib is installed (the `plot` extra)."""
    csv_path, png = tmp_path / "b.csv", tmp_path / "b.png"
    plot = ["--plot", png] if HAVE_MATPLOTLIB else []
    r = run_cli("bench", *SMALL, "--kernels", "tiled,h64d128_sm90", "--csv", csv_path, *plot, "--target", "cpu")
    assert r.returncode == 0, r.stderr
    assert "Δ TFLOP/s" in r.stdout and "tiled" in r.stdout and "h64d128_sm90" in r.stdout
    assert "% of floor" in r.stdout and "floor: none on cpu" in r.stdout
    rows = list(csv.DictReader(open(csv_path)))
    assert [row["kernel"] for row in rows] == ["tiled", "h64d128_sm90"]
    assert all(float(row["median_us"]) > 0 and int(row["live"]) == 64 * 65 // 2 for row in rows)
    assert all(int(row["write_bytes"]) == 4 * 64 * 64 for row in rows)
    if HAVE_MATPLOTLIB:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_refuses_suite_with_problem_flags_unknown_suites_and_overwriting_a_plot(tmp_path):
    """A suite takes the output flags (--no-clean, --logits-dtype, --max-seqlen-k), never problem flags; an unknown
    suite is refused in one line; so is a plot over an existing file without --force (the runs in one child:
    tests/cli_batch.py)."""
    png = tmp_path / "keep.png"
    png.write_bytes(b"not yours")
    got = run_many({"flags": ["bench", "--suite", "seed", "--seq", "64", "--target", "cpu"],
                    "unknown": ["bench", "--suite", "nope"],
                    "output-flags": ["bench", "--suite", "nosuch", "--no-clean", "--logits-dtype", "bf16",
                                     "--target", "cpu"],
                    "plot": ["bench", "--seq", "16", "--heads", "8", "--dim", "32", "--plot", png, "--target", "cpu"]})
    assert_one_line_error(got["flags"], contains="either --suite or problem flags")
    assert_one_line_error(got["unknown"], contains="unknown suite 'nope'")
    assert_one_line_error(got["output-flags"], contains="unknown suite 'nosuch'")  # the output flags parsed
    assert_one_line_error(got["plot"], contains="exists; pass --force")
    assert png.read_bytes() == b"not yours"


@HEAVY
def test_indexer_suite_runs_and_writes_csv(run_cli, tmp_path):
    """bench --suite indexer: the fused step and our logits on tiny decode and prefill shapes (interpreter here), each
    fused selection checked exact against the logits, rows written as CSV."""
    out = tmp_path / "indexer.csv"
    r = run_cli("bench", "--suite", "indexer", "--csv", out, "--target", "cpu")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "| form | shape | fused µs | ours µs |" in r.stdout
    table = [line.split(" | ") for line in r.stdout.splitlines() if line.startswith(("| decode", "| prefill"))]
    assert {cells[0] for cells in table} == {"| decode", "| prefill compressed"}
    assert all(cells[-1] == "fused exact |" for cells in table)
    assert [(row["shape"], row["fused_rows_off"]) for row in csv.DictReader(open(out))] == [(c[1], "0") for c in table]


@HEAVY
def test_indexer_bench_times_another_selection_kind_beside(tmp_path, capsys):
    """--select radix: the fused decode call again with the radix select, its own column, checked exact too."""
    from mqa_cli.bench import indexer

    assert indexer.main(["--form", "decode", "--select", "radix", "--csv", str(tmp_path / "i.csv")]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| decode")]
    assert len(rows) == 2 and all(ln.endswith("fused exact, fused radix exact |") for ln in rows)


def test_drafts_suite_is_next_n_3_to_8_on_the_decode_kernel_shapes():
    """bench --suite drafts: every draft-row count DeepGEMM leaves out on sm90, at H 64 D 128 block 64."""
    from mqa_cli.problem import matrix, suites

    assert "drafts" in suites.NAMES
    assert sorted({s.next_n for s in matrix.DRAFTS_SUITE}) == list(range(3, 9))
    assert {(s.heads, s.dim, s.block_size) for s in matrix.DRAFTS_SUITE} == {(64, 128, 64)}


def _row(shape, kernel, spec, us, reference_us=None):
    c = counts(spec)
    f = timing.binding_floor(c.flop, c.bytes, SM90)
    return bench.BenchRow(shape, kernel, "k", "kernel", True, c.live, c.flop, c.bytes, us, us, us,
                          timing.tflops(c.flop, us), c.bytes / (us * 1e3), 100 * f.fraction(us), f.us, f.bound,
                          reference_us, write_bytes=bench.logits_written(c, False))


def test_plot_draws_ceilings_ours_and_the_reference(tmp_path):
    pytest.importorskip("matplotlib")
    from mqa_cli.bench import plot

    rows = [_row("1x8192 causal H8 D128", "tiled", ProblemSpec(seq=8192, heads=8, dim=128), 482.0),
            _row("1x8192 causal", "gluon_ws_sm90", ProblemSpec(seq=8192, heads=64, dim=128), 547.5, 617.0),
            _row("1x8192 causal", "tiled", ProblemSpec(seq=8192, heads=64, dim=128), 641.7, 617.0)]
    path = tmp_path / "bench.png"
    labels = plot.render(rows, str(path), SM90, "made-up rows", reference_label="DeepGEMM")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert "fp8 ceiling 1635 TF/s (measured)" in labels and any(lb.startswith("copy rate 4.3 TB/s") for lb in labels)
    assert {"tiled", "gluon_ws_sm90", "DeepGEMM"} <= set(labels)


def test_plot_without_ceilings_still_draws(tmp_path):
    pytest.importorskip("matplotlib")
    from mqa_cli.bench import plot

    row = _row("tiny", "tiled", ProblemSpec(seq=64, heads=16, dim=32), 5e5)
    row.floor_us = row.pct_floor = row.bound = None  # what the interpreter target gives
    labels = plot.render([row], str(tmp_path / "cpu.png"), targets.get_target("cpu"), "cpu")
    assert (tmp_path / "cpu.png").read_bytes()[:4] == b"\x89PNG" and not any("ceiling" in lb for lb in labels)


def _falling_clock(step: float = 0.01):
    """A fake timer: every call takes 100 µs at the card's clock, and each measurement runs 1 % slower than the one
    before it (a card heating towards its power cap)."""
    n = itertools.count()
    return lambda fn: fn() * (1 + step * next(n))


def test_an_a_a_pair_measures_one_under_a_falling_clock():
    calls = {"a": lambda: 100.0, "b": lambda: 100.0}
    rounds = side_by_side(calls, rounds=6, time=_falling_clock())
    assert len(rounds) == 6 and all(set(r) == {"a", "b"} for r in rounds)
    assert abs(ratio_in_rounds(rounds, "b", "a") - 1) < 0.002
    # what the scripts did before: the least of two rounds in opposite orders, which favours the first call
    old = side_by_side(calls, rounds=2, time=_falling_clock())
    best = {k: min(r[k] for r in old) for k in calls}
    assert best["b"] / best["a"] > 1.005


def test_a_real_difference_survives_the_drift():
    calls = {"a": lambda: 100.0, "b": lambda: 95.0}
    rounds = side_by_side(calls, rounds=6, time=_falling_clock())
    assert abs(ratio_in_rounds(rounds, "b", "a") - 0.95) < 0.003
    assert 95 < median_in_rounds(rounds, "b") < median_in_rounds(rounds, "a")


def test_the_order_reverses_every_round():
    seen = []
    calls = {k: (lambda k=k: seen.append(k) or 1.0) for k in "xyz"}
    side_by_side(calls, rounds=3, time=lambda fn: fn())
    assert seen == list("xyz" "zyx" "xyz")
