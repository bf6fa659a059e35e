"""Layouts' windows against hand-checked small cases, and the counts every report uses."""
import numpy as np
import pytest

from mqa_cli.errors import UserError
from mqa_cli.problem.prefill import ProblemSpec, counts, windows


def test_causal_bottom_right_aligned():
    # L = 4 queries over LK = 6 kv: query p sees [0, p + 1 + 6 - 4).
    ks, ke = windows(ProblemSpec(seq=4, seq_kv=6))
    assert ks.tolist() == [0, 0, 0, 0]
    assert ke.tolist() == [3, 4, 5, 6]


def test_causal_compressed_ratio():
    # R = 4: e = clamp((p + 1) // 4, 1, LK); LK = 8 // 4 = 2.
    ks, ke = windows(ProblemSpec(seq=8, ratio=4))
    assert ke.tolist() == [1, 1, 1, 1, 1, 1, 1, 2]
    assert ks.tolist() == [0] * 8


def test_batches_are_packed():
    ks, ke = windows(ProblemSpec(batch=2, seq=3))
    assert ks.tolist() == [0, 0, 0, 3, 3, 3]
    assert ke.tolist() == [1, 2, 3, 4, 5, 6]


def test_full_and_window():
    ks, ke = windows(ProblemSpec(batch=2, seq=2, seq_kv=5, layout="full"))
    assert ks.tolist() == [0, 0, 5, 5] and ke.tolist() == [5, 5, 10, 10]
    ks, ke = windows(ProblemSpec(seq=5, layout="window", window=2))
    assert ks.tolist() == [0, 0, 1, 2, 3]
    assert ke.tolist() == [1, 2, 3, 4, 5]


def test_cp_two_chunks():
    # L = 4 (chunks of 2), LK = 12 (cp = 3, cp_id = 1): chunks 1 and 4 of 6.
    ks, ke = windows(ProblemSpec(seq=4, seq_kv=12, layout="cp"))
    assert ks.tolist() == [0, 0, 0, 0]
    assert ke.tolist() == [3, 4, 9, 10]


def test_issue_counts():
    c = counts(ProblemSpec(batch=1, seq=4096))
    assert c.live == 8_390_656 and c.flop == 2 * 64 * 128 * 8_390_656
    c = counts(ProblemSpec(batch=4, seq=8192, ratio=4))
    assert (c.N, c.live) == (8192, 33_546_252)
    assert abs(c.live_fraction - 0.125) < 1e-3


def test_counts_agree_with_windows():
    for spec in (ProblemSpec(batch=3, seq=50, layout="window", window=7), ProblemSpec(batch=2, seq=64, layout="cp"),
                 ProblemSpec(batch=2, seq=40, ratio=4)):
        ks, ke = windows(spec)
        assert counts(spec).live == int((ke.astype(np.int64) - ks).sum())


@pytest.mark.parametrize("kwargs", [dict(seq=0), dict(layout="zigzag"), dict(layout="window"),
                                    dict(layout="cp", seq=3), dict(seq=2, ratio=4), dict(heads=-1)])
def test_bad_spec(kwargs):
    with pytest.raises(UserError):
        ProblemSpec(**kwargs)


def test_closed_form_counts_match_the_windows_of_random_specs():
    """counts() sums each layout's windows in closed form (explain of any size is instant): the same live count as
    the per-row windows, over random layouts, ratios, windows and lengths."""
    import random

    from mqa_cli.problem.prefill import live_per_sequence, sequence_windows

    rng = random.Random(7)
    checked = 0
    while checked < 400:
        layout = rng.choice(["causal", "full", "window", "cp"])
        kw = dict(layout=layout, heads=8, seq=rng.randint(1, 70))
        if layout == "cp":
            kw["seq"] = 2 * rng.randint(1, 25)
            kw["seq_kv"] = kw["seq"] * rng.randint(1, 6)
        else:
            kw["ratio"] = rng.choice([1, 1, 2, 3, 4, 7])
            if rng.random() < 0.5:
                kw["seq_kv"] = rng.randint(1, 90)
        if layout == "window":
            kw["window"] = rng.randint(1, 60)
        try:
            spec = ProblemSpec(**kw)
        except UserError:
            continue
        s, e = sequence_windows(spec)
        assert live_per_sequence(spec) == sum(max(b - a, 0) for a, b in zip(s, e)), kw
        checked += 1


def test_counts_of_a_huge_problem_are_instant():
    import time

    t0 = time.perf_counter()
    c = counts(ProblemSpec(seq=100_000_000, heads=8))
    c2 = counts(ProblemSpec(seq=2 ** 62, ratio=4, layout="window", window=1000, heads=8))
    assert time.perf_counter() - t0 < 0.1
    assert c.live == 100_000_000 * 100_000_001 // 2 and c2.live > 0


def test_memory_is_what_the_tools_allocate():
    """The sizes a command is refused by: the logits buffer as mqa_cli.launch.common allocates it, the inputs as held."""
    import torch

    from mqa_cli.launch import common as launch
    from mqa_cli.problem.paged import memory as paged_memory
    from mqa_cli.problem.paged import PagedSpec
    from mqa_cli.problem.paged_tensors import random_paged
    from mqa_cli.problem.prefill import check_memory, memory
    from mqa_cli.problem.tensors import random_prefill

    for seq in (100, 300, 1100):  # under one padded row, between, several
        spec = ProblemSpec(batch=2, seq=seq, heads=8, dim=64)
        for dtype in (torch.float32, torch.bfloat16):
            m = memory(spec, logits_size=dtype.itemsize, reference_size=8)
            buf = launch.alloc_logits(spec.S, spec.N, "cpu", dtype)
            assert m["logits"] == buf.untyped_storage().nbytes(), (seq, dtype)
            assert m["reference"] == spec.S * spec.N * 8
    spec = ProblemSpec(batch=2, seq=100, heads=8, dim=64)
    m = memory(spec, logits_size=2, reference_size=8)
    held = sum(x.numel() * x.element_size() for x in random_prefill(spec).as_dict().values())
    assert held < m["inputs"] <= held + 4 * spec.S * 8 * 64
    ps = PagedSpec(batch=3, next_n=2, context_len=300, heads=8, dim=64, block_size=16)
    pm = paged_memory(ps)
    t = random_paged(ps)
    held = sum(x.numel() * x.element_size() for x in t.as_dict().values())
    assert held <= pm["inputs"] and pm["logits"] == 6 * launch.padded_stride(t.max_context_len) * 4
    with pytest.raises(UserError, match=r"needs [\d,]+ bytes \(inputs .*, logits .*\), more than the 1,000 bytes"):
        check_memory(m, 1000, "--max-bytes")
    check_memory(m, m["total"], "--max-bytes")
