"""Timing: triton.testing.do_bench (CUDA events, L2 flushed between runs) median and quantiles on a GPU;
one wall-clock run on the interpreter, flagged as meaningless for speed. And what a time is measured
against: the binding floor, from the target's ceilings (mqa_cli.plan.targets holds the numbers, once)."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass


@dataclass
class Timing:
    median_us: float
    p20_us: float
    p80_us: float
    method: str


def time_fn(fn, on_gpu: bool, warmup_ms: int = 25, rep_ms: int = 100) -> Timing:
    if on_gpu:
        import triton

        p20, p50, p80 = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=[0.2, 0.5, 0.8])
        return Timing(p50 * 1e3, p20 * 1e3, p80 * 1e3, "do_bench median, L2 flushed")
    t0 = time.perf_counter()
    fn()
    dt = (time.perf_counter() - t0) * 1e6
    return Timing(dt, dt, dt, "wall clock, interpreter (not GPU speed)")


def time_and_result(fn, on_gpu: bool):
    """(Timing, fn's result): on the interpreter fn runs once, timed by the wall clock."""
    if on_gpu:
        result = fn()
        return time_fn(fn, True), result
    t0 = time.perf_counter()
    result = fn()
    dt = (time.perf_counter() - t0) * 1e6
    return Timing(dt, dt, dt, "wall clock, interpreter (not GPU speed)"), result


def tflops(flop: int, us: float) -> float:
    return flop / (us * 1e-6) / 1e12 if us > 0 else 0.0


def time_graph(fn, rep_ms: int = 100) -> float:
    """Median µs of CUDA-graph replays of fn (launch overhead removed); needs a capturable fn."""
    import triton

    return triton.testing.do_bench_cudagraph(fn, rep=rep_ms, return_mode="median") * 1e3


def time_kernel(fn, warmup_ms: int = 10, rep_ms: int = 40) -> float:
    """Median µs of fn's GPU work alone with a cold L2: fn captured once in a CUDA graph, each sample one replay
    after do_bench's L2 flush. A replay costs the host a few µs, less than the flush takes on the GPU, so the
    host's launch work (and CPU contention, e.g. compiles running beside a sweep) never reaches the timing, as
    it can with do_bench on fn itself once fn's host work outlasts the flush. fn must be capturable."""
    import torch
    import triton

    fn()  # compile and warm outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return triton.testing.do_bench(graph.replay, warmup=warmup_ms, rep=rep_ms, return_mode="median") * 1e3


SIDE_BY_SIDE_ROUNDS = 6


def side_by_side(calls: dict, rounds: int = SIDE_BY_SIDE_ROUNDS, rep_ms: int = 30, time=None) -> list[dict]:
    """Each call timed alone (time_kernel: graph replay after an L2 flush) once per round, the order reversed every
    round: the rounds, {name: µs} each. Compare calls within a round (ratio_in_rounds), never by each one's best over
    the rounds: a card at its power cap clocks down during a measurement, so the call timed first in a round gets
    the higher clock, and the least of two rounds in opposite orders still favoured the first call (an A/A pair of
    one binary measured 1.085 on the H200, 2026-12-01)."""
    time = time or (lambda fn: time_kernel(fn, rep_ms=rep_ms))
    order = list(calls)
    return [{k: time(calls[k]) for k in (order if r % 2 == 0 else order[::-1])} for r in range(rounds)]


def ratio_in_rounds(rounds: list[dict], num: str, den: str) -> float:
    """The median over rounds of num's time over den's in the same round (a clock that drifts over the measurement
    cancels: each round's two times are taken next to each other, in alternating order)."""
    return statistics.median(r[num] / r[den] for r in rounds)


def median_in_rounds(rounds: list[dict], name: str) -> float:
    """The median of name's times over the rounds."""
    return statistics.median(r[name] for r in rounds)


@dataclass(frozen=True)
class Floor:
    """The least time a problem can take on a target: its FLOP at the fp8 ceiling or its minimum bytes at the
    copy rate, whichever is longer; that one binds."""

    compute_us: float
    memory_us: float
    fp8_tflops: float
    copy_tbs: float
    measured: str  # where the two ceilings come from (measured on the card, or its datasheet)

    @property
    def us(self) -> float:
        return max(self.compute_us, self.memory_us)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_us >= self.memory_us else "memory"

    def fraction(self, us: float) -> float:
        """Floor / measured time (1.0 = at the ceiling)."""
        return self.us / us if us > 0 else 0.0


def ceilings(tgt) -> tuple[float, float, str] | None:
    """(fp8 TF/s, copy TB/s, where they come from) of a target: each ceiling measured on its card where cards.py has
    it (the H200: 1635 TF/s, 4.3 TB/s), else the card's datasheet peak; None where it has neither (the
    interpreter)."""
    fp8 = tgt.measured_fp8_tflops or tgt.peak_fp8_tflops
    copy = tgt.measured_bandwidth_tbs or tgt.bandwidth_tbs
    if not (fp8 and copy):
        return None
    card = tgt.device_name or tgt.card or tgt.name
    if tgt.measured_fp8_tflops and tgt.measured_bandwidth_tbs:
        how = f"measured on the {card} (docs/PERFORMANCE.md)"
    elif tgt.measured_bandwidth_tbs:
        how = f"copy rate measured on the {card}, fp8 rate its datasheet peak"
    else:
        how = f"datasheet peaks of the {card}"
    return fp8, copy, how


def binding_floor(flop: int, nbytes: int, tgt) -> Floor | None:
    """The floor of `flop` FLOP and `nbytes` minimum bytes on `tgt` (None without ceilings)."""
    c = ceilings(tgt)
    if c is None:
        return None
    fp8, copy, measured = c
    return Floor(flop / (fp8 * 1e12) * 1e6, nbytes / (copy * 1e12) * 1e6, fp8, copy, measured)
