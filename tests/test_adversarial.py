"""Adversarial inputs (issue 30): schedules, block tables, sizes and flags that must never crash, hang, misread or
write outside the output. Each case runs in a child process with a timeout, so a crash (a signal) or a hang is a
test failure like a wrong result; cases share a child where a crash cannot hide another (after a crash the rest of
the batch runs in a fresh child). Every returned output is compared with the float64 reference
(tests/reference64.py) and, for the schedule cases, bit for bit with the call's own split (schedule_meta=None).
The library's outputs are allocated with guard rows and padding columns around them (a patched alloc_logits), so a
write outside the output is seen.

Families: `schedule` (foreign, stale and garbage schedule_meta, checks off and on), `table` (block ids out of range),
`sizes` (max_context_len the output could not hold), `topk` (check_values of the top-k ops), `cli` (bad flags and
sizes: exit 2, one line, within seconds). The wider sweeps of the same families are marked `heavy` and run with
MQA_LOGITS_HEAVY=1 (`MQA_LOGITS_HEAVY=1 pytest -m heavy tests/test_adversarial.py`); without them this file takes
about two minutes on two busy CPUs.

`python -m tests.test_adversarial [--all] [FAMILY ...]` prints each case's outcome and the totals (the probe).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RESULT = "@@case "
CASES: dict = {}  # name -> (family, heavy, fn)
BUDGET_S = 120  # per case, generous for two busy CPUs; a hang is a case that passes it


def case(family: str, name: str, heavy: bool = False):
    def register(fn):
        assert name not in CASES, name
        CASES[name] = (family, heavy, fn)
        return fn
    return register


class Outcome(BaseException):
    """A case's verdict other than ok: kind is wrong | oob | unrefused | refused | error | slow | lines. (Not an
    Exception: the CLI's own handler must not turn it into an exit code.)"""

    def __init__(self, kind: str, detail: str = ""):
        super().__init__(f"{kind}: {detail}")
        self.kind, self.detail = kind, detail


# ------------------------------------------------------------------------------------------ child: inputs

def _torch():
    import torch

    from mqa_cli.launch import interpreter

    interpreter.enable_if_no_gpu(note=False)
    return torch


GUARD_ROWS = 24
_ALLOCS: list = []


def _guard_outputs():
    """Every logits buffer the library allocates gets GUARD_ROWS guard rows before and after it, and its padding
    columns, filled with a value no kernel writes; _check_guards() says whether any of it changed."""
    torch = _torch()
    from mqa_cli.launch import common as launch

    if getattr(launch, "_guarded", False):
        return
    plain = launch.alloc_logits

    def guarded(S, cols, device, dtype=torch.float32, align=launch.ROW_ALIGN):
        stride = launch.padded_stride(cols, align)
        buf = torch.full(((S + 2 * GUARD_ROWS) * stride,), 7.25, dtype=dtype, device=device)
        view = buf[GUARD_ROWS * stride:(GUARD_ROWS + S) * stride].view(S, stride)[:, :cols]
        _ALLOCS.append((buf, S, stride, cols))
        return view

    launch.alloc_logits = guarded
    launch._guarded = True
    launch._plain_alloc = plain


def _check_guards():
    torch = _torch()
    while _ALLOCS:
        buf, S, stride, cols = _ALLOCS.pop()
        whole = buf.view(-1, stride)
        inside = torch.zeros_like(whole, dtype=torch.bool)
        inside[GUARD_ROWS:GUARD_ROWS + S, :cols] = True
        bad = (whole != 7.25) & ~inside
        if bad.any():
            raise Outcome("oob", f"{int(bad.sum())} elements written outside the [{S}, {cols}] output")


def paged_inputs(next_n: int, ctx, *, bs: int = 64, H: int = 8, D: int = 64, seed: int = 0,
                 max_context_len: int | None = None, spare_blocks: int = 2):
    """Random non-zero inputs of one decode step: a shuffled block table covering max_context_len, a cache with
    spare blocks, q, weights; and the unpacked cache for the reference."""
    torch = _torch()
    from tests.reference64 import fp8_q, fp8_rows, gen, pack_blocks, paged_ends

    g = gen(seed)
    ctx_t = torch.tensor(ctx, dtype=torch.int32)
    B = ctx_t.shape[0]
    ends = paged_ends(ctx_t, next_n)
    N = max_context_len or max(1, int(ends.max()))
    per = -(-N // bs)
    nb = B * per + spare_blocks
    kv, sf = fp8_rows(nb * bs, D, g)
    blocks, scales = kv.view(nb, bs, D), sf.view(nb, bs)
    cache = pack_blocks(blocks, scales).view(nb, bs, 1, D + 4)
    table = torch.randperm(nb, generator=g)[:B * per].to(torch.int32).view(B, per).contiguous()
    q = fp8_q((B, next_n, H, D), g)
    w = torch.randn(B * next_n, H, generator=g)
    return dict(q=q, kv_cache=cache, weights=w, context_lens=ctx_t, block_table=table, max_context_len=N,
                blocks=blocks, scales=scales)


def paged_reference(p: dict, table=None):
    """float64 (logits, mag) of the inputs, through `table` (default the inputs' own), ends clamped to
    max_context_len."""
    from tests.reference64 import paged64, paged_ends

    ends = paged_ends(p["context_lens"], p["q"].shape[1]).clamp_max(p["max_context_len"])
    return paged64(p["q"], p["blocks"], p["scales"], p["weights"], ends,
                   p["block_table"] if table is None else table, p["max_context_len"])


def call_paged(p: dict, schedule=None, *, clean=True, check=False, table=None, ctx=None):
    import mqa_cli as dg

    _guard_outputs()
    try:
        return dg.fp8_paged_mqa_logits(p["q"], p["kv_cache"], p["weights"],
                                       p["context_lens"] if ctx is None else ctx,
                                       p["block_table"] if table is None else table, schedule,
                                       p["max_context_len"], clean, check_values=check)
    finally:
        _check_guards()


def expect_right(out, p, table=None, what=""):
    from tests.reference64 import assert_logits

    ref, mag = paged_reference(p, table)
    try:
        assert_logits(out, ref, mag, True, what=what)
    except AssertionError as e:
        raise Outcome("wrong", str(e)) from None


def expect_refused(fn, needle: str = ""):
    """fn() must raise the library's one-line UserError (containing needle)."""
    from mqa_cli.errors import UserError

    try:
        fn()
    except UserError as e:
        msg = str(e)
        if "\n" in msg:
            raise Outcome("lines", msg) from None
        if needle and needle not in msg:
            raise Outcome("refused", f"refused, but not for {needle!r}: {msg}") from None
        return msg
    except Outcome:
        raise
    except Exception as e:  # noqa: BLE001  anything else is not a clean refusal
        raise Outcome("error", f"{type(e).__name__}: {str(e).strip().splitlines()[:1]}") from None
    raise Outcome("unrefused", "returned without an error")


# ------------------------------------------------------------------------------------------ schedules

def own_schedule(ctx, P: int, block_kv: int = 64):
    from mqa_cli.launch.schedule import get_paged_mqa_logits_metadata

    return get_paged_mqa_logits_metadata(ctx, block_kv, P)


def deepgemm_schedule(ctx, next_n: int, P: int):
    """A schedule in DeepGEMM's sm90 format, written from its description (shared/context/engine-call-sites.md):
    int32 [P + 1, 2], entry p = (q atom, 256-token kv split) where program p starts; a q atom is 2 draft rows of a
    sequence when next_n >= 2 (one row at next_n 1); every atom of sequence b has ceil(ctx[b, next_n - 1] / 256)
    splits (1-D lens: ctx[b]); the total is shared evenly, the last programs taking one more; entry P is
    (batch x atoms, 0)."""
    torch = _torch()
    c = ctx.long()
    last = c[:, -1] if c.dim() == 2 else c
    atoms = 1 if next_n == 1 else -(-next_n // 2)
    splits = ((last.clamp_min(0) + 255) // 256).repeat_interleave(atoms).tolist()  # per atom, in order
    total = sum(splits)
    base, extra = divmod(total, P)
    starts, s = [], 0
    for p in range(P):
        starts.append(s)
        s += base + (1 if p >= P - extra else 0)
    rows = []
    for s in starts:
        acc = 0
        for a, n in enumerate(splits):
            if s < acc + n:
                rows.append((a, s - acc))
                break
            acc += n
        else:
            rows.append((len(splits), 0))
    rows.append((len(splits), 0))
    return torch.tensor(rows, dtype=torch.int32)


def garbage_schedule(kind: str, B: int, P: int, seed: int):
    torch = _torch()
    g = torch.Generator().manual_seed(seed)
    if kind == "negative":  # large negative entries
        return torch.randint(-2 ** 31, -2 ** 20, (P + 1, 2), generator=g, dtype=torch.int64).to(torch.int32)
    if kind == "small":  # small random entries in [-3, 4)
        return torch.randint(-3, 4, (P + 1, 2), generator=g, dtype=torch.int32)
    if kind == "huge":  # large positive entries
        return torch.randint(2 ** 20, 2 ** 31 - 1, (P + 1, 2), generator=g, dtype=torch.int64).to(torch.int32)
    if kind == "extremes":  # INT_MIN / INT_MAX / 0 / the batch, mixed
        vals = torch.tensor([-2 ** 31, 2 ** 31 - 1, 0, B, -1, 2 ** 26], dtype=torch.int64)
        return vals[torch.randint(0, 6, (P + 1, 2), generator=g)].to(torch.int32)
    if kind == "overflow":  # valid sequences, block offsets whose token offset passes 2^31
        s = torch.sort(torch.randint(0, B + 1, (P + 1,), generator=g)).values
        return torch.stack([s, torch.full_like(s, 2 ** 26 + 3)], 1).to(torch.int32)
    raise ValueError(kind)


CTX = {1: [150, 5, 200, 64], 2: [[150, 151], [0, 0], [199, 200], [64, 40]],
       4: [[140, 141, 150, 152], [0, 2, 3, 4], [197, 198, 199, 200], [1, 1, 64, 64]]}
_BASE: dict = {}


def _problem(next_n: int):
    """The step the schedule cases share per next_n, and its logits with schedule_meta=None (computed once)."""
    torch = _torch()
    if next_n not in _BASE:
        p = paged_inputs(next_n, CTX[next_n], seed=10 + next_n)
        none = call_paged(p, None)
        expect_right(none, p, what="schedule_meta=None: ")
        _BASE[next_n] = (p, none.clone())
    p, none = _BASE[next_n]
    return p, none, torch


def _schedule_for(kind: str, next_n: int, p: dict):
    torch = _torch()
    ctx = p["context_lens"]
    B = ctx.shape[0]
    if kind == "own":
        return own_schedule(ctx, 5)
    if kind == "deepgemm":
        return deepgemm_schedule(ctx, next_n, 7)
    if kind == "deepgemm_sms_half":  # vLLM at next_n 4 on sm90: num_sms // 2 programs, a row slice of a fixed buffer
        buf = torch.full((133, 2), -5, dtype=torch.int32)
        sched = deepgemm_schedule(ctx, next_n, 66)
        buf[:67] = sched
        return buf[:67]
    if kind == "clamped":  # GLM-5's pooled decode: metadata from ctx.clamp(min=1), the call with the raw ctx
        return own_schedule(ctx.clamp(min=1), 6)
    if kind == "sms_half":
        buf = torch.full((133, 2), 99, dtype=torch.int32)
        buf[:67] = own_schedule(ctx, 66)
        return buf[:67]
    if kind == "stale_smaller":
        return own_schedule(ctx[:B - 1], 5)
    if kind == "stale_first":
        return own_schedule(ctx[:1], 5)  # (5 ranges: a schedule the plan reads, so checks judge it)
    if kind == "stale_larger":
        return own_schedule(torch.cat([ctx, ctx[:2] + 500]), 5)
    if kind == "block16":
        return own_schedule(ctx, 5, block_kv=16)
    if kind == "one_program":
        return own_schedule(ctx, 1)
    if kind == "reversed":
        return own_schedule(ctx, 6).flip(0).contiguous()
    if kind == "shuffled":
        s = own_schedule(ctx, 6)
        return s[torch.randperm(s.shape[0], generator=torch.Generator().manual_seed(3))].contiguous()
    if kind == "zeros":
        return torch.zeros(6, 2, dtype=torch.int32)
    if kind == "all_end":
        return torch.tensor([[B, 0]] * 6, dtype=torch.int32)
    if kind == "bad_first":
        s = own_schedule(ctx, 4).clone()
        s[0] = torch.tensor([1, 1])
        return s
    if kind == "bad_last":
        s = own_schedule(ctx, 4).clone()
        s[-1] = torch.tensor([B - 1, 2])
        return s
    head, _, seed = kind.partition(":")
    return garbage_schedule(head, B, 5 + int(seed or 0) % 3, int(seed or 0))


# schedules that must give today's logits bit for bit, and that check_values must accept
VALID = ("own", "deepgemm", "deepgemm_sms_half", "clamped", "sms_half", "one_program")
# schedules that must give today's logits bit for bit with checks off, and that check_values must refuse
STALE = ("stale_smaller", "stale_first", "stale_larger", "reversed", "shuffled", "zeros", "all_end", "bad_first",
         "bad_last")
GARBAGE = ("negative:0", "small:0", "small:1", "huge:0", "extremes:0", "overflow:0")
GARBAGE_HEAVY = tuple(f"{k}:{s}" for k in ("negative", "small", "huge", "extremes", "overflow") for s in range(2, 6))


def _schedule_case(kind: str, next_n: int, check: bool):
    p, none, torch = _problem(next_n)
    sched = _schedule_for(kind, next_n, p)
    if check and kind not in VALID:
        expect_refused(lambda: call_paged(p, sched, check=True), "schedule_meta")
        return
    out = call_paged(p, sched, check=check)
    if not torch.equal(out, none):
        diff = int((out != none).sum())
        expect_right(out, p, what=f"schedule {kind}: ")
        raise Outcome("wrong", f"{diff} entries differ from schedule_meta=None's (right, not bit for bit)")
    expect_right(out, p)


def _register_schedules():
    # the everyday run: each kind once (next_n 2; the foreign formats at next_n 1 too, vLLM's num_sms // 2 rows at
    # next_n 4), checked and unchecked; the heavy run every kind at next_n 1, 2 and 4
    fast = {("deepgemm", 1, False), ("deepgemm", 2, False), ("clamped", 2, False)}
    fast |= {(k, 2, False) for k in ("sms_half", "stale_smaller", "negative:0", "huge:0", "overflow:0", "reversed")}
    fast |= {(k, 2, True) for k in ("deepgemm", "stale_larger", "small:1")}
    fast |= {("deepgemm_sms_half", 4, False), ("deepgemm_sms_half", 4, True)}
    for n in (1, 2, 4):
        for kind in VALID + STALE + GARBAGE + GARBAGE_HEAVY + ("block16",):
            for check in (False, True):
                if kind == "block16" and check:
                    continue  # block-16 entries read in 64-token blocks: refused only where they leave the range
                name = f"schedule-{kind}-n{n}" + ("-checked" if check else "")
                case("schedule", name, heavy=(kind, n, check) not in fast)(
                    lambda kind=kind, n=n, check=check: _schedule_case(kind, n, check))


_register_schedules()


# ------------------------------------------------------------------------------------------ block tables

def _table_case(value, next_n: int, bs: int, where: str, check: bool):
    torch = _torch()
    p = paged_inputs(next_n, [100, 37, 130][: 3 if bs < 64 else 2] if next_n == 1 else [[90, 100], [37, 37]],
                     bs=bs, seed=40 + bs + next_n)
    nb = p["kv_cache"].shape[0]
    table = p["block_table"].clone()
    v = {"nb": nb, "nb+7": nb + 7, "-1": -1, "2^30": 2 ** 30, "-2^31": -2 ** 31, "2^31-1": 2 ** 31 - 1}[value]
    if where == "first":
        table[0, 0] = v
    else:  # every live entry of the last sequence
        table[-1, :] = v
    if check:
        expect_refused(lambda: call_paged(p, None, check=True, table=table), "block_table")
        return
    out = call_paged(p, None, table=table)
    expect_right(out, p, table.clamp(0, nb - 1), what=f"block id {value}: ")  # bounded: a clamped id's block


def _register_tables():
    fast = {("nb", 1, 16, "first"), ("2^30", 2, 64, "row"), ("-2^31", 1, 32, "row"), ("-1", 2, 64, "first")}
    for value in ("nb", "nb+7", "-1", "2^30", "-2^31", "2^31-1"):
        for next_n, bs in ((1, 16), (1, 32), (2, 64)):
            for where in ("first", "row"):
                case("table", f"table-{value}-n{next_n}-bs{bs}-{where}",
                     heavy=(value, next_n, bs, where) not in fast)(
                    lambda v=value, n=next_n, b=bs, w=where: _table_case(v, n, b, w, False))
        case("table", f"table-{value}-checked", heavy=value not in ("nb", "-1"))(
            lambda v=value: _table_case(v, 2, 64, "first", True))


_register_tables()


@case("table", "context-lens-past-the-table")
def _ctx_past_table():
    """Context lengths past the block table's coverage (checks off): the kernel reads no id past a row's end."""
    torch = _torch()
    p = paged_inputs(1, [100, 37], bs=16, seed=5)
    wide = dict(p, max_context_len=4000, context_lens=torch.tensor([4000, 2 ** 31 - 1], dtype=torch.int32))
    out = call_paged(wide, None)
    if not torch.isfinite(out[:, :p["block_table"].shape[1] * 16]).all() or out.shape != (2, 4000):
        raise Outcome("wrong", "the covered tokens are not all finite")


@case("table", "context-lens-negative-and-huge")
def _ctx_garbage():
    torch = _torch()
    p = paged_inputs(2, [[50, 60], [70, 70]], bs=64, seed=6)
    bad = torch.tensor([[-2 ** 31, 60], [2 ** 31 - 1, -5]], dtype=torch.int32)
    out = call_paged(p, None, ctx=bad)
    ref = dict(p, context_lens=bad.clamp(0, p["max_context_len"]))
    expect_right(out, ref)
    expect_refused(lambda: call_paged(p, None, ctx=bad, check=True), "context_lens")


# ------------------------------------------------------------------------------------------ sizes

def _max_ctx_case(value: int):
    p = paged_inputs(1, [100, 37], bs=64, seed=7)
    expect_refused(lambda: call_paged(dict(p, max_context_len=value), None), "max_context_len")


for _v, _heavy in ((2 ** 40, False), (2 ** 31, False), (10 ** 12, True), (2 ** 63 - 1, True)):
    case("sizes", f"max-context-len-{_v}", heavy=_heavy)(lambda v=_v: _max_ctx_case(v))


@case("sizes", "max-context-len-below-the-contexts")
def _max_ctx_small():
    torch = _torch()
    p = paged_inputs(2, [[150, 151], [30, 40]], bs=64, seed=8)
    short = dict(p, max_context_len=100)
    out = call_paged(short, None)
    expect_right(out, dict(short, block_table=p["block_table"]))
    expect_refused(lambda: call_paged(short, None, check=True), "max_context_len")
    assert torch.isneginf(out[:, 100:]).all() if out.shape[1] > 100 else True


@case("sizes", "meta-device-tensors")
def _meta_device():
    torch = _torch()
    import mqa_cli as dg

    q = torch.empty(2, 1, 8, 64, dtype=torch.float8_e4m3fn, device="meta")
    cache = torch.empty(4, 64, 1, 68, dtype=torch.uint8, device="meta")
    msg = expect_refused(lambda: dg.fp8_paged_mqa_logits(
        q, cache, torch.empty(2, 8, device="meta"), torch.empty(2, dtype=torch.int32, device="meta"),
        torch.empty(2, 2, dtype=torch.int32, device="meta"), None, 128), "meta")
    if "are on a GPU" in msg:
        raise Outcome("refused", f"meta tensors reported as on a GPU: {msg}")


# ------------------------------------------------------------------------------------------ top-k

def _prefill(S=6, N=40, H=8, D=64, seed=1):
    torch = _torch()
    from tests.reference64 import fp8_q, fp8_rows, gen

    g = gen(seed)
    kv, sf = fp8_rows(N, D, g)
    q = fp8_q((S, H, D), g)
    w = torch.randn(S, H, generator=g)
    ks = torch.tensor([0, 0, 5, 10, 10, 20][:S], dtype=torch.int32)
    ke = torch.tensor([12, 30, 25, 40, 11, 39][:S], dtype=torch.int32)
    return q, kv, sf, w, ks, ke


@case("topk", "topk-max-seqlen-below-a-window-checked")
def _topk_window_checked():
    import mqa_cli as dg

    q, kv, sf, w, ks, ke = _prefill()
    expect_refused(lambda: dg.fp8_mqa_topk(q, kv, sf, w, ks, ke, 4, max_seqlen_k=16, check_values=True),
                   "max_seqlen_k")


@case("topk", "topk-max-seqlen-below-a-window-env")
def _topk_window_env():
    import mqa_cli as dg

    q, kv, sf, w, ks, ke = _prefill()
    os.environ["MQA_LOGITS_CHECK"] = "1"
    try:
        expect_refused(lambda: dg.fp8_mqa_topk(q, kv, sf, w, ks, ke, 4, max_seqlen_k=16), "max_seqlen_k")
    finally:
        del os.environ["MQA_LOGITS_CHECK"]


@case("topk", "topk-windows-right-with-checks")
def _topk_ok():
    torch = _torch()
    import mqa_cli as dg
    from tests.reference64 import prefill64

    q, kv, sf, w, ks, ke = _prefill()
    idx = dg.fp8_mqa_topk(q, kv, sf, w, ks, ke, 4, max_seqlen_k=32, check_values=True, sorted=False)
    ref, _ = prefill64(q, kv, sf, w, ks, ke)
    for i in range(q.shape[0]):
        want = set(torch.topk(ref[i], min(4, int(ke[i] - ks[i]))).indices.tolist())
        if set(idx[i].tolist()) - {-1} != want:
            raise Outcome("wrong", f"row {i}: {sorted(idx[i].tolist())} vs {sorted(want)}")


@case("topk", "paged-topk-garbage-schedule")
def _paged_topk_schedule():
    torch = _torch()
    import mqa_cli as dg

    p, _, _ = _problem(2)
    sched = garbage_schedule("small", 4, 5, 9)
    args = (p["q"], p["kv_cache"], p["weights"], p["context_lens"], p["block_table"], p["max_context_len"], 8)
    good = dg.fp8_paged_mqa_topk(*args, sorted=False)
    got = dg.fp8_paged_mqa_topk(*args, schedule_meta=sched, sorted=False)
    if not torch.equal(torch.sort(got, 1).values, torch.sort(good, 1).values):
        raise Outcome("wrong", "a garbage schedule changed the top-k")
    expect_refused(lambda: dg.fp8_paged_mqa_topk(*args, schedule_meta=sched, check_values=True), "schedule_meta")


# ------------------------------------------------------------------------------------------ CLI

def cli_main(*argv, forbid_kernel: bool = False):
    """`mqa-logits ARGV` in this process: (exit code, stderr lines without notes, seconds). forbid_kernel: a launch
    (or the timing that runs it) is a failure: the input must be refused before any kernel runs."""
    from mqa_cli import cli
    from mqa_cli.bench import timing

    real = timing.time_and_result
    if forbid_kernel:
        def refuse(*a, **k):
            raise Outcome("slow", "the kernel ran before the input was refused")
        timing.time_and_result = refuse
    err, out = io.StringIO(), io.StringIO()
    old = sys.argv
    sys.argv = ["mqa-logits", *map(str, argv)]
    t0 = time.perf_counter()
    code = 0
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            cli.main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    finally:
        sys.argv = old
        timing.time_and_result = real
    lines = [ln for ln in err.getvalue().strip().splitlines() if ln and not ln.startswith("note:")]
    return code, lines, time.perf_counter() - t0


def expect_bad_input(*argv, needle: str = "", seconds: float = 20.0, forbid_kernel: bool = False):
    code, lines, dt = cli_main(*argv, forbid_kernel=forbid_kernel)
    if code != 2:
        raise Outcome("wrong", f"exit {code}, not 2: {lines[-3:]}")
    if len(lines) != 1:
        raise Outcome("lines", f"{len(lines)} lines: {lines[:4]}")
    if needle and needle not in lines[0]:
        raise Outcome("refused", f"not about {needle!r}: {lines[0]}")
    if dt > seconds:
        raise Outcome("slow", f"{dt:.1f} s")
    return lines[0]


def _cli_case(name, *argv, needle="", heavy=False, seconds=20.0, forbid_kernel=True):
    case("cli", name, heavy=heavy)(lambda: expect_bad_input(*argv, needle=needle, seconds=seconds,
                                                            forbid_kernel=forbid_kernel))


for _k, _heavy in (("SUBS=0", False), ("BLOCK_KV=0", False), ("BLOCK_KV=7", False), ("ROWS=3", False),
                   ("SUBS=-1", True), ("num_warps=3", True), ("num_stages=0", True)):
    _cli_case(f"cli-run-paged-kernel-{_k}", "run", "--paged", "--batch", "2", "--context-len", "64", "--heads", "8",
              "--dim", "64", "--kernel", f"paged:{_k}", needle=_k.split("=")[0], heavy=_heavy)
_cli_case("cli-verify-paged-kernel-ROWS=3", "verify", "--paged", "--batch", "2", "--context-len", "64", "--heads",
          "8", "--dim", "64", "--kernel", "paged:ROWS=3", needle="ROWS", heavy=True)
_cli_case("cli-explain-paged-kernel-BLOCK_KV=7", "explain", "--paged", "--kernel", "paged:BLOCK_KV=7",
          needle="BLOCK_KV", forbid_kernel=False)
_cli_case("cli-run-seq-1e7", "run", "--seq", "10000000", needle="bytes")
_cli_case("cli-run-batch-1e9", "run", "--batch", "1000000000", needle="bytes")
_cli_case("cli-run-seq-2^63", "run", "--seq", str(2 ** 63), needle="bytes")
_cli_case("cli-run-paged-context-1e9", "run", "--paged", "--context-len", "1000000000", needle="bytes")
_cli_case("cli-run-paged-batch-1e9", "run", "--paged", "--batch", "1000000000", "--context-len", "64",
          needle="", heavy=True)
_cli_case("cli-verify-seq-1e6", "verify", "--seq", "1000000", needle="bytes", heavy=True)
_cli_case("cli-bench-seq-1e7", "bench", "--seq", "10000000", needle="bytes", heavy=True)
_cli_case("cli-run-max-bytes", "run", "--seq", "512", "--max-bytes", "1000", needle="--max-bytes")


@case("cli", "cli-explain-seq-1e8-is-cheap")
def _explain_huge():
    code, lines, dt = cli_main("explain", "--seq", "100000000", "--heads", "8")
    if code != 0:
        raise Outcome("wrong", f"exit {code}: {lines[-2:]}")
    if dt > 5:
        raise Outcome("slow", f"explain --seq 100000000 took {dt:.1f} s")


@case("cli", "cli-explain-seq-2^63-is-cheap", heavy=True)
def _explain_huger():
    code, lines, dt = cli_main("explain", "--seq", str(2 ** 62), "--layout", "full", "--heads", "8")
    if code != 0 or dt > 5:
        raise Outcome("wrong" if code else "slow", f"exit {code}, {dt:.1f} s: {lines[-2:]}")


def _tmp() -> Path:
    return Path(tempfile.mkdtemp(prefix="mqa-adv-"))


def cli_process(*argv, timeout: float = 120):
    """`python -m mqa_cli ARGV` in a fresh process (dump compiles: it needs a process without the interpreter)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "mqa_cli", *map(str, argv)], capture_output=True, text=True, env=env,
                       timeout=timeout, cwd=tempfile.gettempdir())
    lines = [ln for ln in r.stderr.strip().splitlines() if ln and not ln.startswith("note:")]
    return r.returncode, lines, time.perf_counter() - t0


@case("cli", "cli-dump-dir-is-a-file")
def _dump_dir_file():
    f = _tmp() / "afile"
    f.write_text("x")
    code, lines, _ = cli_process("dump", "--target", "sm90", "--seq", "256", "--heads", "8", "--dump-dir", str(f))
    if code != 2 or len(lines) != 1 or str(f) not in lines[0]:
        raise Outcome("wrong", f"exit {code}: {lines[-3:]}")


@case("cli", "cli-run-dump-asm-dir-is-a-file")
def _run_dump_dir_file():
    f = _tmp() / "afile"
    f.write_text("x")
    expect_bad_input("run", "--seq", "128", "--heads", "8", "--dump-asm", "--dump-dir", str(f), needle=str(f),
                     forbid_kernel=True)


@case("cli", "cli-output-bad-suffix")
def _output_suffix():
    d = _tmp()
    expect_bad_input("run", "--seq", "128", "--heads", "8", "--output", str(d / "x.txt"), needle=".txt",
                     forbid_kernel=True)
    if (d / "x.txt").exists():
        raise Outcome("wrong", "wrote the file")


def _save_pt(path, obj, **kw):
    torch = _torch()
    torch.save(obj, str(path), **kw)


@case("cli", "cli-input-huge-stride-0")
def _input_stride0():
    torch = _torch()
    q, kv, sf, w, ks, ke = _prefill(S=4, N=40)
    S = 2 ** 32  # a few KB on disk, 2 TiB laid out
    f = _tmp() / "big.pt"
    _save_pt(f, {"q": q[:1].expand(S, -1, -1), "kv": kv, "kv_scales": sf, "weights": w[:1].expand(S, -1),
                 "ks": torch.zeros(1, dtype=torch.int32).expand(S), "ke": torch.full((1,), 40, dtype=torch.int32).expand(S)})
    expect_bad_input("run", "--input", str(f), needle="bytes")


@case("cli", "cli-input-paged-max-context-2^40")
def _input_paged_huge():
    torch = _torch()
    p = paged_inputs(1, [100, 37], seed=3)
    f = _tmp() / "paged.pt"
    _save_pt(f, {k: p[k] for k in ("q", "kv_cache", "weights", "context_lens", "block_table")}
             | {"max_context_len": torch.tensor(2 ** 40)})
    expect_bad_input("run", "--input", str(f), needle="max_context_len")


class _Payload:
    def __reduce__(self):
        return (print, ("a pickle payload ran",))


@case("cli", "cli-input-legacy-pickle")
def _input_legacy():
    f = _tmp() / "legacy.pt"
    _save_pt(f, {"q": _Payload()}, _use_new_zipfile_serialization=False)
    expect_bad_input("run", "--input", str(f), needle=str(f))


# ------------------------------------------------------------------------------------------ runner

CHILD_MEMORY = 6 << 30  # address space of a child: a case that allocates without bound fails, the machine does not


def _child(names: list) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))
    sys.path.append(str(ROOT))  # tests.reference64; the library comes from where the interpreter finds it
    for name in names:
        _, _, fn = CASES[name]
        t0 = time.perf_counter()
        try:
            fn()
            kind, detail = "ok", ""
        except Outcome as e:
            kind, detail = e.kind, e.detail
        except Exception as e:  # noqa: BLE001
            kind, detail = "error", f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"
        sys.stdout.write(RESULT + json.dumps({"case": name, "kind": kind, "detail": detail[:400],
                                              "s": round(time.perf_counter() - t0, 2)}) + "\n")
        sys.stdout.flush()


def run_cases(names: list, budget_s: float = BUDGET_S, env: dict | None = None) -> dict:
    """Outcome of each case: ok, a case's own verdict, crash (a signal or an exit without a verdict) or hang (past
    its budget). Cases run in order in children; after a crash or a hang the rest go to a fresh child."""
    results, todo = {}, list(names)
    env = {**os.environ, **(env or {})}
    env.pop("TRITON_INTERPRET", None)
    env["PYTHONUNBUFFERED"] = "1"
    code = f"import sys; sys.path.append({str(ROOT)!r}); from tests.test_adversarial import _child; _child(sys.argv[1:])"
    with tempfile.TemporaryDirectory() as cwd:  # not the repository root: the library is the installed one
        while todo:
            proc = subprocess.Popen([sys.executable, "-c", code, *todo], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
            done, last = [], time.monotonic()
            import selectors

            sel = selectors.DefaultSelector()
            sel.register(proc.stdout, selectors.EVENT_READ)
            hung = False
            while True:
                if not sel.select(timeout=max(0.1, budget_s - (time.monotonic() - last))):
                    if time.monotonic() - last > budget_s:
                        hung = True
                        proc.kill()
                        break
                    continue
                line = proc.stdout.readline()
                if not line:
                    break
                if line.startswith(RESULT):
                    r = json.loads(line[len(RESULT):])
                    results[r["case"]] = r
                    done.append(r["case"])
                    last = time.monotonic()
            proc.wait()
            err = proc.stderr.read()
            todo = [n for n in todo if n not in done]
            if todo:
                what = "hang" if hung else "crash"
                detail = f"past {budget_s:.0f} s" if hung else f"exit {proc.returncode}: {err.strip()[-300:]}"
                results[todo[0]] = {"case": todo[0], "kind": what, "detail": detail}
                todo = todo[1:]
    return results


def names_of(family: str, heavy: bool) -> list:
    return [n for n, (f, h, _) in CASES.items() if f == family and h == heavy]


def _assert_all_ok(results: dict) -> None:
    bad = {n: r for n, r in results.items() if r["kind"] != "ok"}
    assert not bad, "\n".join(f"{n}: {r['kind']}: {r['detail']}" for n, r in bad.items())


FAMILIES = ("schedule", "table", "sizes", "topk", "cli")


@pytest.mark.parametrize("family", FAMILIES)
def test_adversarial(family):
    """The family's everyday cases: none crashes, hangs, misreads, writes outside its output or is refused in more
    than one line."""
    _assert_all_ok(run_cases(names_of(family, False)))


@pytest.mark.heavy
@pytest.mark.parametrize("family", FAMILIES)
def test_adversarial_heavy(family):
    names = names_of(family, True)
    if not names:
        pytest.skip("no heavy cases")
    _assert_all_ok(run_cases(names))


def test_the_registry_covers_every_family():
    assert {f for f, _, _ in CASES.values()} == set(FAMILIES)
    assert all(names_of(f, False) for f in FAMILIES)


if __name__ == "__main__":  # the probe: every case (--all: the heavy ones too), its outcome and the totals
    args = sys.argv[1:]
    everything = "--all" in args
    fams = [a for a in args if a in FAMILIES] or list(FAMILIES)
    picked = [n for n, (f, h, _) in CASES.items() if f in fams and (everything or not h)]
    res = run_cases(picked)
    totals: dict = {}
    for n in picked:
        r = res[n]
        totals[r["kind"]] = totals.get(r["kind"], 0) + 1
        print(f"{r['kind']:9} {n}  {r['detail'][:200]}", flush=True)
    print("totals", json.dumps(totals, sort_keys=True), f"of {len(picked)}")
