"""The command line end to end (subprocesses): run, verify, file round trips, bad input."""
import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from mqa_cli.problem import ProblemSpec
from mqa_cli.reference import reference_logits
from mqa_cli.tensors import random_prefill

from .conftest import assert_one_line_error

SMALL = ["--seq", "40", "--heads", "8", "--dim", "32"]


def test_run_saves_problem_and_logits_that_match_reference(run_cli, tmp_path):
    prob, out = tmp_path / "p.safetensors", tmp_path / "l.safetensors"
    r = run_cli("run", *SMALL, "--layout", "window", "--window", "9", "--save-problem", prob, "--output", out)
    assert r.returncode == 0, r.stderr
    assert "live pairs" in r.stdout and "TFLOP/s" in r.stdout
    t = load_file(str(prob))
    assert t["q"].dtype == torch.float8_e4m3fn and t["q"].shape == (40, 8, 32)
    logits = load_file(str(out))["logits"]
    from mqa_cli.tensors import Prefill

    ref = reference_logits(Prefill(**{k: t[k] for k in ("q", "kv", "kv_scales", "weights", "ks", "ke")}))
    live = torch.isfinite(ref)
    assert torch.equal(torch.isneginf(logits), ~live)
    assert (logits[live] - ref[live]).norm() / ref[live].norm() < 1e-3


def test_run_refuses_to_overwrite(run_cli, tmp_path):
    out = tmp_path / "l.safetensors"
    out.write_bytes(b"precious")
    assert_one_line_error(run_cli("run", *SMALL, "--output", out), contains="--force")
    assert out.read_bytes() == b"precious"
    assert run_cli("run", *SMALL, "--output", out, "--force").returncode == 0
    assert "logits" in load_file(str(out))


@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_input_round_trip_and_verify(run_cli, tmp_path, suffix):
    t = random_prefill(ProblemSpec(batch=2, seq=24, heads=16, dim=64, layout="window", window=5))
    path = tmp_path / f"p{suffix}"
    if suffix == ".pt":
        torch.save(t.as_dict(), path)
    else:
        save_file(t.as_dict(), str(path))
    r = run_cli("verify", "--input", path, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["ok"] and len(d["results"]) == 1 and d["results"][0]["rel_error"] < 1e-3


def test_verify_matrix_passes(run_cli):
    """`mqa-logits verify` over the built-in matrix, the dispatched kernel of each problem against the float64
    reference (test_kernels checks the other rows' configs on the same matrix, not this one again)."""
    from mqa_cli import dispatch, source, targets
    from mqa_cli.matrix import VERIFY_MATRIX

    r = run_cli("verify", "--dtype", "float64", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.loads(r.stdout)
    assert d["ok"] and len(d["results"]) == len(VERIFY_MATRIX)
    tgt = targets.detect()
    for spec, res in zip(VERIFY_MATRIX, d["results"]):
        assert res["kernel"] == dispatch.plan(source.from_spec(spec).shape, tgt).config.name, res
        assert res["ok"] and res["inf_pattern_ok"] and res["unwritten"] == 0 and res["bitwise_repeat"], res
        assert res["rel_error"] < 1e-3 and res["calc_diff"] < 1e-3, res


def test_verify_fails_with_exit_1(run_cli):
    # No kernel is exact to 1e-12 against a float64 reference on float32 logits: a failed check exits 1.
    r = run_cli("verify", *SMALL, "--dtype", "float64", "--rel-tol", "1e-12")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL" in r.stdout and "0 passed, 1 failed" in r.stdout


def _write(tmp_path, name, **changes):
    t = random_prefill(ProblemSpec(seq=16, heads=8, dim=32)).as_dict()
    t.update(changes)
    t = {k: v for k, v in t.items() if v is not None}
    save_file({k: v.contiguous() for k, v in t.items()}, str(tmp_path / name))
    return tmp_path / name


@pytest.mark.parametrize("changes,needle", [
    (dict(q=torch.randn(16, 8, 32)), "q must be fp8"),
    (dict(weights=torch.randn(16, 3)), "weights must have shape"),
    (dict(ks=torch.full((16,), 5, dtype=torch.int32), ke=torch.full((16,), 2, dtype=torch.int32)), "ks > ke"),
    (dict(ke=torch.full((16,), 99, dtype=torch.int32)), "ke > N"),
    (dict(ks=torch.full((16,), -1, dtype=torch.int32)), "ks must be >= 0"),
    (dict(kv_scales=torch.full((16,), float("nan"))), "NaN"),
    (dict(ke=None), "missing key(s) ke"),
])
def test_bad_files(run_cli, tmp_path, changes, needle):
    path = _write(tmp_path, "bad.safetensors", **changes)
    assert_one_line_error(run_cli("run", "--input", path), contains=needle)


def test_bad_input_misc(run_cli, tmp_path):
    assert_one_line_error(run_cli("run", "--input", tmp_path / "none.safetensors"), contains="no such file")
    corrupt = tmp_path / "c.safetensors"
    corrupt.write_bytes(b"\x00garbage")
    assert_one_line_error(run_cli("run", "--input", corrupt), contains="cannot read")
    corrupt_pt = tmp_path / "c.pt"
    corrupt_pt.write_bytes(b"not a pickle")
    assert_one_line_error(run_cli("run", "--input", corrupt_pt), contains="cannot read")
    assert_one_line_error(run_cli("run", "--heads", "48"), contains="heads must be a power of two")
    assert_one_line_error(run_cli("run", "--dim", "512"), contains="dim must be a power of two")
    assert_one_line_error(run_cli("run", "--seq", "0"), contains="--seq must be >= 1")
    assert_one_line_error(run_cli("run", "--layout", "diag"), contains="--layout")
    assert_one_line_error(run_cli("run", *SMALL, "--output", tmp_path / "no" / "dir" / "x.safetensors"),
                          contains="does not exist")
    assert_one_line_error(run_cli("run", *SMALL, "--output", tmp_path / "x.txt"), contains="unknown file type")
    assert_one_line_error(run_cli("run", "--target", "gfx950"), contains="cannot run on gfx950")
    assert_one_line_error(run_cli("verify", "--dtype", "float16"), contains="--dtype")


def test_pt_loads_with_weights_only(run_cli, tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    path = tmp_path / "evil.pt"
    torch.save({"q": Evil()}, path)
    r = run_cli("run", "--input", path)
    assert_one_line_error(r, contains="cannot read")
    assert "pwned" not in r.stdout


def test_unknown_command_or_flag_is_bad_input(run_cli):
    """Exit code 2 for a command, flag or flag value the CLI does not know: click's message, no traceback."""
    for args, needle in ((("nonsense",), "No such command"), (("explain", "--bogus"), "No such option"),
                         (("explain", "--seq", "abc", "--target", "sm90"), "not a valid int")):
        r = run_cli(*args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert needle in r.stderr and "Traceback" not in r.stderr


def test_internal_error_is_exit_3_with_one_line(monkeypatch, capsys):
    """A failure that is not bad input (here: a bug planted in explain's report) is exit 3 and one line on
    stderr; --debug shows the traceback instead."""
    from mqa_cli import cli, report

    def broken(*a, **k):
        raise RuntimeError("planted bug\nsecond line")

    monkeypatch.setattr(report, "explain_dict", broken)
    monkeypatch.delenv("MQA_LOGITS_DEBUG", raising=False)
    monkeypatch.setattr("sys.argv", ["mqa-logits", "explain", "--seq", "64", "--target", "sm90"])
    with pytest.raises(SystemExit) as e:
        cli.main()
    assert e.value.code == 3
    err = capsys.readouterr().err.strip()
    assert err == "internal error: RuntimeError: planted bug (--debug shows the traceback)"
    monkeypatch.setattr("sys.argv", ["mqa-logits", "--debug", "explain", "--seq", "64", "--target", "sm90"])
    with pytest.raises(RuntimeError, match="planted bug"):
        cli.main()
    monkeypatch.delenv("MQA_LOGITS_DEBUG", raising=False)


def test_run_and_verify_take_a_config_variant(run_cli):
    """`--kernel NAME:KEY=VALUE,...` (as dump takes it): run, verify and explain the row's config with the overrides,
    the kernel named after them; an unknown key or a malformed override is bad input (one line, exit 2)."""
    r = run_cli("run", *SMALL, "--kernel", "tiled:BLOCK_Q=2,HEAD_MAJOR=1", "--verify", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads(r.stdout)
    assert d["kernel"] == "tiled" and "_BLOCK_Q_2_" in d["kernel_name"] and d["kernel_name"].endswith("HEAD_MAJOR_1")
    assert d["verify"]["ok"]
    v = run_cli("verify", *SMALL, "--kernel", ":BLOCK_Q=2")
    assert v.returncode == 0 and "_BLOCK_Q_2_" in v.stdout and "1 passed, 0 failed" in v.stdout, v.stdout[-2000:]
    e = run_cli("explain", *SMALL, "--kernel", "tiled:BLOCK_Q=2", "--json")  # explain shows the config run runs
    assert e.returncode == 0 and json.loads(e.stdout)["plan"]["config"]["constexprs"]["BLOCK_Q"] == 2, e.stdout[-2000:]
    assert_one_line_error(run_cli("run", *SMALL, "--kernel", "tiled:NOT_A_KEY=1"), contains="takes no config key")
    assert_one_line_error(run_cli("verify", *SMALL, "--kernel", "tiled:BLOCK_Q"), contains="KEY=VALUE")
