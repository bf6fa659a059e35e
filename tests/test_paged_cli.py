"""Paged decode through the CLI: file round trip, explain, and every bad-input case (exit 2, one line). All of the
file's runs go to one child (tests/cli_batch.py: each as its own process would see it), run once by `runs`."""
import pytest
import torch

from mqa_cli.check.paged_reference import reference_paged
from mqa_cli.problem import io
from mqa_cli.problem.paged import PagedSpec
from mqa_cli.problem.paged_tensors import load_paged, random_paged
from .cli_batch import run_many
from .conftest import assert_one_line_error

SMALL = ["--paged", "--batch", "2", "--next-n", "3", "--context-len", "90", "--block-size", "16", "--heads", "16",
         "--dim", "64"]


def _save(tmp_path, name, t, **changes):
    d = t.as_dict()
    d.update(changes)
    p = tmp_path / name
    io.save_tensors(p, d)
    return p


def _bad_file_cases(d) -> dict:
    t = random_paged(PagedSpec(batch=2, next_n=2, context_len=80, block_size=16, heads=8, dim=64))
    nb = t.kv_cache.shape[0]
    table = t.block_table.clone()
    table[1, 0] = nb
    nan_cache = t.kv_cache.clone()
    nan_cache[t.block_table[0, 0], 0, 0, 0] = 0xFF  # sequence 0's first token, dim 0
    cases = {
        "out of range": dict(block_table=table),
        "longer than its block table covers": dict(block_table=t.block_table[:, :2].contiguous()),
        "context_lens must be >= 0": dict(context_lens=torch.tensor([80, -1], dtype=torch.int32)),
        "kv_cache must be uint8": dict(kv_cache=t.kv_cache.view(torch.float8_e4m3fn)),
        "kv_cache must be [num_blocks, block_size, 1, 68]": dict(kv_cache=t.kv_cache[..., :64].contiguous()),
        "more than max_context_len": dict(max_context_len=torch.tensor(10)),
        "context_lens must be int32": dict(context_lens=t.context_lens.long()),
        "weights must be float32": dict(weights=t.weights[:1].contiguous()),
        "kv_cache holds NaN (fp8 byte 0xff) at sequence 0, token 0": dict(kv_cache=nan_cache),
    }
    runs = {}
    for i, (msg, change) in enumerate(cases.items()):
        runs[f"bad-file:{msg}"] = ("verify", "--input", _save(d, f"bad{i}.safetensors", t, **change))
    missing = d / "missing.safetensors"
    m = t.as_dict()
    m.pop("block_table")
    io.save_tensors(missing, m)
    runs["bad-file:missing key"] = ("run", "--input", missing)
    return runs


def _bad_flag_cases(d) -> dict:
    negative, zeros = d / "negative.txt", d / "zeros.txt"
    negative.write_text("100 -2 50")
    zeros.write_text("0 0")
    return {"bad-flag:--block-size": ("run", "--paged", "--block-size", "48"),
            "bad-flag:next_n": ("run", "--paged", "--next-n", "9", "--context-len", "64"),
            "bad-flag:prefill flag": ("run", "--paged", "--seq", "64"),
            "bad-flag:add --paged": ("run", "--next-n", "2"),
            "bad-flag:no such file": ("run", "--paged", "--context-lens-from", d / "nope.txt"),
            "bad-flag:must be >= 0": ("run", "--paged", "--next-n", "3", "--context-lens-from", negative),
            "bad-flag:every context length is 0": ("run", "--paged", "--context-lens-from", zeros),
            "bad-flag:--context-jitter": ("run", "--paged", "--context-jitter", "1.5"),
            "bad-flag:heads": ("run", "--paged", "--heads", "128"),
            "bad-flag:--cache-layout must be plain or shuffled": ("explain", "--paged", "--cache-layout", "tiled"),
            "bad-flag:--cache-layout describe a paged call; add --paged": ("explain", "--cache-layout", "shuffled")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every run of this file, in one child, in order (the verify reads the file the run before it saved)."""
    d = tmp_path_factory.mktemp("paged_cli")
    ctx = d / "ctx.txt"
    ctx.write_text("300\n5, 17\n64\n")
    cases = {
        "run-save": ("run", *SMALL, "--save-problem", d / "p.safetensors", "--output", d / "l.safetensors"),
        "verify-saved": ("verify", "--input", d / "p.safetensors"),
        "context-lens-from": ("verify", "--paged", "--context-lens-from", ctx, "--next-n", "4", "--block-size", "32",
                              "--heads", "8", "--dim", "64", "--json"),
        "explain-paged": ("explain", *SMALL),
        "explain-prefill": ("explain", "--batch", "1", "--seq", "64"),
        **_bad_file_cases(d),
        **_bad_flag_cases(d),
    }
    return run_many(cases), d


def test_file_round_trip(runs):
    got, d = runs
    prob = d / "p.safetensors"
    logits = d / "l.safetensors"
    r = got["run-save"]
    assert r.returncode == 0, r.stderr
    t = load_paged(prob)
    assert t.next_n == 3 and t.batch == 2 and t.block_size == 16 and t.kv_cache.dtype == torch.uint8
    spec = PagedSpec(batch=2, next_n=3, context_len=90, block_size=16, heads=16, dim=64)
    ref = random_paged(spec)
    for k in ("q", "kv_cache", "weights", "context_lens", "block_table"):
        assert torch.equal(getattr(t, k).view(torch.uint8) if k == "q" else getattr(t, k),
                           getattr(ref, k).view(torch.uint8) if k == "q" else getattr(ref, k))
    assert t.max_context_len == ref.max_context_len
    from safetensors.torch import load_file

    out = load_file(str(logits))["logits"]
    assert out.shape == (6, t.max_context_len)
    assert torch.equal(torch.isneginf(out), torch.isneginf(reference_paged(t)))
    v = got["verify-saved"]
    assert v.returncode == 0, v.stdout + v.stderr
    assert "pass" in v.stdout and "paged B 2" in v.stdout


def test_context_lens_from_file(runs):
    r = runs[0]["context-lens-from"]
    assert r.returncode == 0, r.stdout + r.stderr
    assert "\"ok\": true" in r.stdout and "c300_5_17_64" in r.stdout  # the label lists the four lengths


def test_explain_paged_rules_out_prefill_rows(runs):
    r = runs[0]["explain-paged"]
    assert r.returncode == 0, r.stderr
    assert "→" in r.stdout and "paged: paged decode" in r.stdout.split("→")[1].splitlines()[0]
    assert r.stdout.count("ruled out: problem must be == prefill, is paged") >= 1
    assert "selected: paged" in r.stdout
    p = runs[0]["explain-prefill"]
    assert "ruled out: problem must be == paged, is prefill" in p.stdout


@pytest.mark.parametrize("kind,count", [("bad-file", 10), ("bad-flag", 11)])
def test_bad_input_is_one_line(runs, kind, count):
    """Each case's name after the colon is in its one-line refusal (exit 2)."""
    cases = {n: r for n, r in runs[0].items() if n.startswith(kind + ":")}
    assert len(cases) == count
    for name, r in cases.items():
        assert_one_line_error(r, contains=name.split(":", 1)[1])
