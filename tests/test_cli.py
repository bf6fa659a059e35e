"""The command line end to end: run, verify, file round trips, bad input. The runs are child processes; all of this
file's but the built-in matrix go to one child (tests/cli_batch.py: each as its own process would see it), written
and run once by the `runs` fixture, and each test reads its cases' results."""
import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from mqa_cli.check.reference import reference_logits
from mqa_cli.problem.prefill import ProblemSpec
from mqa_cli.problem.tensors import random_prefill

from .cli_batch import run_many
from .conftest import HEAVY, assert_one_line_error

SMALL = ["--seq", "40", "--heads", "8", "--dim", "32"]
BAD_FILES = [
    (dict(q=torch.randn(16, 8, 32)), "q must be fp8"),
    (dict(weights=torch.randn(16, 3)), "weights must have shape"),
    (dict(ks=torch.full((16,), 5, dtype=torch.int32), ke=torch.full((16,), 2, dtype=torch.int32)), "ks > ke"),
    (dict(ke=torch.full((16,), 99, dtype=torch.int32)), "ke > N"),
    (dict(ks=torch.full((16,), -1, dtype=torch.int32)), "ks must be >= 0"),
    (dict(kv_scales=torch.full((16,), float("nan"))), "NaN"),
    (dict(q=torch.full((16, 8, 32), 0x7F, dtype=torch.uint8).view(torch.float8_e4m3fn)),
     "q holds NaN (fp8 byte 0x7f) at q[0, 0, 0]"),
    (dict(ke=None), "missing key(s) ke"),
]


class Evil:
    def __reduce__(self):
        return (print, ("pwned",))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every case of this file but the matrix, in one child: {name: CompletedProcess}, and the folder of its files."""
    d = tmp_path_factory.mktemp("cli")
    precious, forced = d / "precious.safetensors", d / "forced.safetensors"
    precious.write_bytes(b"precious")
    forced.write_bytes(b"precious")
    for suffix in (".safetensors", ".pt"):
        t = random_prefill(ProblemSpec(batch=2, seq=24, heads=16, dim=64, layout="window", window=5))
        if suffix == ".pt":
            torch.save(t.as_dict(), d / f"p{suffix}")
        else:
            save_file(t.as_dict(), str(d / f"p{suffix}"))
    for i, (changes, _) in enumerate(BAD_FILES):
        _write(d, f"bad{i}.safetensors", **changes)
    (d / "c.safetensors").write_bytes(b"\x00garbage")
    (d / "c.pt").write_bytes(b"not a pickle")
    torch.save({"q": Evil()}, d / "evil.pt")
    t = random_prefill(ProblemSpec(seq=16, heads=8, dim=32)).as_dict()
    torch.save(t, d / "protocol4.pt", pickle_protocol=4, _use_new_zipfile_serialization=False)  # torch warns, fails
    torch.save(t, d / "protocol3.pt", pickle_protocol=3)  # torch warns, loads
    cases = {
        "run-save": ("run", *SMALL, "--layout", "window", "--window", "9", "--save-problem", d / "saved.safetensors",
                     "--output", d / "l.safetensors"),
        "overwrite-refused": ("run", *SMALL, "--output", precious),
        "overwrite-forced": ("run", *SMALL, "--output", forced, "--force"),
        "input.safetensors": ("verify", "--input", d / "p.safetensors", "--json"),
        "input.pt": ("verify", "--input", d / "p.pt", "--json"),
        "verify-fails": ("verify", *SMALL, "--dtype", "float64", "--rel-tol", "1e-12"),
        **{f"bad-file-{i}": ("run", "--input", d / f"bad{i}.safetensors") for i in range(len(BAD_FILES))},
        "no-file": ("run", "--input", d / "none.safetensors"),
        "corrupt": ("run", "--input", d / "c.safetensors"),
        "corrupt-pt": ("run", "--input", d / "c.pt"),
        "heads-48": ("run", "--heads", "48"),
        "dim-512": ("run", "--dim", "512"),
        "seq-0": ("run", "--seq", "0"),
        "layout": ("run", "--layout", "diag"),
        "output-no-dir": ("run", *SMALL, "--output", d / "no" / "dir" / "x.safetensors"),
        "output-txt": ("run", *SMALL, "--output", d / "x.txt"),
        "target-gfx950": ("run", "--target", "gfx950"),
        "dtype-float16": ("verify", "--dtype", "float16"),
        "evil-pt": ("run", "--input", d / "evil.pt"),
        "protocol4-pt": ("verify", "--input", d / "protocol4.pt"),
        "protocol3-pt": ("verify", "--input", d / "protocol3.pt"),
        "verify-nan-q": ("verify", "--input", d / f"bad{len(BAD_FILES) - 2}.safetensors"),
        "unknown-command": ("nonsense",),
        "unknown-flag": ("explain", "--bogus"),
        "bad-int": ("explain", "--seq", "abc", "--target", "sm90"),
        "variant-run": ("run", *SMALL, "--kernel", "tiled:BLOCK_Q=2,HEAD_MAJOR=1", "--verify", "--json"),
        "variant-verify": ("verify", *SMALL, "--kernel", ":BLOCK_Q=2"),
        "variant-explain": ("explain", *SMALL, "--kernel", "tiled:BLOCK_Q=2", "--json"),
        "explain-topk-decode": ("explain", "--paged", "--batch", "2", "--context-len", "65536", "--topk", "2048",
                                "--target", "h100"),
        "variant-unknown-key": ("run", *SMALL, "--kernel", "tiled:NOT_A_KEY=1"),
        "variant-malformed": ("verify", *SMALL, "--kernel", "tiled:BLOCK_Q"),
    }
    return run_many(cases), d


def test_run_saves_problem_and_logits_that_match_reference(runs):
    got, d = runs
    prob, out = d / "saved.safetensors", d / "l.safetensors"
    r = got["run-save"]
    assert r.returncode == 0, r.stderr
    assert "live pairs" in r.stdout and "TFLOP/s" in r.stdout
    t = load_file(str(prob))
    assert t["q"].dtype == torch.float8_e4m3fn and t["q"].shape == (40, 8, 32)
    logits = load_file(str(out))["logits"]
    from mqa_cli.problem.tensors import Prefill

    ref = reference_logits(Prefill(**{k: t[k] for k in ("q", "kv", "kv_scales", "weights", "ks", "ke")}))
    live = torch.isfinite(ref)
    assert torch.equal(torch.isneginf(logits), ~live)
    assert (logits[live] - ref[live]).norm() / ref[live].norm() < 1e-3


def test_explain_topk_names_the_selection_and_the_engines_path(runs):
    """explain --topk on a decode batch: the fused call's selection config (two rows of 64K: few long rows, each split
    over programs) and the engine's own path beside it."""
    r = runs[0]["explain-topk-decode"]
    assert r.returncode == 0, r.stderr
    sel = next(ln for ln in r.stdout.splitlines() if ln.startswith("top-k selection:"))
    assert "topk_split (regime split" in sel and "program(s) a row" in sel
    assert "bench --suite indexer" in r.stdout


def test_run_refuses_to_overwrite(runs):
    got, d = runs
    assert_one_line_error(got["overwrite-refused"], contains="--force")
    assert (d / "precious.safetensors").read_bytes() == b"precious"
    assert got["overwrite-forced"].returncode == 0  # the same file, with --force
    assert "logits" in load_file(str(d / "forced.safetensors"))


@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_input_round_trip_and_verify(runs, suffix):
    r = runs[0][f"input{suffix}"]
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["ok"] and len(d["results"]) == 1 and d["results"][0]["rel_error"] < 1e-3


@HEAVY
def test_verify_matrix_passes(run_cli):
    """`mqa-logits verify` over the built-in matrix, the dispatched kernel of each problem against the float64
    reference (test_kernels checks the other rows' configs on the same matrix, not this one again)."""
    from mqa_cli.plan import dispatch, targets
    from mqa_cli.problem import source
    from mqa_cli.problem.matrix import VERIFY_MATRIX

    r = run_cli("verify", "--dtype", "float64", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.loads(r.stdout)
    assert d["ok"] and len(d["results"]) == len(VERIFY_MATRIX)
    tgt = targets.detect()
    for spec, res in zip(VERIFY_MATRIX, d["results"]):
        assert res["kernel"] == dispatch.plan(source.from_spec(spec).shape, tgt).config.name, res
        assert res["ok"] and res["inf_pattern_ok"] and res["unwritten"] == 0 and res["bitwise_repeat"], res
        assert res["rel_error"] < 1e-3 and res["calc_diff"] < 1e-3, res


def test_verify_fails_with_exit_1(runs):
    # No kernel is exact to 1e-12 against a float64 reference on float32 logits: a failed check exits 1.
    r = runs[0]["verify-fails"]
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL" in r.stdout and "0 passed, 1 failed" in r.stdout


def _write(tmp_path, name, **changes):
    t = random_prefill(ProblemSpec(seq=16, heads=8, dim=32)).as_dict()
    t.update(changes)
    t = {k: v for k, v in t.items() if v is not None}
    save_file({k: v.contiguous() for k, v in t.items()}, str(tmp_path / name))
    return tmp_path / name


@pytest.mark.parametrize("i, needle", [(i, needle) for i, (_, needle) in enumerate(BAD_FILES)])
def test_bad_files(runs, i, needle):
    assert_one_line_error(runs[0][f"bad-file-{i}"], contains=needle)


def test_bad_input_misc(runs):
    got, _ = runs
    for case, needle in (("no-file", "no such file"), ("corrupt", "cannot read"), ("corrupt-pt", "cannot read"),
                         ("heads-48", "heads must be a power of two"), ("dim-512", "dim must be a power of two"),
                         ("seq-0", "--seq must be >= 1"), ("layout", "--layout"), ("output-no-dir", "does not exist"),
                         ("output-txt", "unknown file type"), ("target-gfx950", "cannot run on gfx950"),
                         ("dtype-float16", "--dtype")):
        assert_one_line_error(got[case], contains=needle)


def test_pt_loads_with_weights_only(runs):
    r = runs[0]["evil-pt"]
    assert_one_line_error(r, contains="cannot read")
    assert "pwned" not in r.stdout


def test_pt_pickle_protocol_warnings_never_reach_stderr(runs):
    """torch.load warns in several lines about a pickle protocol other than 2: a file it then cannot read is one
    line naming the protocol, exit 2; a file it reads runs with nothing from torch on stderr."""
    assert_one_line_error(runs[0]["protocol4-pt"], contains="pickle protocol 4")
    ok = runs[0]["protocol3-pt"]
    assert ok.returncode == 0 and "pass" in ok.stdout, ok.stderr
    assert [line for line in ok.stderr.splitlines() if not line.startswith("note:")] == [], ok.stderr


def test_verify_refuses_a_non_finite_input(runs):
    """verify on a file whose q holds a NaN: refused (exit 2, one line naming it), never a pass."""
    assert_one_line_error(runs[0]["verify-nan-q"], contains="q holds NaN (fp8 byte 0x7f) at q[0, 0, 0]")


def test_unknown_command_or_flag_is_bad_input(runs):
    """A command, flag or flag value the CLI does not know: click's message in one line, exit 2."""
    for case, needle in (("unknown-command", "No such command"), ("unknown-flag", "No such option"),
                         ("bad-int", "not a valid int")):
        assert_one_line_error(runs[0][case], contains=needle)


def test_internal_error_is_exit_3_with_one_line(monkeypatch, capsys):
    """A failure that is not bad input (here: a bug planted in explain's report) is exit 3 and one line on
    stderr; --debug shows the traceback instead."""
    from mqa_cli import cli
    from mqa_cli.cli import report

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


def test_run_and_verify_take_a_config_variant(runs):
    """`--kernel NAME:KEY=VALUE,...` (as dump takes it): run, verify and explain the row's config with the overrides,
    the kernel named after them; an unknown key or a malformed override is bad input (one line, exit 2)."""
    got, _ = runs
    r = got["variant-run"]
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads(r.stdout)
    assert d["kernel"] == "tiled" and "_BLOCK_Q_2_" in d["kernel_name"] and d["kernel_name"].endswith("HEAD_MAJOR_1")
    assert d["verify"]["ok"]
    v = got["variant-verify"]
    assert v.returncode == 0 and "_BLOCK_Q_2_" in v.stdout and "1 passed, 0 failed" in v.stdout, v.stdout[-2000:]
    e = got["variant-explain"]  # explain shows the config run runs
    assert e.returncode == 0 and json.loads(e.stdout)["plan"]["config"]["constexprs"]["BLOCK_Q"] == 2, e.stdout[-2000:]
    assert_one_line_error(got["variant-unknown-key"], contains="takes no config key")
    assert_one_line_error(got["variant-malformed"], contains="KEY=VALUE")
