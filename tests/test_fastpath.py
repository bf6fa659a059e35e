"""The API's fast path (mqa_cli.api.fastpath): the signature key, what gets recorded, and what a hit launches.

No GPU needed: the key is a plain function of tensor metadata, and the GPU-only pieces (the CUDA gate, the
current device and stream, the compiled launcher) are replaced by recorders in `fake_gpu`, while the full path
still runs the real checks, plan, argument builders and kernel (the interpreter's on a CPU).
"""
import gc
import weakref
from types import SimpleNamespace

import pytest
import torch

import mqa_cli
from mqa_cli.api import logits as api, fastpath
from mqa_cli.errors import UserError
from mqa_cli.launch import interpreter, common as launch
from mqa_cli.problem.paged import PagedSpec
from mqa_cli.problem.paged_tensors import random_paged
from mqa_cli.problem.prefill import ProblemSpec
from mqa_cli.problem.tensors import random_prefill

PAGED = PagedSpec(batch=2, next_n=1, context_len=40, context_jitter=0.0, block_size=64, heads=8, dim=64)
PREFILL = ProblemSpec(seq=8, heads=8, dim=32)
OPTS = ("paged", 40, False, False)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(autouse=True)
def _empty_cache():
    fastpath.clear()
    yield
    fastpath.clear()


def _paged(seed=0, device=DEVICE):
    return random_paged(PagedSpec(**{**PAGED.__dict__, "seed": seed}), device=device)


def _paged_ins(t, meta=None):
    return (t.q, t.kv_cache, t.weights, t.context_lens, t.block_table, meta)


def _call_paged(t, meta=None, **kw):
    return mqa_cli.fp8_paged_mqa_logits(*_paged_ins(t, meta)[:5], meta, t.max_context_len, **kw)


# ------------------------------------------------------------------------------------------------- the key

def test_key_is_equal_for_equal_metadata_and_differs_for_each_change():
    t = _paged(device="cpu")
    base = fastpath.key(_paged_ins(t), OPTS)
    assert fastpath.key(_paged_ins(_paged(seed=5, device="cpu")), OPTS) == base  # other values, same metadata
    buf = torch.empty(2 * t.block_table.numel() + 16, dtype=torch.int32)
    changed = {
        "stride": dict(block_table=buf[: 2 * t.block_table.numel()].view(2, -1)[:, : t.block_table.shape[1]]),
        "dtype": dict(context_lens=t.context_lens.long()),
        "shape": dict(weights=t.weights[:1]),
        "device": dict(block_table=t.block_table.to("meta")),
        "alignment": dict(kv_cache=torch.empty(t.kv_cache.numel() + 4, dtype=torch.uint8)[4:].view(t.kv_cache.shape)),
        "schedule_meta": dict(meta=torch.zeros(3, 2, dtype=torch.int32)),
    }
    fields = ("q", "kv_cache", "weights", "context_lens", "block_table", "meta")
    for what, change in changed.items():
        d = dict(zip(fields, _paged_ins(t)))
        d.update(change)
        assert fastpath.key(tuple(d[f] for f in fields), OPTS) != base, what
    for opts in (("paged", 41, False, False), ("paged", 40, True, False), ("paged", 40, False, True)):
        assert fastpath.key(_paged_ins(t), opts) != base, opts


def test_key_sees_4_byte_alignment_not_only_16():
    """check_paged refuses a cache off a 4-byte boundary: such a cache must not share a key with one on it."""
    buf = torch.empty(1024, dtype=torch.uint8)
    keys = {off: fastpath.key((buf[off:off + 512],), ()) for off in (0, 2, 4, 16)}
    assert keys[0] == keys[16]
    assert len({keys[0], keys[2], keys[4]}) == 3


def test_signature_is_none_off_cuda():
    t = _paged(device="cpu")
    assert fastpath.signature(_paged_ins(t), OPTS) is None
    assert fastpath.signature(("not a tensor",), OPTS) is None
    assert fastpath.key((t.q, [1, 2]), OPTS) is None  # a non-tensor schedule_meta: the full path refuses it


@pytest.mark.skipif(not interpreter.active(), reason="CPU tensors run only through the interpreter")
def test_cpu_calls_never_take_the_fast_path(monkeypatch):
    def boom(self, ins):
        raise AssertionError("fast path taken for CPU tensors")

    monkeypatch.setattr(fastpath.Entry, "launch", boom)
    t = _paged(device="cpu")
    a, b = _call_paged(t), _call_paged(t)
    assert torch.equal(a, b)
    p = random_prefill(PREFILL, device="cpu")
    mqa_cli.fp8_mqa_logits(p.q, (p.kv, p.kv_scales), p.weights, p.ks, p.ke)
    mqa_cli.fp8_mqa_logits(p.q, (p.kv, p.kv_scales), p.weights, p.ks, p.ke)
    assert fastpath._ENTRIES == {}


# ------------------------------------------------------------------------------- recording and hits (fake GPU)

class FakeCompiled:
    """A compiled kernel whose launcher records what it is given."""

    def __init__(self, calls):
        self.calls = calls
        self.function = object()
        self.packed_metadata = (4, 1, 0)

    def run(self, *args):
        self.calls.append(args)


@pytest.fixture
def fake_gpu(monkeypatch):
    """CPU tensors treated as GPU tensors by the fast path: the signature skips the CUDA gate, the compiled
    launcher records its calls, and run_kernel (which still runs the interpreter) counts full-path launches."""
    state = SimpleNamespace(full=0, launches=[])
    cuda = fastpath._Cuda()
    cuda.device, cuda.stream = (lambda: 0), (lambda index: 12345)
    monkeypatch.setattr(fastpath, "_cuda", cuda)
    monkeypatch.setattr(fastpath, "signature", lambda ins, options: fastpath.key(ins, (options, 0)))
    real = launch.run_kernel

    def run_kernel(kernel, cfg, a, interpret):
        state.full += 1
        real(kernel, cfg, a, interpret)
        return FakeCompiled(state.launches)

    monkeypatch.setattr(launch, "run_kernel", run_kernel)
    return state


def _launched_args(call):
    """(grid, stream, hooks, kernel arguments) of one recorded launcher call."""
    return call[:3], call[3], call[6:9], call[9:]


@pytest.mark.parametrize("with_meta", [False, True])
def test_paged_hit_launches_the_new_tensors_without_the_full_path(fake_gpu, with_meta):
    t1, t2 = _paged(0), _paged(1)
    # as many ranges as the call has programs (4 on the CPU path), so the plan reads it (mqa_cli.plan.build)
    m1 = mqa_cli.get_paged_mqa_logits_metadata(t1.context_lens, 64, 4) if with_meta else None
    m2 = m1.clone() if with_meta else None
    fake_gpu.full = 0  # the metadata kernel went through run_kernel too
    first = _call_paged(t1, m1)
    assert fake_gpu.full == 1 and fake_gpu.launches == [] and len(fastpath._ENTRIES) == 1
    out = _call_paged(t2, m2)
    assert fake_gpu.full == 1 and len(fake_gpu.launches) == 1
    grid, stream, hooks, args = _launched_args(fake_gpu.launches[0])
    assert stream == 12345 and hooks == (None, None, None)
    assert args[:5] == (t2.q, t2.kv_cache, t2.weights, t2.context_lens, t2.block_table)
    assert (args[5] is m2) == with_meta
    assert args[6] is out
    assert out.shape == first.shape and out.stride() == first.stride() and out.dtype == first.dtype
    assert out.untyped_storage().nbytes() == first.untyped_storage().nbytes()  # the same row-padded buffer
    assert args[7:9] == (t2.batch, t2.max_context_len)
    assert grid[1:] == (1, 1) and grid[0] >= 1
    gone = [weakref.ref(x) for x in (t1.q, t1.kv_cache, first)]
    del t1, first
    gc.collect()
    assert [r() for r in gone] == [None] * 3  # the recorded launch keeps no tensor of the call that recorded it


def test_prefill_hit_with_n1_scales_passes_the_same_addresses(fake_gpu):
    p1, p2 = random_prefill(PREFILL, DEVICE), random_prefill(ProblemSpec(**{**PREFILL.__dict__, "seed": 3}), DEVICE)

    def call(p):
        return mqa_cli.fp8_mqa_logits(p.q, (p.kv, p.kv_scales[:, None]), p.weights, p.ks, p.ke)

    call(p1)
    out = call(p2)
    assert fake_gpu.full == 1 and len(fake_gpu.launches) == 1
    args = _launched_args(fake_gpu.launches[0])[3]
    assert [x.data_ptr() for x in args[:6]] == [x.data_ptr() for x in (p2.q, p2.kv, p2.kv_scales, p2.weights,
                                                                          p2.ks, p2.ke)]
    assert args[6] is out and out.shape == (p2.S, p2.N)


def test_changed_metadata_takes_the_full_path_again(fake_gpu):
    t = _paged()
    _call_paged(t)
    bt = torch.zeros(t.block_table.shape[0], t.block_table.shape[1] + 3, dtype=torch.int32, device=DEVICE)[:, :-3]
    bt.copy_(t.block_table)  # same values, another row stride
    _call_paged(SimpleNamespace(**{**t.__dict__, "block_table": bt}))
    assert fake_gpu.full == 2 and fake_gpu.launches == [] and len(fastpath._ENTRIES) == 2
    _call_paged(t, clean_logits=True)  # an option is part of the key too
    assert fake_gpu.full == 3


def test_a_call_that_fails_checks_records_nothing(fake_gpu):
    t = _paged()
    bad = SimpleNamespace(**{**t.__dict__, "weights": t.weights.double()})
    for _ in range(2):
        with pytest.raises(UserError, match="weights must be float32"):
            _call_paged(bad)
    assert fastpath._ENTRIES == {} and fake_gpu.full == 0
    with pytest.raises(UserError, match="logits_dtype"):
        _call_paged(t, logits_dtype=torch.float16)
    assert fastpath._ENTRIES == {}


def test_value_checks_run_on_a_hit_when_asked(fake_gpu, monkeypatch):
    t = _paged()
    _call_paged(t)  # recorded
    seen = []
    real = api.validate_paged_values
    monkeypatch.setattr(api, "validate_paged_values", lambda x, *a: (seen.append(x), real(x, *a)))
    _call_paged(t)
    assert seen == [] and len(fake_gpu.launches) == 1  # not asked: no data read
    monkeypatch.setenv("MQA_LOGITS_CHECK", "1")
    _call_paged(t)
    assert len(seen) == 1 and len(fake_gpu.launches) == 2
    bad_table = t.block_table.clone()
    bad_table[0, 0] = 10 ** 6
    bad = SimpleNamespace(**{**t.__dict__, "block_table": bad_table})
    with pytest.raises(UserError, match="out of range"):
        _call_paged(bad)
    monkeypatch.delenv("MQA_LOGITS_CHECK")
    with pytest.raises(UserError, match="out of range"):
        _call_paged(bad, check_values=True)
    assert len(fake_gpu.launches) == 2 and fake_gpu.full == 1  # refused before any launch


def test_prefill_value_checks_run_on_a_hit(fake_gpu):
    p = random_prefill(PREFILL, DEVICE)
    mqa_cli.mqa_logits(p.q, p.kv, p.kv_scales, p.weights, p.ks, p.ke)
    with pytest.raises(UserError, match="ke > N"):
        mqa_cli.mqa_logits(p.q, p.kv, p.kv_scales, p.weights, p.ks, p.ke + 1000, check_values=True)
    assert fake_gpu.launches == [] and fake_gpu.full == 1


def test_a_launch_hook_sends_calls_down_the_full_path(fake_gpu):
    from triton import knobs

    t = _paged()
    _call_paged(t)
    hook = lambda metadata: None  # noqa: E731
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        _call_paged(t)
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    assert fake_gpu.full == 2 and fake_gpu.launches == []
    _call_paged(t)
    assert len(fake_gpu.launches) == 1


def test_a_launch_without_a_compiled_kernel_stays_on_the_full_path(fake_gpu, monkeypatch):
    counter = []  # run_kernel returning no compiled kernel, as in the interpreter
    monkeypatch.setattr(launch, "run_kernel", lambda kernel, cfg, a, interpret: counter.append(1))
    t = _paged()
    for _ in range(3):
        _call_paged(t)
    assert len(counter) == 3 and fake_gpu.launches == []
    assert list(fastpath._ENTRIES.values()) == [fastpath._NORMAL]


def test_cache_is_bounded(fake_gpu, monkeypatch):
    monkeypatch.setattr(fastpath, "MAX_ENTRIES", 2)
    for n in (40, 41, 42):
        t = _paged()
        mqa_cli.fp8_paged_mqa_logits(t.q, t.kv_cache, t.weights, t.context_lens, t.block_table, None, n)
    assert len(fastpath._ENTRIES) == 1


# ---------------------------------------------------------------------------------- each family's rebuild

def _launched(a, out, kernel_names):
    return SimpleNamespace(args=a, out=out, compiled=FakeCompiled([]), kernel=SimpleNamespace(arg_names=kernel_names))


def test_a_rebuild_that_disagrees_with_the_argument_list_is_not_recorded():
    t = _paged(device="cpu")
    cfg = _paged_cfg(t)
    out = mqa_cli.launch.families.output_for(t, cfg)
    from mqa_cli.launch.paged import paged_args
    from mqa_cli.plan.build import with_schedule

    cfg = with_schedule(cfg, True)
    a = paged_args(t, cfg, out, None)
    names = [f"a{i}" for i in range(len(a.args))] + list(a.constexprs)
    ins = _paged_ins(t)
    assert fastpath._entry(_launched(a, out, names), ins, 0) is not None
    swapped = lambda ins, out, r=a.rebuild: (lambda x: (x[0], x[1], x[2], x[4], x[3], *x[5:]))(r(ins, out))  # noqa
    a.rebuild = swapped
    assert fastpath._entry(_launched(a, out, names), ins, 0) is None
    a.rebuild = None
    assert fastpath._entry(_launched(a, out, names), ins, 0) is None


def _paged_cfg(t):
    from mqa_cli.plan import dispatch

    shape = dispatch.Shape("paged", t.S, t.max_context_len, t.heads, t.dim, False, "e4m3fn", batch=t.batch,
                           next_n=t.next_n, block_size=t.block_size)
    return dispatch.plan(shape, api.target_for(torch.device("cpu"))).config


def test_tma_rebuild_matches_the_argument_list():
    pytest.importorskip("triton.experimental.gluon.nvidia.hopper")
    from mqa_cli.launch.common import alloc_logits
    from mqa_cli.launch.gluon_ws_sm90 import gluon_ws_sm90_args
    from mqa_cli.problem.tensors import Prefill
    from mqa_kernels.prefill.gluon_ws_sm90.config import gluon_ws_sm90_config

    f8, m = torch.float8_e4m3fn, dict(device="meta")
    S, N, H = 100, 300, 64

    def ins_of(q):
        return (q, torch.empty(N + 5, 128, dtype=f8, **m)[5:], torch.empty(N, 1, **m), torch.empty(S, H, **m),
                torch.empty(S, dtype=torch.int32, **m), torch.empty(S, dtype=torch.int32, **m))

    cfg = gluon_ws_sm90_config(heads=H, dim=128, S=S, N=N, clean=True, units=132)
    ins = ins_of(torch.empty(S, H, 128, dtype=f8, **m))
    out = alloc_logits(S, N, "meta")
    a = gluon_ws_sm90_args(Prefill(ins[0], ins[1], ins[2][:, 0], *ins[3:]), cfg, out)
    assert fastpath._same_args(a.rebuild(ins, out), a.args)
    ins2, out2 = ins_of(torch.empty(S, H, 128, dtype=f8, **m)), alloc_logits(S, N, "meta")
    again = a.rebuild(ins2, out2)
    assert again[0].base is ins2[0] and again[1].base is ins2[1] and again[6] is out2
    assert again[0].shape == a.args[0].shape and again[0].layout == a.args[0].layout
    assert a.args[0].base is ins[0]  # the recorded descriptor is left as it was
    padded = torch.empty(S, H, 256, dtype=f8, **m)[:, :, :128]  # heads 256 bytes apart: copied for the TMA
    assert gluon_ws_sm90_args(Prefill(padded, ins[1], ins[2][:, 0], *ins[3:]), cfg, out).rebuild is None
    gone = weakref.ref(ins[0]), weakref.ref(ins[1])
    del a.args[:2], ins
    gc.collect()
    assert gone[0]() is None and gone[1]() is None  # the rebuild keeps no tensor of the call it was made for
    assert a.rebuild(ins2, out2)[0].base is ins2[0]
