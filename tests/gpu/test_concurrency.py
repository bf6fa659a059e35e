"""Concurrent callers on the card: 8 threads each on its own CUDA stream (prefill, decode and both top-k ops mixed,
each call signature in two threads at once), the same with the process-wide tables (plans, fast launches, compiled
runners, the cache's layout ids and descriptors) emptied over and over by another thread while they run, and a CUDA
graph captured on a side stream while another thread calls eagerly. Every result is bitwise its serial run's. Also
what an unchecked NaN does on the card (README, "Non-finite inputs"). About 10 s on an H100 once compiled."""
from __future__ import annotations

import sys
import threading

import pytest
import torch

import mqa_cli
from mqa_cli.errors import UserError
from mqa_cli.api import fastpath, logits as api, topk
from mqa_cli.launch import common, paged_ws_sm90

from .inputs import (DEV, call_paged, call_prefill, defined_paged, defined_prefill, make_paged,
                     make_prefill, paged_meta, paged_ref_rows, prefill_ref_rows)

THREADS, REPS = 8, 12


def _jobs() -> list:
    """(call, defined-entries mask) per thread: prefill on the Gluon row and compressed bf16 on a plain-Triton one,
    prefill top-k, decode with a schedule, without one, at block size 32, at next_n 4 in bf16, and decode top-k."""
    p1 = make_prefill(2048, 2048, 64, 128, "causal", seed=1)  # the Gluon row
    p2 = make_prefill(300, 1000, 32, 128, "causal", seed=2)
    w2 = int((p2["ke"] - p2["ks"]).max())
    p3 = make_prefill(256, 2048, 64, 128, "window", seed=3, window=700)
    d1 = make_paged(8, 2, 64, 128, 64, [4096, 17, 900, 0, 2500, 64, 65, 3000], 4096, seed=4)
    m1 = paged_meta(d1["ctx"], 64)
    d2 = make_paged(3, 1, 64, 128, 64, [1000, 17, 0], 1000, seed=5)
    d3 = make_paged(4, 1, 64, 128, 32, [600, 33, 1, 250], 608, seed=6)
    d4 = make_paged(16, 4, 64, 128, 64, [1024 - 7 * b for b in range(16)], 1024, seed=7)
    d5 = make_paged(8, 1, 64, 128, 64, [2048 - 100 * b for b in range(8)], 2048, seed=8)
    return [
        (lambda: call_prefill(p1, True), None),
        (lambda: call_prefill(p2, False, w2, torch.bfloat16), defined_prefill(p2, False, w2)),
        (lambda: mqa_cli.fp8_mqa_topk(p3["q"], p3["kv"], p3["sc"], p3["w"], p3["ks"], p3["ke"], 64), None),
        (lambda: call_paged(d1, False, meta=m1), defined_paged(d1, False)),
        (lambda: call_paged(d2, True, meta=None), None),
        (lambda: call_paged(d3, True), None),
        (lambda: call_paged(d4, False, torch.bfloat16), defined_paged(d4, False)),
        (lambda: mqa_cli.fp8_paged_mqa_topk(d5["q"], d5["kv_cache"], d5["w"], d5["ctx"], d5["bt"], d5["max_len"],
                                            128, sorted=False), None),
    ]


def _bits(x, mask):
    """x's entries as integers (bit patterns: NaN and -inf compare exactly), 0 outside the defined ones."""
    x = x if mask is None else x.masked_fill(~mask, 0)
    return x.view({2: torch.int16, 4: torch.int32}[x.element_size()])


def _clear_tables() -> None:
    fastpath.clear()
    topk._FAST.clear()
    api._PLANS.clear()
    common._COMPILED.clear()
    paged_ws_sm90._LAYOUT_IDS.clear()
    paged_ws_sm90._CACHE_DESCS.clear()


@pytest.mark.parametrize("churn", [False, True], ids=["tables-kept", "tables-emptied-meanwhile"])
def test_threads_on_their_own_streams_give_the_serial_results(churn):
    jobs = _jobs()
    serial = []
    for fn, _ in jobs:
        fn()  # (compiles, records the fast path)
        serial.append(fn())
    torch.cuda.synchronize()
    start, got, errors = threading.Barrier(THREADS + int(churn)), [[] for _ in jobs], []
    running = threading.Event()
    running.set()

    def worker(i):
        s = torch.cuda.Stream()
        start.wait()
        try:
            with torch.cuda.stream(s):
                for r in range(REPS):  # its own job and the next thread's, in turn: each signature in two threads
                    j = (i + r % 2) % len(jobs)
                    got[i].append((j, jobs[j][0]()))
            s.synchronize()
        except Exception as e:  # reported below with its thread
            errors.append((i, repr(e)))

    def emptier():  # every table a call reads, emptied again and again while the workers call
        start.wait()
        while running.is_set():
            _clear_tables()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    if churn:
        threads.append(threading.Thread(target=emptier))
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # threads interleave at every few bytecodes, not every 5 ms
    try:
        for t in threads:
            t.start()
        for t in threads[:THREADS]:
            t.join()
    finally:
        running.clear()
        sys.setswitchinterval(switch)
        for t in threads:
            t.join()
    assert not errors, errors
    for i in range(THREADS):
        assert len(got[i]) == REPS
        for r, (j, out) in enumerate(got[i]):
            assert torch.equal(_bits(out, jobs[j][1]), _bits(serial[j], jobs[j][1])), f"thread {i} call {r} (job {j})"


@pytest.mark.parametrize("mode", ["global", "thread_local"])
def test_capture_on_a_side_stream_while_another_thread_calls_eagerly(mode):
    """The main thread captures a prefill and a decode call into one graph on a side stream and waits inside the
    capture until the other thread has made three rounds of eager calls on its own stream; in both capture error
    modes ("global", torch's default, forbids unsafe CUDA calls in every thread: the library's eager calls make
    none). Each eager result is compared with its serial run on the device (no sync while capturing); the replay
    with the serial run."""
    jobs = _jobs()
    captured_jobs, eager_jobs = [jobs[0], jobs[3]], [jobs[1], jobs[4], jobs[7]]
    serial = [fn() for fn, _ in captured_jobs + eager_jobs]
    ready, capturing, progress, done = (threading.Event() for _ in range(4))
    mismatches = torch.zeros((), dtype=torch.int64, device=DEV)
    torch.cuda.synchronize()
    during, errors = [0], []

    def eager():
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            try:
                while not done.is_set():
                    live = capturing.is_set()
                    for (fn, mask), ref in zip(eager_jobs, serial[2:]):
                        mismatches.add_((_bits(fn(), mask) != _bits(ref, mask)).sum())
                    ready.set()  # (one round done before the capture: its allocations are cached blocks from here on)
                    if live and not done.is_set():
                        during[0] += 1
                        if during[0] >= 3:
                            progress.set()
            except Exception as e:  # reported below
                errors.append(repr(e))
                ready.set()
                progress.set()
            s.synchronize()

    def body():
        outs = [captured_jobs[0][0]()]
        capturing.set()
        assert progress.wait(60), "the eager thread made no calls during the capture"
        return outs + [captured_jobs[1][0]()]

    t = threading.Thread(target=eager)
    t.start()
    g = torch.cuda.CUDAGraph()
    try:
        assert ready.wait(60)
        if mode == "thread_local":  # torch.cuda.graph, as engines capture
            with torch.cuda.graph(g, capture_error_mode=mode):
                outs = body()
        else:  # by hand: torch.cuda.graph's entry empties the allocator's cache, and the eager thread's next
            # allocations would then be cudaMalloc calls, which a global-mode capture forbids in every thread
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                g.capture_begin(capture_error_mode=mode)
                try:
                    outs = body()
                finally:
                    g.capture_end()
    finally:
        done.set()
        t.join()
    assert not errors, errors
    assert during[0] >= 3
    g.replay()
    torch.cuda.synchronize()
    assert int(mismatches) == 0, f"{int(mismatches)} eager entries differ from their serial runs"
    for out, ref, (_, mask) in zip(outs, serial, captured_jobs):
        assert torch.equal(_bits(out, mask), _bits(ref, mask)), "replay"


def test_unchecked_nan_on_the_card_is_what_the_readme_says():
    """Unchecked, a NaN fp8 byte in q[i, h] drops head h from row i (relu is a max, which drops NaN), one in kv row
    j or a cache token makes that column 0: finite logits; checked, each is refused. Prefill on the Gluon row (S 2048,
    H 64) and a plain-Triton one, decode at block size 64 and 32."""
    for S, N, H in ((2048, 2048, 64), (100, 700, 32)):
        p = make_prefill(S, N, H, 128, "full", seed=H)
        q, kv = p["q"].clone(), p["kv"].clone()
        q.view(torch.uint8)[3, 5, 17] = 0x7F
        kv.view(torch.uint8)[11, 40] = 0xFF
        out = call_prefill(p, True, q=q, kv=kv)
        with pytest.raises(UserError, match=r"^q holds NaN \(fp8 byte 0x7f\) at q\[3, 5, 17\]$"):  # checked
            mqa_cli.fp8_mqa_logits(q, (kv, p["sc"]), p["w"], p["ks"], p["ke"], check_values=True)
        w = p["w"].clone()
        w[3, 5] = 0
        ref, _ = prefill_ref_rows(dict(p, w=w, sc=torch.where(torch.arange(p["N"], device=DEV) == 11, 0.0, p["sc"])),
                                  range(p["S"]))
        x, y = out.double(), ref.double()
        assert torch.isfinite(x).all() and (x[:, 11] == 0).all(), f"prefill H{H}: NaN not dropped"
        assert float((x - y).norm() / y.norm()) < 1e-3, f"prefill H{H}: not the reference without the NaN terms"
    for blk in (64, 32):
        d = make_paged(2, 2, 64, 128, blk, [300, 200], 320, seed=blk)
        q, flat = d["q"].clone(), d["flat"].clone()
        q.view(torch.uint8)[1, 0, 7, 3] = 0x7F  # row 2 (sequence 1, draft 0), head 7
        b0, slot = int(d["bt"][0, 100 // blk]), 100 % blk  # sequence 0's token 100
        flat[b0, slot * d["D"] + 9] = 0xFF
        out = call_paged(d, True, q=q, kv_cache=flat.view(d["kv_cache"].shape))
        with pytest.raises(UserError, match=r"^kv_cache holds NaN \(fp8 byte 0xff\) at sequence 0, token 100 "):
            mqa_cli.fp8_paged_mqa_logits(d["q"], flat.view(d["kv_cache"].shape), d["w"], d["ctx"], d["bt"], None,
                                         d["max_len"], check_values=True)
        w = d["w"].clone()
        w[2, 7] = 0
        flat0 = d["flat"].clone()
        at = blk * d["D"] + 4 * slot
        flat0[b0, at:at + 4] = 0  # that token's scale 0: its column 0
        ref, live = paged_ref_rows(dict(d, w=w, flat=flat0), range(4))
        x = out.double()
        assert torch.isfinite(x[live]).all() and (x[:2, 100] == 0).all(), f"paged block {blk}: NaN not dropped"
        y = ref.double()
        assert float((x[live] - y[live]).norm() / y[live].norm()) < 1e-3, f"paged block {blk}: not the reference"
