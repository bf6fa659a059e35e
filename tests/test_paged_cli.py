"""Paged decode through the CLI: file round trip, explain, and every bad-input case (exit 2, one line)."""
import torch

from .conftest import assert_one_line_error, cli
from mqa_cli import io
from mqa_cli.paged_problem import PagedSpec
from mqa_cli.paged_reference import reference_paged
from mqa_cli.paged_tensors import load_paged, random_paged

SMALL = ["--paged", "--batch", "2", "--next-n", "3", "--context-len", "90", "--block-size", "16", "--heads", "16",
         "--dim", "64"]


def _save(tmp_path, name, t, **changes):
    d = t.as_dict()
    d.update(changes)
    p = tmp_path / name
    io.save_tensors(p, d)
    return p


def test_file_round_trip(tmp_path):
    prob = tmp_path / "p.safetensors"
    logits = tmp_path / "l.safetensors"
    r = cli("run", *SMALL, "--save-problem", prob, "--output", logits)
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
    v = cli("verify", "--input", prob)
    assert v.returncode == 0, v.stdout + v.stderr
    assert "pass" in v.stdout and "paged B 2" in v.stdout


def test_context_lens_from_file(tmp_path):
    f = tmp_path / "ctx.txt"
    f.write_text("300\n5, 17\n64\n")
    r = cli("verify", "--paged", "--context-lens-from", f, "--next-n", "4", "--block-size", "32", "--heads", "8",
            "--dim", "64", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "\"ok\": true" in r.stdout and "c300_5_17_64" in r.stdout  # the label lists the four lengths


def test_explain_paged_rules_out_prefill_rows():
    r = cli("explain", *SMALL)
    assert r.returncode == 0, r.stderr
    assert "→" in r.stdout and "paged: paged decode" in r.stdout.split("→")[1].splitlines()[0]
    assert r.stdout.count("ruled out: problem must be == prefill, is paged") >= 1
    assert "selected: paged" in r.stdout
    p = cli("explain", "--batch", "1", "--seq", "64")
    assert "ruled out: problem must be == paged, is prefill" in p.stdout


def test_bad_files(tmp_path):
    t = random_paged(PagedSpec(batch=2, next_n=2, context_len=80, block_size=16, heads=8, dim=64))
    nb = t.kv_cache.shape[0]
    table = t.block_table.clone()
    table[1, 0] = nb
    cases = {
        "out of range": dict(block_table=table),
        "longer than its block table covers": dict(block_table=t.block_table[:, :2].contiguous()),
        "context_lens must be >= 0": dict(context_lens=torch.tensor([80, -1], dtype=torch.int32)),
        "kv_cache must be uint8": dict(kv_cache=t.kv_cache.view(torch.float8_e4m3fn)),
        "kv_cache must be [num_blocks, block_size, 1, 68]": dict(kv_cache=t.kv_cache[..., :64].contiguous()),
        "more than max_context_len": dict(max_context_len=torch.tensor(10)),
        "context_lens must be int32": dict(context_lens=t.context_lens.long()),
        "weights must be float32": dict(weights=t.weights[:1].contiguous()),
    }
    for i, (msg, change) in enumerate(cases.items()):
        p = _save(tmp_path, f"bad{i}.safetensors", t, **change)
        assert_one_line_error(cli("verify", "--input", p), contains=msg)
    missing = tmp_path / "missing.safetensors"
    d = t.as_dict()
    d.pop("block_table")
    io.save_tensors(missing, d)
    assert_one_line_error(cli("run", "--input", missing), contains="missing key")


def test_bad_flags(tmp_path):
    assert_one_line_error(cli("run", "--paged", "--block-size", "48"), contains="--block-size")
    assert_one_line_error(cli("run", "--paged", "--next-n", "9", "--context-len", "64"), contains="next_n")
    assert_one_line_error(cli("run", "--paged", "--seq", "64"), contains="prefill flag")
    assert_one_line_error(cli("run", "--next-n", "2"), contains="add --paged")
    assert_one_line_error(cli("run", "--paged", "--context-lens-from", tmp_path / "nope.txt"), contains="no such file")
    negative = tmp_path / "negative.txt"
    negative.write_text("100 -2 50")
    assert_one_line_error(cli("run", "--paged", "--next-n", "3", "--context-lens-from", negative),
                          contains="must be >= 0")
    zeros = tmp_path / "zeros.txt"
    zeros.write_text("0 0")
    assert_one_line_error(cli("run", "--paged", "--context-lens-from", zeros), contains="every context length is 0")
    assert_one_line_error(cli("run", "--paged", "--context-jitter", "1.5"), contains="--context-jitter")
    assert_one_line_error(cli("run", "--paged", "--heads", "128"), contains="heads")
