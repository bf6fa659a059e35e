"""bench --plot: a PNG of made-up bench rows against the H200's ceilings, and no file overwritten without --force."""
import pytest

from mqa_cli.bench import suite as bench, timing
from mqa_cli.plan import targets
from mqa_cli.problem.prefill import ProblemSpec, counts

from .conftest import assert_one_line_error

SM90 = targets.get_target("sm90")


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


def test_bench_plot_refuses_to_overwrite_without_force(run_cli, tmp_path):
    png = tmp_path / "keep.png"
    png.write_bytes(b"not yours")
    r = run_cli("bench", "--seq", "16", "--heads", "8", "--dim", "32", "--plot", png, "--target", "cpu")
    assert_one_line_error(r, contains="exists; pass --force")
    assert png.read_bytes() == b"not yours"
