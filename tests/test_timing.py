"""The side-by-side timing the A/B scripts use: a clock that falls during the measurement must not favour the call
timed first."""
import itertools

from mqa_cli.bench.timing import median_in_rounds, ratio_in_rounds, side_by_side


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
