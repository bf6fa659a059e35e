"""Layouts' windows against hand-checked small cases, and the counts every report uses."""
import numpy as np
import pytest

from mqa_cli.errors import UserError
from mqa_cli.problem import ProblemSpec, counts, windows


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
