"""bench on the CPU: the table, the base-vs-variant table, CSV and plot come out (times there mean nothing)."""
import csv
import importlib.util

from .cli_batch import run_many
from .conftest import HEAVY, assert_one_line_error

SMALL = ["--seq", "64", "--heads", "16", "--dim", "32"]
HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


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


def test_bench_refuses_suite_with_problem_flags_and_unknown_suites():
    """A suite takes the output flags (--no-clean, --logits-dtype, --max-seqlen-k), never problem flags; an unknown
    suite is refused in one line (the three runs in one child: tests/cli_batch.py)."""
    got = run_many({"flags": ["bench", "--suite", "seed", "--seq", "64", "--target", "cpu"],
                    "unknown": ["bench", "--suite", "nope"],
                    "output-flags": ["bench", "--suite", "nosuch", "--no-clean", "--logits-dtype", "bf16",
                                     "--target", "cpu"]})
    assert_one_line_error(got["flags"], contains="either --suite or problem flags")
    assert_one_line_error(got["unknown"], contains="unknown suite 'nope'")
    assert_one_line_error(got["output-flags"], contains="unknown suite 'nosuch'")  # the output flags parsed


@HEAVY
def test_indexer_suite_runs_and_writes_csv(run_cli, tmp_path):
    """bench --suite indexer: logits + top-k through the library (tiny shapes on the interpreter here), recall
    reported per shape, rows written as CSV."""
    out = tmp_path / "indexer.csv"
    r = run_cli("bench", "--suite", "indexer", "--csv", out, "--target", "cpu")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "recall min 1.0000" in r.stdout and "fused" in r.stdout
    rows = list(csv.DictReader(open(out)))
    assert len(rows) >= 3 and all(row["shape"] for row in rows)


def test_drafts_suite_is_next_n_3_to_8_on_the_decode_kernel_shapes():
    """bench --suite drafts: every draft-row count DeepGEMM leaves out on sm90, at H 64 D 128 block 64."""
    from mqa_cli.problem import matrix, suites

    assert "drafts" in suites.NAMES
    assert sorted({s.next_n for s in matrix.DRAFTS_SUITE}) == list(range(3, 9))
    assert {(s.heads, s.dim, s.block_size) for s in matrix.DRAFTS_SUITE} == {(64, 128, 64)}
