"""Every call form of ../shared/context/engine-call-sites.md (vLLM 0.34 and 0.33, SGLang 0.5.23, the older vLLM forms
and DeepGEMM 54e2261's tests), replayed with the views, strides and positionals the engines pass, judged as each caller
reads the result: against the float64 reference (tests/reference64.py), exact -inf where the caller relies on it,
compressed spans read where the caller reads them. Also: the positional rule that tells the DeepGEMM
generations apart (mqa_cli.api.forms) and its refusals, set_num_sms in every grid, fp8_mqa_topk(relative=True)."""
import pytest
import torch

import mqa_cli
from mqa_cli.api import logits as api, sms
from mqa_cli.errors import UserError
from mqa_cli.launch import families as launchers
from mqa_cli.plan import dispatch, targets

from .reference64 import BF16_RTOL, FP32_RTOL, FP8, assert_logits, compress64, fp8_q, fp8_rows, gen, paged64, prefill64
from .test_api_forms import DEVICE, meta, paged_problem, prefill_problem

NEG_INF = float("-inf")


@pytest.fixture(autouse=True)
def _device_sms():
    """Every test starts and ends with set_num_sms's default (the setting is process-wide)."""
    sms.set_num_sms(0)
    yield
    sms.set_num_sms(0)


def one_line(excinfo, *needles):
    msg = str(excinfo.value)
    assert msg and "\n" not in msg.strip(), msg
    for n in needles:
        assert n in msg, msg
    return msg


def windows_from(starts, ends):
    return torch.tensor(starts, dtype=torch.int32), torch.tensor(ends, dtype=torch.int32)


def spans(out: torch.Tensor, ks, ke) -> list:
    """Row i's columns [0, ke - ks) of a compressed result, as vLLM's top_k_per_row_prefill reads them."""
    return [out[i, :int(ke[i] - ks[i])].double().cpu() for i in range(out.shape[0])]


def assert_spans(out, full_ref, full_mag, ks, ke, what="", rtol=FP32_RTOL):
    """Each compressed row's live span equals the full reference's [ks, ke) of that row (rtol * mag)."""
    for i, got in enumerate(spans(out, ks, ke)):
        a, b = int(ks[i]), int(ke[i])
        ref, mag = full_ref[i, a:b], full_mag[i, a:b]
        assert got.shape == ref.shape, f"{what}row {i}: span of {got.numel()} columns, expected {ref.numel()}"
        assert torch.isfinite(got).all(), f"{what}row {i}: non-finite live logits"
        assert ((got - ref).abs() <= rtol * mag + 1e-30).all(), f"{what}row {i}: span differs from the reference"


# ------------------------------------------------------------------------------------------ prefill

def test_vllm_011_prefill_row_slices_n1_scales_clean_default():
    """vLLM v0.11: fp8_mqa_logits(q[s:e], (k_fp8, k_scale [N, 1]), w[s:e], ks, ke) with the default clean_logits,
    then logits.topk, minus ks, out of range -> -1: it needs exact -inf outside each window."""
    big = prefill_problem(S=20, N=40, seed=3)
    s, e = 6, 18
    out = mqa_cli.fp8_mqa_logits(big.q[s:e], (big.kv, big.sc.reshape(-1, 1)), big.w[s:e], big.ks[s:e], big.ke[s:e])
    assert_logits(out, big.ref[s:e], big.mag[s:e], clean=True)
    k = 8
    vals, idx = out.topk(k, dim=1)
    rel = torch.where(torch.isneginf(vals), -1, idx - big.ks[s:e, None])
    live = (big.ke[s:e] - big.ks[s:e]).cpu()
    valid = (rel >= 0).sum(1).cpu()
    assert torch.equal(valid, torch.clamp(live, max=k).to(valid.dtype)), "top-k past a window's end must be -1"


def test_vllm_late_2025_workspace_slices_and_byte_scales():
    """vLLM late 2025: (k_full[:N], s_full[:N].view(f32).flatten()), clean_logits=False; its per-row top-k reads
    each row at out.data_ptr() + row * stride(0)."""
    p = prefill_problem(S=12, N=40, seed=4)
    g = gen(9)
    k_full, _ = fp8_rows(p.N + 30, p.D, g)
    k_full = k_full.to(DEVICE)
    k_full[:p.N] = p.kv
    s_full = torch.randint(0, 255, (p.N + 30, 4), generator=g, dtype=torch.uint8).to(DEVICE)  # raw bytes
    s_full[:p.N] = p.sc.view(torch.uint8).reshape(p.N, 4)
    out = mqa_cli.fp8_mqa_logits(p.q, (k_full[:p.N], s_full[:p.N].view(torch.float32).flatten()), p.w, p.ks, p.ke,
                                 clean_logits=False)
    assert out.storage_offset() == 0 and out.stride(1) == 1 and out.stride(0) % 4 == 0
    rows = torch.empty(0, dtype=out.dtype, device=out.device).set_(out.untyped_storage(), 0, (p.S, p.N),
                                                                   (out.stride(0), 1))
    assert_logits(rows, p.ref, p.mag, clean=False)


def test_sglang_dsa_prefill_in_place_inf_writes():
    """SGLang DSA: fp8_mqa_logits(q, (k, s), w, ks, ke, clean_logits=False); asserts logits.shape[1] == N, writes
    +inf in place at each row's local tokens, then runs its top-k over [ks, ke)."""
    p = prefill_problem(S=12, N=40, seed=5)
    out = mqa_cli.fp8_mqa_logits(p.q, (p.kv, p.sc), p.w, p.ks, p.ke, clean_logits=False)
    assert out.shape[1] == p.N
    ks, ke = p.ks.cpu(), p.ke.cpu()
    local = [(i, j) for i in range(p.S) for j in range(max(int(ks[i]), int(ke[i]) - 2), int(ke[i]))]
    for i, j in local:
        out[i, j] = float("inf")
    want = p.ref.clone()
    for i, j in local:
        want[i, j] = float("inf")
    for i in range(p.S):
        a, b = int(ks[i]), int(ke[i])
        got = out[i, a:b].double().cpu()
        pinned = torch.isposinf(want[i, a:b])
        assert torch.equal(torch.isposinf(got), pinned), f"row {i}: the in-place +inf writes moved or leaked"
        free = ~pinned
        assert ((got[free] - want[i, a:b][free]).abs() <= 2e-3 * p.mag[i, a:b][free] + 1e-30).all(), f"row {i}"
        k = min(4, b - a)
        if k:
            top = torch.topk(got, k).indices + a
            assert {j for (r, j) in local if r == i} <= set(top.tolist()), f"row {i}: top-k missed the +inf tokens"


def test_sglang_q_padded_to_32_heads():
    """SGLang pads q (and the weights) to 32 heads when H < 32: zero heads add nothing."""
    p = prefill_problem(S=8, N=40, H=16, seed=6)
    q32 = torch.zeros(p.S, 32, p.D, dtype=torch.uint8, device=DEVICE).view(FP8)
    q32[:, :p.H] = p.q
    w32 = torch.cat([p.w, torch.randn(p.S, 32 - p.H, generator=gen(1)).to(DEVICE)], dim=1)
    out = mqa_cli.fp8_mqa_logits(q32, (p.kv, p.sc), w32, p.ks, p.ke, clean_logits=False)
    assert_logits(out, p.ref, p.mag, clean=False)


def test_sglang_v4_prefill_compressed_rounded_width_and_empty_rows():
    """SGLang V4: fp8_mqa_logits(q[rows], kv, w[rows], ks[rows], ke[rows], clean_logits=False, max_seqlen_k=M);
    ks = 0, rows with ke = ks, M = max(ke - ks) rounded up to 64 (here past N)."""
    g = gen(8)
    S, N, H, D = 16, 40, 16, 64
    q, w, (kv, sc) = fp8_q((S, H, D), g), torch.randn(S, H, generator=g), fp8_rows(N, D, g)
    ks = torch.zeros(S, dtype=torch.int32)
    ke = torch.randint(1, N + 1, (S,), generator=g, dtype=torch.int32)
    ke[::5] = 0  # empty rows
    ref, mag = prefill64(q, kv, sc, w, ks, ke)
    rows = torch.tensor([1, 2, 3, 5, 8, 10, 11, 15])  # a gather: copies, as q[rows] makes
    M = -(-int((ke[rows] - ks[rows]).max()) // 64) * 64
    d = {k: v.to(DEVICE) for k, v in dict(q=q, w=w, kv=kv, sc=sc, ks=ks, ke=ke).items()}
    r = rows.to(DEVICE)
    out = mqa_cli.fp8_mqa_logits(d["q"][r], (d["kv"], d["sc"]), d["w"][r], d["ks"][r], d["ke"][r], clean_logits=False,
                                 max_seqlen_k=M)
    assert tuple(out.shape) == (rows.numel(), M) and M > N
    assert_logits(out, *compress64(ref[rows], mag[rows], ks[rows], ke[rows], M), clean=False)
    assert_spans(out, ref[rows], mag[rows], ks[rows], ke[rows])


@pytest.mark.parametrize("compressed,clean,dtype", [(False, True, torch.float32), (True, False, torch.float32),
                                                    (False, True, torch.bfloat16), (True, False, torch.bfloat16)])
def test_deepgemm_tests_prefill_all_keywords(compressed, clean, dtype):
    """DeepGEMM 54e2261's test_mqa_logits: every argument by keyword (0.2.5's schedule_meta too, as vLLM 0.33 passes
    it); compressed spans compared after scattering back to [ks, ke), exact -inf when clean, repeat calls bitwise
    equal."""
    p = prefill_problem(S=12, N=40, seed=10)
    kwargs = dict(q=(p.q, None), kv=(p.kv, p.sc), weights=p.w, cu_seq_len_k_start=p.ks, cu_seq_len_k_end=p.ke,
                  clean_logits=clean, max_seqlen_k=int((p.ke - p.ks).max()) if compressed else 0, logits_dtype=dtype,
                  schedule_meta=None)
    out = mqa_cli.fp8_fp4_mqa_logits(**kwargs)
    if compressed:
        mask = torch.arange(out.shape[1], device=out.device)[None, :] < (p.ke - p.ks)[:, None]
        full = torch.full((p.S, p.N), NEG_INF, dtype=dtype, device=out.device)
        for i in range(p.S):
            full[i, int(p.ks[i]):int(p.ke[i])] = out[i, :int(p.ke[i] - p.ks[i])]
        again = [mqa_cli.fp8_fp4_mqa_logits(**kwargs).masked_fill(~mask, 0) for _ in range(3)]
        first = out.masked_fill(~mask, 0)
    else:
        full = out
        again = [mqa_cli.fp8_fp4_mqa_logits(**kwargs) for _ in range(3)]
        first = out
    assert_logits(full, p.ref, p.mag, clean=True, dtype=dtype)
    assert all(torch.equal(a, first) for a in again), "repeat calls must be bitwise equal"


# ------------------------------------------------------------------------------------------ paged

def layer_view(cache: torch.Tensor, layers: int = 3, layer: int = 1) -> torch.Tensor:
    """The cache as one layer of a buffer that interleaves the layers' pages (block stride = layers x block)."""
    nb, bs, _, row = cache.shape
    buf = torch.randint(0, 256, (nb, layers, bs * row), generator=gen(31), dtype=torch.uint8).to(cache.device)
    buf[:, layer] = cache.reshape(nb, bs * row)
    view = buf[:, layer].view(nb, bs, 1, row)
    assert view.stride(0) == layers * bs * row
    return view


def persistent_table(table: torch.Tensor, nb: int, extra_rows: int = 3, extra_cols: int = 5) -> torch.Tensor:
    """A persistent block table (valid but stale ids around the live rows) whose first rows are `table`."""
    B, cols = table.shape
    buf = torch.randint(0, nb, (B + extra_rows, cols + extra_cols), generator=gen(32), dtype=torch.int32)
    buf = buf.to(table.device)
    buf[:B, :cols] = table
    return buf


def paged_ref(p, max_model_len: int):
    return paged64(p.q.cpu(), p.kv_blocks, p.scales, p.w.cpu(), p.ends, p.table.cpu(), max_model_len)


def test_sglang_paged_eight_positionals_one_token_per_request():
    """SGLang: fp8_paged_mqa_logits(q, kv, w, ctx, bt, meta, max_len, False) with q [T, 1, H, D], ctx [T, 1]."""
    p = paged_problem(B=5, T=1, ctx=[[33], [1], [0], [48], [20]], seed=50)
    m = mqa_cli.get_paged_mqa_logits_metadata(p.ctx, p.bs, mqa_cli.get_num_sms())
    out = mqa_cli.fp8_paged_mqa_logits(p.q, p.cache, p.w, p.ctx, p.table, m, p.max_context_len, False)
    assert_logits(out, p.ref, p.mag, clean=False)


def test_sglang_paged_draft_rows_strided_table_and_batch_chunks():
    """SGLang: q [B, n, H, D] with ctx [B, n] and bt[::n] (its table has a row per token); batches above the SM
    count in chunks, each with its own metadata, then torch.cat."""
    n = 2
    p = paged_problem(B=5, T=n, ctx=[[10, 11], [40, 41], [0, 1], [3, 4], [25, 26]], seed=51)
    per_token = p.table.repeat_interleave(n, dim=0)
    bt = per_token[::n]
    assert bt.stride(0) == n * p.table.shape[1]
    parts = []
    for b0, b1 in ((0, 2), (2, 4), (4, 5)):
        ctx = p.ctx[b0:b1]
        m = mqa_cli.get_paged_mqa_logits_metadata(ctx, p.bs, mqa_cli.get_num_sms())
        parts.append(mqa_cli.fp8_paged_mqa_logits(p.q[b0:b1], p.cache, p.w[b0 * n:b1 * n], ctx, bt[b0:b1], m,
                                                  p.max_context_len, False))
    out = torch.cat(parts)
    assert_logits(out, p.ref, p.mag, clean=False)


@pytest.mark.parametrize("clean", [True, False], ids=["v0.11", "late-2025"])
def test_vllm_011_decode_1d_lens(clean):
    """vLLM v0.11: fp8_paged_mqa_logits(q [B, n, H, D], kv.unsqueeze(-2), w[:B*n], seq_lens [B], bt[:B], sched,
    max_model_len, clean_logits=True); stale table entries; its top-k marks past-end picks -1 (exact -inf).
    vLLM late 2025: the same with clean_logits=False, its top-k reading each row up to its length."""
    B, n = 3, 2
    p = paged_problem(B=B, T=n, ctx=(37, 2, 20), seed=52)
    w_buf = torch.cat([p.w, torch.full((4, p.H), 1e4, device=DEVICE)])
    kv = p.cache.reshape(p.nb, p.bs, p.D + 4)
    bt = persistent_table(p.table, p.nb)[:B]
    max_model_len = p.max_context_len + 16
    ref, mag = paged_ref(p, max_model_len)
    sched = mqa_cli.get_paged_mqa_logits_metadata(p.ctx, p.bs, mqa_cli.get_num_sms())
    out = mqa_cli.fp8_paged_mqa_logits(p.q, kv.unsqueeze(-2), w_buf[:B * n], p.ctx, bt, sched, max_model_len,
                                       clean_logits=clean)
    assert_logits(out, ref, mag, clean=clean)
    if not clean:
        return
    k = 8
    vals, idx = out.topk(k, dim=1)
    picks = torch.where(torch.isneginf(vals), -1, idx)
    live = p.ends.reshape(-1)
    assert torch.equal((picks >= 0).sum(1).cpu(), torch.clamp(live, max=k)), "past-end picks must be -1"


@pytest.mark.parametrize("clean,dtype,bs", [(True, torch.float32, 64), (False, torch.bfloat16, 32)])
def test_deepgemm_tests_paged_all_keywords(clean, dtype, bs):
    """DeepGEMM 54e2261's test_paged_mqa_logits: every argument by keyword, random non-monotone 2-D context lens
    (0 allowed) with the last equal to the sequence's length, metadata with indices=None."""
    g = gen(60)
    B, n = 3, 2
    lens = torch.tensor([50, 9, 70])
    ctx = ((lens[:, None] + 1) * torch.rand(B, n, generator=g)).int()
    ctx[:, -1] = lens
    ctx[1, 0] = 0
    p = paged_problem(B=B, T=n, bs=bs, ctx=ctx.tolist(), seed=61)
    kwargs = dict(q=(p.q, None), kv_cache=p.cache, weights=p.w, context_lens=p.ctx, block_table=p.table,
                  schedule_meta=mqa_cli.get_paged_mqa_logits_metadata(p.ctx, bs, mqa_cli.get_num_sms(), indices=None),
                  max_context_len=p.max_context_len, clean_logits=clean, logits_dtype=dtype, indices=None)
    out = mqa_cli.fp8_fp4_paged_mqa_logits(**kwargs)
    assert_logits(out, p.ref, p.mag, clean=clean, dtype=dtype)
    live = torch.isfinite(p.ref).to(out.device)
    first = out.masked_fill(~live, 0)
    assert torch.equal(mqa_cli.fp8_fp4_paged_mqa_logits(**kwargs).masked_fill(~live, 0), first)


# ------------------------------------------------------------------------------------------ vLLM 0.34

DTYPES = pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])

# vLLM 0.33's prefill call (six positionals: max_seqlen_k an int) and DeepGEMM 0.2.5's seventh, schedule_meta (None or
# a tensor, accepted and not read); vLLM 0.34's (logits_dtype= always), and the same call to its DeepGEMM 2.8.1 with
# the dtype by position: (q, kv, weights, ks, ke, max_seqlen_k, logits_dtype, schedule_meta)
VLLM_PREFILL = {
    "six positionals": lambda fn, args, dtype, sched: fn(*args),
    "None 7th": lambda fn, args, dtype, sched: fn(*args, None),
    "schedule 7th": lambda fn, args, dtype, sched: fn(*args, sched),
    "logits_dtype=": lambda fn, args, dtype, sched: fn(*args, logits_dtype=dtype),
    "dtype 7th": lambda fn, args, dtype, sched: fn(*args, dtype),
    "dtype 7th, schedule 8th": lambda fn, args, dtype, sched: fn(*args, dtype, sched),
    "dtype 7th, None 8th": lambda fn, args, dtype, sched: fn(*args, dtype, None),
    "dtype 7th, schedule_meta=": lambda fn, args, dtype, sched: fn(*args, dtype, schedule_meta=sched),
}


@DTYPES
def test_vllm_033_and_034_prefill_row_slices(dtype):
    """vLLM 0.33: fp8_fp4_mqa_logits((q[r0:r1], None), (k_ws[:N], s_ws[:N]), w[r0:r1], ks, ke, max_seqlen_k), the
    sixth positional an int (the chunk's longest window, not aligned). vLLM 0.34: the same with logits_dtype=..., the
    rows of a chunk split again against one kv (row slices of row slices). Each reads each row through
    as_fp32_logits(logits, ke - ks): columns [0, ke - ks), row stride kept (its top-k checks stride(0) * itemsize %
    16 == 0). The same call with the dtype by position, as its vendored DeepGEMM 2.8.1 orders them, binds alike; so
    does the legacy name."""
    g = gen(23)
    S, N, H, D = 24, 48, 16, 64
    q, w = fp8_q((S, H, D), g), torch.randn(S, H, generator=g)
    k_ws, s_ws = fp8_rows(N + 16, D, g)  # a workspace bigger than this chunk's kv
    ks = torch.randint(0, N // 2, (S,), generator=g, dtype=torch.int32) + 1  # every window starts past column 0
    ke = torch.minimum(ks + torch.randint(0, 23, (S,), generator=g, dtype=torch.int32), torch.tensor(N))
    ks[9] = ke[9] = 11  # an empty window
    ref, mag = prefill64(q, k_ws[:N], s_ws[:N], w, ks, ke)
    qd, wd, kd, sd, ksd, ked = (x.to(DEVICE) for x in (q, w, k_ws, s_ws, ks, ke))
    c0, c1 = 2, 21  # the chunk
    width = int((ke[c0:c1] - ks[c0:c1]).max())
    assert width % 8 != 0  # not aligned, as vLLM passes it
    sched = torch.zeros(5, 2, dtype=torch.int32, device=DEVICE)
    for a, b, forms in ((0, 8, VLLM_PREFILL), (8, 19, {"logits_dtype=": VLLM_PREFILL["logits_dtype="]})):
        def rows(x):
            return x[c0:c1][a:b]
        lo, hi = c0 + a, c0 + b
        args = ((rows(qd), None), (kd[:N], sd[:N]), rows(wd), rows(ksd), rows(ked), width)
        assert rows(ksd).storage_offset() == lo
        for form, call in forms.items():
            what = f"{form}, rows [{lo}, {hi}): "
            out = call(mqa_cli.fp8_fp4_mqa_logits, args, dtype, sched)
            want = dtype if "dtype" in form else torch.float32
            assert out.dtype == want and tuple(out.shape) == (b - a, width), f"{what}{out.dtype} {tuple(out.shape)}"
            assert out.stride(0) * out.element_size() % 16 == 0, f"{what}row stride {out.stride(0)}"
            assert_spans(out, ref[lo:hi], mag[lo:hi], ks[lo:hi], ke[lo:hi], what,
                         rtol=BF16_RTOL if want == torch.bfloat16 else FP32_RTOL)
    legacy = mqa_cli.fp8_mqa_logits(qd[c0:c1], (kd[:N], sd[:N]), wd[c0:c1], ksd[c0:c1], ked[c0:c1], width, dtype,
                                    schedule_meta=sched)
    assert legacy.dtype == dtype
    assert_spans(legacy, ref[c0:c1], mag[c0:c1], ks[c0:c1], ke[c0:c1], "legacy name: ",
                 rtol=BF16_RTOL if dtype == torch.bfloat16 else FP32_RTOL)


# vLLM 0.33's paged call (seven positionals) and DeepGEMM 0.2.5's eighth, indices=None; vLLM 0.34's (logits_dtype=),
# and the same call to its DeepGEMM 2.8.1 with the dtype by position:
# (q, kv_cache, weights, ctx, bt, schedule_meta, max_context_len, logits_dtype, indices)
VLLM_PAGED = {
    "seven positionals": lambda fn, args, dtype: fn(*args),
    "None 8th": lambda fn, args, dtype: fn(*args, None),
    "logits_dtype=": lambda fn, args, dtype: fn(*args, logits_dtype=dtype),
    "dtype 8th": lambda fn, args, dtype: fn(*args, dtype),
    "dtype 8th, None 9th": lambda fn, args, dtype: fn(*args, dtype, None),
    "dtype 8th, indices=None": lambda fn, args, dtype: fn(*args, dtype, indices=None),
}


@pytest.mark.parametrize("dtype,next_n,ctx", [(torch.float32, 1, [[130], [0], [64], [17]]),
                                              (torch.float32, 2, [[70, 71], [0, 0], [1, 2], [128, 129]]),
                                              (torch.bfloat16, 4, [[30, 31, 32, 33], [0, 0, 0, 0],
                                                                   [100, 101, 102, 103], [5, 6, 7, 8]])],
                         ids=["fp32-n1", "fp32-n2", "bf16-n4"])
def test_vllm_033_and_034_paged_positionals(dtype, next_n, ctx):
    """vLLM 0.33: fp8_fp4_paged_mqa_logits((q [B, n, H, D], None), kv_cache, w, ctx, bt, sched, max_model_len): ctx
    2-D with zero padding rows, kv_cache uint8 [blocks, 64, 1, 132] as one layer of an interleaved buffer, bt the
    first rows of a persistent table, sched the metadata copied into the first rows of a fixed buffer (num_sms // 2
    programs at next_n 4, as 2.8.1 runs it on sm90); DeepGEMM 0.2.5's eighth positional, indices, None. vLLM 0.34:
    the same with logits_dtype=... from its DSA indexer and the new models' (fp32, or bf16 where the user asks for it
    on sm90); its decode top-k reads each row's [0, ctx) directly in that dtype, stride(0) * itemsize % 16 == 0. The
    same call with the dtype eighth (then indices ninth), as its vendored DeepGEMM 2.8.1 orders them, binds alike."""
    sms.set_num_sms(4)  # vLLM's micro-batching sets it; on the CPU it also gives next_n 4 two programs
    p = paged_problem(B=4, T=next_n, H=16, D=128, bs=64, ctx=ctx, seed=40 + next_n)
    max_model_len = 320
    ref, mag = paged_ref(p, max_model_len)
    kv_cache, bt = layer_view(p.cache), persistent_table(p.table, p.nb)[:p.B]
    assert tuple(kv_cache.shape[1:]) == (64, 1, 132) and kv_cache.dtype == torch.uint8
    n = mqa_cli.get_num_sms()
    slots = n // 2 if next_n == 4 else n
    sched_buf = torch.full((n + 1, 2), 7777, dtype=torch.int32, device=DEVICE)
    sched_buf[:slots + 1].copy_(mqa_cli.get_paged_mqa_logits_metadata(p.ctx, 64, slots))
    args = ((p.q, None), kv_cache, p.w, p.ctx, bt, sched_buf[:slots + 1], max_model_len)
    for form, call in VLLM_PAGED.items():
        out = call(mqa_cli.fp8_fp4_paged_mqa_logits, args, dtype)
        want = torch.float32 if form in ("seven positionals", "None 8th") else dtype
        assert out.dtype == want and tuple(out.shape) == (p.B * next_n, max_model_len), f"{form}: {out.dtype}"
        assert out.stride(0) * out.element_size() % 16 == 0, f"{form}: row stride {out.stride(0)}"
        assert_logits(out, ref, mag, clean=False, dtype=want, what=f"{form}: ")
    legacy = mqa_cli.fp8_paged_mqa_logits(p.q, kv_cache, p.w, p.ctx, bt, sched_buf[:slots + 1], max_model_len, dtype)
    assert_logits(legacy, ref, mag, clean=False, dtype=dtype, what="legacy name: ")


def test_positionals_that_fit_no_generation_are_refused():
    """A sixth prefill positional that is no generation's (neither clean_logits nor max_seqlen_k), 0.2.5's form with
    a count for schedule_meta, an eighth paged positional that is a tensor of indices (varlen, sm100) or an int, and
    what the dtype-by-position rule leaves ambiguous or wrong: each refused in one line; a dtype where no
    generation puts one is too."""
    p = prefill_problem(S=4, N=16, H=8)
    q, kv = (p.q, None), (p.kv, p.sc)
    sched = torch.zeros(3, 2, dtype=torch.int32, device=DEVICE)
    bf16, f32 = torch.bfloat16, torch.float32
    cases = [(lambda fn=fn, fq=fq, sixth=sixth: fn(fq, kv, p.w, p.ks, p.ke, sixth), ("clean_logits", "max_seqlen_k"))
             for sixth in (0, 5.7, -3, None, "40")
             for fn, fq in ((mqa_cli.fp8_mqa_logits, p.q), (mqa_cli.fp8_fp4_mqa_logits, (p.q, None)))]
    cases += [
        (lambda: mqa_cli.fp8_fp4_mqa_logits(q, kv, p.w, p.ks, p.ke, 16, 16), ("schedule_meta",)),
        (lambda: mqa_cli.fp8_mqa_logits(p.q, kv, p.w, p.ks, p.ke, False, True), ("max_seqlen_k",)),
        (lambda: mqa_cli.fp8_mqa_logits(p.q, kv, p.w, p.ks, p.ke, schedule_meta=3), ("schedule_meta",)),
        (lambda: mqa_cli.fp8_fp4_mqa_logits(q, kv, p.w, p.ks, p.ke, 16, bf16, 5), ("schedule_meta", "vLLM 0.34")),
        (lambda: mqa_cli.fp8_fp4_mqa_logits(q, kv, p.w, p.ks, p.ke, 16, f32, bf16), ("logits_dtype given twice",)),
        (lambda: mqa_cli.fp8_fp4_mqa_logits(q, kv, p.w, p.ks, p.ke, 16, bf16, logits_dtype=bf16),
         ("logits_dtype given twice",)),
        (lambda: mqa_cli.fp8_fp4_mqa_logits(q, kv, p.w, p.ks, p.ke, 16, bf16, sched, schedule_meta=sched),
         ("schedule_meta given twice",)),
        (lambda: mqa_cli.fp8_mqa_logits(p.q, kv, p.w, p.ks, p.ke, False, bf16), ("max_seqlen_k", "sixth")),
        (lambda: mqa_cli.fp8_fp4_mqa_logits(q, kv, p.w, p.ks, p.ke, bf16), ("clean_logits", "max_seqlen_k")),
        (lambda: mqa_cli.fp8_fp4_mqa_logits(q, kv, p.w, p.ks, p.ke, 16, torch.float16), ("logits_dtype",)),
        (lambda: mqa_cli.fp8_fp4_mqa_logits(q, kv, p.w, p.ks, p.ke, 16, 3.5), ("schedule_meta", "logits_dtype")),
    ]
    d = paged_problem(B=2, T=1, ctx=[[20], [5]])
    m = meta(d.ctx, d.bs)
    head = ((d.q, None), d.cache, d.w, d.ctx, d.table, m, d.max_context_len)
    idx = torch.zeros(d.B, dtype=torch.int32, device=DEVICE)
    cases += [
        (lambda: mqa_cli.fp8_fp4_paged_mqa_logits(*head, idx), ("indices", "sm100")),
        (lambda: mqa_cli.fp8_paged_mqa_logits(d.q, *head[1:], indices=idx), ("indices", "sm100")),
        (lambda: mqa_cli.fp8_paged_mqa_logits(d.q, *head[1:], 1), ("clean_logits", "indices")),
        (lambda: mqa_cli.fp8_fp4_paged_mqa_logits(*head, bf16, idx), ("indices", "sm100")),
        (lambda: mqa_cli.fp8_fp4_paged_mqa_logits(*head, bf16, indices=idx), ("indices", "sm100")),
        (lambda: mqa_cli.fp8_fp4_paged_mqa_logits(*head, f32, bf16), ("logits_dtype given twice",)),
        (lambda: mqa_cli.fp8_fp4_paged_mqa_logits(*head, bf16, logits_dtype=bf16), ("logits_dtype given twice",)),
        (lambda: mqa_cli.fp8_fp4_paged_mqa_logits(*head, bf16, 3), ("indices", "vLLM 0.34")),
        (lambda: mqa_cli.fp8_fp4_paged_mqa_logits(*head, torch.float16), ("logits_dtype",)),
        (lambda: mqa_cli.fp8_fp4_paged_mqa_logits(*head, "bf16"), ("clean_logits", "indices", "logits_dtype")),
    ]
    for call, needles in cases:
        with pytest.raises(UserError) as e:
            call()
        one_line(e, *needles)


def test_vllm_034_positional_dtype_beside_a_float32_keyword_is_the_positional():
    """logits_dtype=torch.float32 by keyword cannot be told from the parameter's default, so a dtype by position
    beside it is what the call gets (mqa_cli.api.forms says so)."""
    p = prefill_problem(S=6, N=24, H=8, seed=24)
    width = int((p.ke - p.ks).max())
    out = mqa_cli.fp8_fp4_mqa_logits((p.q, None), (p.kv, p.sc), p.w, p.ks, p.ke, width, torch.bfloat16,
                                     logits_dtype=torch.float32)
    assert out.dtype == torch.bfloat16
    assert_spans(out, p.ref, p.mag, p.ks.cpu(), p.ke.cpu(), rtol=BF16_RTOL)


# ------------------------------------------------------------------------------------------ fp4 / MX refusals

def test_mx_and_fp4_inputs_are_named_not_misread():
    """sm100's inputs (UE8M0 packed scales, bf16 weights of the MX path, packed fp4 q or kv, an fp8 q with a scale)
    are refused in one line that names them, prefill and decode, never read as fp8."""
    p, pg = prefill_problem(S=4, N=16, H=8), paged_problem(B=2, T=1, ctx=[[20], [5]])
    i32, u8 = dict(dtype=torch.int32, device=DEVICE), dict(dtype=torch.uint8, device=DEVICE)
    kv4 = torch.zeros(p.N, p.D // 2, **u8)
    fp4 = getattr(torch, "float4_e2m1fn_x2", torch.uint8)

    def prefill(q, kv, *rest, w=p.w):
        return mqa_cli.fp8_fp4_mqa_logits(q, kv, w, p.ks, p.ke, *rest)

    def paged(q, cache=pg.cache, w=pg.w):
        return mqa_cli.fp8_fp4_paged_mqa_logits(q, cache, w, pg.ctx, pg.table, meta(pg.ctx, pg.bs), pg.max_context_len)

    cases = {
        "UE8M0 kv scales": (lambda: prefill((p.q, None), (p.kv, torch.ones(p.N, **i32)), 8), "MX"),
        "bf16 weights": (lambda: mqa_cli.fp8_mqa_logits(p.q, (p.kv, p.sc), p.w.bfloat16(), p.ks, p.ke,
                                                        clean_logits=False), "MX"),
        "int q scale": (lambda: prefill((p.q, torch.ones(p.S, p.H, **i32)), (p.kv, p.sc), 8), "fp4"),
        "packed q": (lambda: prefill((torch.zeros(p.S, p.H, p.D // 2, **u8), torch.ones(p.S, p.H, **i32)),
                                     (p.kv, p.sc)), "fp4"),
        "fp8 q with a scale": (lambda: prefill((p.q, torch.ones(p.S, p.H, device=DEVICE)), (p.kv, p.sc)), "fp4"),
        "packed kv": (lambda: prefill((p.q, None), (kv4, torch.ones(p.N, **i32))), "fp4"),
        "float4 kv": (lambda: prefill((p.q, None), (kv4.view(fp4), torch.ones(p.N, **i32))), "fp4"),
        "decode bf16 weights": (lambda: paged((pg.q, None), w=pg.w.bfloat16()), "MX"),
        "decode packed q": (lambda: paged((torch.zeros(pg.B, 1, pg.H, pg.D // 2, **u8),
                                           torch.ones(pg.B, 1, pg.H, **i32))), "fp4"),
        "decode packed cache": (lambda: paged((pg.q, None), torch.zeros(pg.nb, pg.bs, 1, pg.D // 2 + 4, **u8)),
                                "fp4"),
    }
    for call, word in cases.values():
        with pytest.raises(UserError) as e:
            call()
        one_line(e, word, "sm100")


# ------------------------------------------------------------------------------------------ aiter (ROCm engines)

def test_aiter_form_kv_and_scales_apart():
    """vLLM on ROCm calls aiter's fp8_mqa_logits(q, k, s, w, ks, ke, clean_logits=False)."""
    from mqa_cli import aiter

    p = prefill_problem(S=10, N=40, seed=70)
    out = aiter.fp8_mqa_logits(p.q, p.kv, p.sc, p.w, p.ks, p.ke, clean_logits=False)
    assert_logits(out, p.ref, p.mag, clean=False)
    clean = aiter.fp8_mqa_logits(Q=p.q, KV=p.kv, kv_scales=p.sc, weights=p.w, cu_starts=p.ks, cu_ends=p.ke)
    assert_logits(clean, p.ref, p.mag, clean=True)  # aiter's default cleans
    with pytest.raises(UserError) as e:
        aiter.fp8_mqa_logits(p.q, p.kv, p.sc, p.w, p.ks, p.ke, 40)
    one_line(e, "clean_logits")


# ------------------------------------------------------------------------------------------ set_num_sms

def test_set_num_sms_get_and_refusals():
    base = mqa_cli.get_num_sms()
    assert isinstance(base, int) and not isinstance(base, bool) and base >= 1
    mqa_cli.set_num_sms(3)
    assert mqa_cli.get_num_sms() == 3
    mqa_cli.set_num_sms(0)  # DeepGEMM's 0: the device's count again
    assert mqa_cli.get_num_sms() == base
    for bad in (-1, 2.0, True, None):
        with pytest.raises(UserError) as e:
            mqa_cli.set_num_sms(bad)
        one_line(e, "num_sms")


def _grids(monkeypatch) -> list:
    seen = []
    real = launchers.launch_config

    def spy(*a, **kw):
        launched = real(*a, **kw)
        seen.append(tuple(launched.args.grid))
        return launched

    monkeypatch.setattr(api.launchers, "launch_config", spy)
    return seen


def test_paged_grid_follows_set_num_sms_on_the_next_call(monkeypatch):
    """Without schedule_meta the decode kernel's ranges are the SM count: a change takes effect on the next call
    (the plan cache keys on it), and the logits stay right."""
    seen = _grids(monkeypatch)
    p = paged_problem(B=3, T=2, ctx=(37, 2, 20), seed=80)
    for n in (3, 5):
        mqa_cli.set_num_sms(n)
        out = mqa_cli.fp8_paged_mqa_logits(p.q, p.cache, p.w, p.ctx, p.table, None, p.max_context_len, True)
        assert_logits(out, p.ref, p.mag, clean=True)
    subs = api._PLANS[next(k for k in api._PLANS if k[0] == "paged" and k[-1] == 5)].constexprs["SUBS"]
    assert seen[-2:] == [(3 * subs,), (5 * subs,)], seen


def test_prefill_kv_splits_follow_set_num_sms(monkeypatch):
    """The tiled prefill sizes its kv splits to fill the SMs it may use."""
    seen = _grids(monkeypatch)
    g = gen(81)
    S, N, H, D = 4, 256, 16, 64
    q, w, (kv, sc) = fp8_q((S, H, D), g), torch.randn(S, H, generator=g), fp8_rows(N, D, g)
    ks, ke = windows_from([0, 10, 0, 100], [256, 200, 64, 101])
    ref, mag = prefill64(q, kv, sc, w, ks, ke)
    d = [x.to(DEVICE) for x in (q, kv, sc, w, ks, ke)]
    for n in (1, 8):
        mqa_cli.set_num_sms(n)
        assert_logits(mqa_cli.mqa_logits(*d), ref, mag, clean=True)
    assert seen[-2][1] < seen[-1][1], seen


def test_gpu_plans_take_their_program_count_from_set_num_sms(monkeypatch):
    """The persistent kernels' grids on sm90 (planned here without a GPU): the Gluon prefill, both decode kernels."""
    monkeypatch.setattr(targets, "_DETECTED", targets.TARGETS["sm90"])
    cuda = torch.device("cuda")
    assert api.target_for(cuda).units == 132
    mqa_cli.set_num_sms(66)
    tgt = api.target_for(cuda)
    assert tgt.units == 66 and tgt.name == "sm90"
    prefill = dispatch.plan(dispatch.Shape("prefill", 8192, 8192, 64, 128), tgt)
    decode = dispatch.plan(dispatch.Shape("paged", 64, 8192, 64, 128, False, batch=64, block_size=64), tgt)
    portable = dispatch.plan(dispatch.Shape("paged", 64, 8192, 64, 128, False, batch=64, block_size=64), tgt,
                             kernel="paged")
    for plan in (decode, portable):
        assert plan.config.schedule["programs"] == 66, plan.chosen.row.name
        assert plan.config.grid == (66 * plan.config.schedule["subs"],)
    if prefill.chosen.row.name == "gluon_ws_sm90":
        assert prefill.config.grid[0] <= 66


def test_topk_programs_follow_set_num_sms(monkeypatch):
    """The top-k selection plans with the set SM count (its config's grid is programs per SM x units)."""
    from mqa_cli.api import topk
    from mqa_kernels.topk.config import topk_config

    units = []
    real = topk.topk_config

    def spy(**kw):
        units.append(kw["units"])
        return real(**kw)

    monkeypatch.setattr(topk, "topk_config", spy)
    logits = torch.randn(6, 300, device=DEVICE)
    mqa_cli.set_num_sms(7)
    topk.topk_select(logits, 4)
    assert units[-1] == 7
    a = topk_config(rows=4096, cols=8192, topk=2048, backend="cuda", units=7)
    b = topk_config(rows=4096, cols=8192, topk=2048, backend="cuda", units=14)
    assert a.grid[0] < b.grid[0]


# ------------------------------------------------------------------------------------------ top-k relative to ks

@pytest.mark.parametrize("compressed", [False, True])
def test_topk_relative_to_ks(compressed):
    """fp8_mqa_topk(relative=True): each index minus its row's ks (what vLLM's prefill top-k hands on), -1 padding
    unchanged; the absolute picks are a top-k of the float64 reference."""
    from mqa_cli.api.topk import fp8_mqa_topk, topk_recall

    p = prefill_problem(S=14, N=40, seed=90)
    k = 6
    width = int((p.ke - p.ks).max()) if compressed else 0
    absolute = fp8_mqa_topk(p.q, p.kv, p.sc, p.w, p.ks, p.ke, k, sorted=False, max_seqlen_k=width)
    relative = fp8_mqa_topk(p.q, p.kv, p.sc, p.w, p.ks, p.ke, k, sorted=False, max_seqlen_k=width, relative=True)
    assert torch.equal(relative, torch.where(absolute >= 0, absolute - p.ks[:, None], -1))
    live = (p.ke - p.ks)[:, None]
    assert ((relative == -1) | ((relative >= 0) & (relative < live))).all()
    assert torch.equal((relative >= 0).sum(1), torch.clamp(live[:, 0], max=k).to(torch.int64))
    lo, _ = topk_recall(absolute.cpu(), p.ref, k, p.ks.cpu(), p.ke.cpu())
    assert lo == 1.0
