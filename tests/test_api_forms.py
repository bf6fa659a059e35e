"""The public API contract, as the engines call it: names and real signatures (DeepGEMM 54e2261's), every
input form they pass, a view for each tensor argument (honoured or refused, never misread), compressed
and bf16 logits, and value checks that run only when asked. Results are judged against the independent
float64 reference in tests/reference64.py, or against the same call on contiguous inputs."""
import inspect
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
import torch

import mqa_cli
from mqa_cli import deep_gemm as dg
from mqa_cli.errors import UserError

from .reference64 import (FP8, assert_logits, assert_same, compress64, fp8_q, fp8_rows, gen, inside, pack_blocks,
                          paged64, paged_ends, prefill64)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
EMPTY = inspect.Parameter.empty
# One bf16 ulp, relative: the GPU rounds fp32 to bf16 to nearest (half of this), the Triton interpreter
# truncates (up to all of it).
BF16_ULP = 2.0 ** -7
NAN, INF = float("nan"), float("inf")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ------------------------------------------------------------------------------------------ problems

def mixed_windows(S: int, N: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows cycle through: full, empty at 0, random, empty at N, suffix to N, empty in the middle, causal."""
    ks, ke = torch.zeros(S, dtype=torch.int32), torch.zeros(S, dtype=torch.int32)
    for i in range(S):
        kind = i % 7
        a, b = sorted(int(x) for x in torch.randint(0, N + 1, (2,), generator=g))
        if kind == 0:
            a, b = 0, N
        elif kind == 1:
            a, b = 0, 0
        elif kind == 3:
            a, b = N, N
        elif kind == 4:
            b = N
        elif kind == 5:
            a = b = N // 2
        elif kind == 6:
            a, b = 0, max(1, N - S + i + 1)
        ks[i], ke[i] = a, b
    return ks, ke


def prefill_problem(S=12, N=40, H=16, D=64, seed=0):
    g = gen(seed)
    q = fp8_q((S, H, D), g)
    kv, sc = fp8_rows(N, D, g)
    w = torch.randn(S, H, generator=g)
    ks, ke = mixed_windows(S, N, g)
    ref, mag = prefill64(q, kv, sc, w, ks, ke)
    d = dict(q=q, kv=kv, sc=sc, w=w, ks=ks, ke=ke)
    return SimpleNamespace(**{k: v.to(DEVICE) for k, v in d.items()}, ref=ref, mag=mag, S=S, N=N, H=H, D=D)


def prefill(p, **kw):
    """DeepGEMM's tuple form on the problem's own (contiguous) tensors."""
    return mqa_cli.fp8_mqa_logits(p.q, (p.kv, p.sc), p.w, p.ks, p.ke, **kw)


def paged_problem(B=3, T=2, H=16, D=64, bs=16, ctx=(37, 2, 20), seed=0, spare=3, extra_cols=1, extra_len=None):
    """A paged problem with a shuffled block table; entries past each sequence's blocks are stale but valid ids.
    ctx: B context lengths (1-D) or B lists of next_n (2-D). max_context_len: the table's live blocks, or with
    extra_len the longest row's end plus extra_len (at most the table's reach)."""
    g = gen(seed)
    context_lens = torch.tensor(ctx, dtype=torch.int32)
    ends = paged_ends(context_lens, T)
    need = [-(-int(ends[b].max()) // bs) for b in range(B)]
    cols = max(1, max(need)) + extra_cols
    nb = sum(need) + spare
    perm = torch.randperm(nb, generator=g).to(torch.int32)
    table = torch.randint(0, nb, (B, cols), generator=g, dtype=torch.int32)
    used = 0
    for b, n in enumerate(need):
        table[b, :n] = perm[used:used + n]
        used += n
    kv, sc = fp8_rows(nb * bs, D, g)
    kv_blocks, scales = kv.reshape(nb, bs, D), sc.reshape(nb, bs)
    cache = pack_blocks(kv_blocks, scales).view(nb, bs, 1, D + 4)
    q = fp8_q((B, T, H, D), g)
    w = torch.randn(B * T, H, generator=g)
    max_context_len = max(1, max(need)) * bs
    if extra_len is not None:
        max_context_len = min(cols * bs, max(1, int(ends.max())) + extra_len)
    ref, mag = paged64(q, kv_blocks, scales, w, ends, table, max_context_len)
    d = dict(q=q, cache=cache, w=w, ctx=context_lens, table=table)
    return SimpleNamespace(**{k: v.to(DEVICE) for k, v in d.items()}, kv_blocks=kv_blocks, scales=scales, ends=ends,
                           ref=ref, mag=mag, max_context_len=max_context_len, B=B, T=T, H=H, D=D, bs=bs, nb=nb)


def meta(ctx, bs=64):
    return mqa_cli.get_paged_mqa_logits_metadata(ctx, bs, mqa_cli.get_num_sms())


def paged(p, q=None, cache=None, w=None, ctx=None, table=None, **kw):
    ctx = p.ctx if ctx is None else ctx
    return mqa_cli.fp8_paged_mqa_logits(p.q if q is None else q, p.cache if cache is None else cache,
                                        p.w if w is None else w, ctx, p.table if table is None else table,
                                        meta(ctx, p.bs), p.max_context_len, **kw)


# ------------------------------------------------------------------------------------------ names and signatures

PREFILL_SIG = ("(q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits=True, max_seqlen_k=0, "
              "logits_dtype=torch.float32, schedule_meta=None, *, check_values=False)")  # 0.2.3.post2's schedule last
PAGED_SIG = ("(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits=False, "
             "logits_dtype=torch.float32, indices=None, *, check_values=False)")
SIGNATURES = {  # DeepGEMM's, with check_values keyword-only, last and off; mqa_logits: the project's explicit form
    "fp8_mqa_logits": PREFILL_SIG,
    "fp8_fp4_mqa_logits": PREFILL_SIG,
    "fp8_paged_mqa_logits": PAGED_SIG,
    "fp8_fp4_paged_mqa_logits": PAGED_SIG,
    "get_paged_mqa_logits_metadata": "(context_lens, block_kv, num_sms, indices=None)",
    "get_num_sms": "()",
    "set_num_sms": "(num_sms)",
    "mqa_logits": "(q, kv, kv_scales, weights, ks, ke, *, clean_logits=True, max_seqlen_k=0, "
                  "logits_dtype=torch.float32, check_values=False)",
}


@pytest.mark.parametrize("name", list(SIGNATURES))
def test_top_level_signature_is_deepgemms(name):
    """Real signatures (no *args / **kwargs shim), names, defaults and kinds as written, annotations aside."""
    fn = getattr(mqa_cli, name, None)
    assert callable(fn), f"mqa_cli.{name} is missing at the package top level"
    sig = inspect.signature(fn)
    bare = sig.replace(parameters=[p.replace(annotation=EMPTY) for p in sig.parameters.values()],
                       return_annotation=EMPTY)
    assert str(bare) == SIGNATURES[name]


@pytest.mark.parametrize("two_d", [False, True])
def test_metadata_is_int32_num_sms_plus_one_by_two(two_d):
    ctx = torch.tensor([[5, 7], [0, 0], [64, 130]] if two_d else [7, 0, 130], dtype=torch.int32, device=DEVICE)
    n = mqa_cli.get_num_sms()
    m = mqa_cli.get_paged_mqa_logits_metadata(ctx, 64, n)
    assert m.dtype == torch.int32 and tuple(m.shape) == (n + 1, 2) and m.device == ctx.device
    buf = torch.empty(n + 1, 2, dtype=torch.int32, device=DEVICE)  # vLLM copies it into a fixed buffer
    buf[:] = m
    m2 = mqa_cli.get_paged_mqa_logits_metadata(context_lens=ctx, block_kv=64, num_sms=n, indices=None)
    assert tuple(m2.shape) == (n + 1, 2)


# ------------------------------------------------------------------------------------------ prefill forms

@pytest.mark.parametrize("clean", [True, False])
@pytest.mark.parametrize("extra,dtype", [(0, torch.float32), (5, torch.float32), (2, torch.bfloat16)])
def test_prefill_compressed(clean, extra, dtype):
    """[S, max_seqlen_k] logits whose row i holds the full row's [ks, ke); the same through the tuple form, the
    DeepGEMM name by keyword and mqa_logits' explicit form with its options by keyword."""
    p = prefill_problem()
    width = int((p.ke - p.ks).max()) + extra
    kw = dict(clean_logits=clean, max_seqlen_k=width, logits_dtype=dtype)
    out = prefill(p, **kw)
    ref, mag = compress64(p.ref, p.mag, p.ks.cpu(), p.ke.cpu(), width)
    assert_logits(out, ref, mag, clean=clean, dtype=dtype)
    keywords = mqa_cli.fp8_mqa_logits(q=p.q, kv=(p.kv, p.sc), weights=p.w, cu_seq_len_k_start=p.ks,
                                      cu_seq_len_k_end=p.ke, **kw)
    explicit = mqa_cli.mqa_logits(p.q, p.kv, p.sc.reshape(-1, 1), p.w, p.ks, p.ke, **kw)
    for other in (keywords, explicit):
        assert_same(other, out, live=torch.isfinite(ref).to(out.device))
    full = prefill(p, logits_dtype=dtype)
    assert torch.equal(mqa_cli.fp8_mqa_logits(p.q, p.kv, p.sc, p.w, p.ks, p.ke, logits_dtype=dtype), full)  # explicit
    got = torch.cat([out[i, :int(p.ke[i] - p.ks[i])] for i in range(p.S)])
    want = torch.cat([full[i, int(p.ks[i]):int(p.ke[i])] for i in range(p.S)])
    assert_same(got, want, what="compressed live part vs full[ks:ke]: ")


def test_prefill_compressed_with_windows_past_n_over_two():
    """A ratio-style problem: every window is short but starts anywhere (ks up to N)."""
    g = gen(3)
    S, N, H, D = 16, 64, 32, 64
    q, (kv, sc), w = fp8_q((S, H, D), g), fp8_rows(N, D, g), torch.randn(S, H, generator=g)
    ks = torch.randint(0, N + 1, (S,), generator=g, dtype=torch.int32)
    ke = torch.minimum(ks + torch.randint(0, 9, (S,), generator=g, dtype=torch.int32), torch.tensor(N, dtype=torch.int32))
    ref, mag = prefill64(q, kv, sc, w, ks, ke)
    width = max(1, int((ke - ks).max()))
    out = mqa_cli.fp8_mqa_logits(q.to(DEVICE), (kv.to(DEVICE), sc.to(DEVICE)), w.to(DEVICE), ks.to(DEVICE),
                                 ke.to(DEVICE), max_seqlen_k=width)
    assert_logits(out, *compress64(ref, mag, ks, ke, width), clean=True)


@pytest.mark.parametrize("form", ["prefill", "compressed", "paged", "paged-2d"])
def test_bf16_logits_are_the_fp32_ones_rounded(form):
    if form.startswith("paged"):
        p = paged_problem(B=3, T=2, ctx=[[5, 9], [1, 3], [33, 12]] if form == "paged-2d" else (37, 2, 20))
        ref, mag = p.ref, p.mag
        out, f32 = paged(p, clean_logits=True, logits_dtype=torch.bfloat16), paged(p, clean_logits=True)
    else:
        p = prefill_problem()
        width = int((p.ke - p.ks).max()) if form == "compressed" else 0
        ref, mag = compress64(p.ref, p.mag, p.ks.cpu(), p.ke.cpu(), width) if width else (p.ref, p.mag)
        out, f32 = prefill(p, max_seqlen_k=width, logits_dtype=torch.bfloat16), prefill(p, max_seqlen_k=width)
    assert_logits(out, ref, mag, clean=True, dtype=torch.bfloat16)
    assert torch.equal(torch.isneginf(out), torch.isneginf(f32)), "bf16 -inf pattern differs from fp32's"
    live = torch.isfinite(f32)
    x, y = out[live].double(), f32[live].double()
    assert ((x - y).abs() <= BF16_ULP * y.abs() + 1e-30).all(), "bf16 logits are not fp32 logits rounded to bf16"


WIDEST = -1  # stands for max(ke - ks) + 1 (an odd width for N = 40: 41)


@pytest.mark.parametrize("kw", [dict(), dict(logits_dtype=torch.bfloat16), dict(max_seqlen_k=WIDEST),
                                dict(max_seqlen_k=WIDEST, logits_dtype=torch.bfloat16), dict(clean_logits=False)],
                         ids=["fp32", "bf16", "compressed", "compressed-bf16", "unclean"])
@pytest.mark.parametrize("N", [40, 129])
def test_prefill_output_row_stride_multiple_of_4(kw, N):
    p = prefill_problem(N=N)
    if kw.get("max_seqlen_k") == WIDEST:
        kw = dict(kw, max_seqlen_k=int((p.ke - p.ks).max()) + 1)
    out = prefill(p, **kw)
    assert out.stride(1) == 1 and out.stride(0) % 4 == 0 and out.stride(0) >= out.shape[1], out.stride()
    # padded as DeepGEMM pads: 1024-byte rows (256 fp32 elements, 512 bf16), which one vLLM top-k backend needs
    assert out.stride(0) % 256 == 0 and (out.stride(0) * out.element_size()) % 1024 == 0, out.stride()


def test_prefill_ambiguous_or_unsupported_calls_are_refused():
    """Never a silent misread: a bare kv tensor without its scales, a logits dtype other than fp32/bf16,
    a negative max_seqlen_k; a dtype or shape the kernels do not take, checked on every call (no data read)."""
    p = prefill_problem()
    with pytest.raises((UserError, TypeError)):
        mqa_cli.fp8_mqa_logits(p.q, p.kv, p.w, p.ks, p.ke)
    with pytest.raises(UserError):
        prefill(p, logits_dtype=torch.float16)
    with pytest.raises(UserError):
        prefill(p, max_seqlen_k=-1)
    for change, needle in ((dict(q=p.q.float()), "q must be fp8"),
                           (dict(kv=p.kv[:, :16]), "kv must be"),
                           (dict(w=p.w[:, :3]), "weights must have shape"),
                           (dict(ks=p.ks.long()), "ks must be torch.int32"),
                           (dict(q=p.q[:, :12], w=p.w[:, :12]), "heads must be a power of two")):
        d = dict(vars(p), **change)
        with pytest.raises(UserError, match=needle):
            mqa_cli.mqa_logits(d["q"], d["kv"], d["sc"], d["w"], d["ks"], d["ke"])


def test_paged_unsupported_calls_are_refused():
    p = paged_problem()
    with pytest.raises(UserError):
        paged(p, logits_dtype=torch.float16)
    with pytest.raises(UserError):  # varlen decode (sm100 only in DeepGEMM)
        paged(p, indices=torch.zeros(p.B * p.T, dtype=torch.int32, device=DEVICE))
    with pytest.raises(UserError, match="max_context_len must be an int"):
        mqa_cli.fp8_paged_mqa_logits(p.q, p.cache, p.w, p.ctx, p.table, None, None)


def test_threads_give_the_serial_results():
    """8 threads calling at once, prefill and paged shapes mixed, each result bitwise its serial run's (the CPU
    path's interpreter swaps triton.language process-wide: without one launch at a time, calls failed or mixed)."""
    import threading

    problems = [prefill_problem(S=6 + i, N=24 + 8 * i, H=(8, 16)[i % 2], D=32, seed=i) for i in range(4)] + \
        [paged_problem(B=1 + i % 2, T=1 + i // 2, H=(8, 16)[i % 2], ctx=[9 + 7 * b + 5 * i for b in range(1 + i % 2)],
                       seed=i) for i in range(4)]

    def call(p):
        return prefill(p) if hasattr(p, "ks") else paged(p, clean_logits=True)

    serial = [call(p) for p in problems]
    start, got = threading.Barrier(len(problems)), [None] * len(problems)

    def worker(i):
        start.wait()
        try:
            got[i] = call(problems[i])
        except Exception as e:  # recorded, so the assertion below names it
            got[i] = e

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(problems))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, (a, b) in enumerate(zip(serial, got)):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), (i, b if not isinstance(b, torch.Tensor) else "")


# ------------------------------------------------------------------------------------------ a view per argument

def honoured_or_refused(call, p, what: str):
    """A view is read as the values it holds (clean logits against the reference) or refused in one line."""
    try:
        out = call()
    except UserError as e:
        assert str(e) and "\n" not in str(e).strip(), f"refusal of {what} is not one line: {e}"
        return
    assert_logits(out, p.ref, p.mag, clean=True, what=f"{what}: ")


def _prefill_views(p):
    """(argument, name, build) where build() returns kwargs of the explicit form with one argument replaced by a
    view of the same logical values inside a bigger buffer full of garbage."""
    S, N, H, D, every = p.S, p.N, p.H, p.D, slice(None)
    return [
        ("q", "permuted", lambda: dict(q=p.q.permute(1, 0, 2).contiguous().permute(1, 0, 2))),
        ("q", "dim_padded", lambda: dict(q=inside(p.q, (S, H, D + 16), (..., slice(D)), 0))),
        ("q", "row_step", lambda: dict(q=inside(p.q, (2 * S, H, D), slice(0, None, 2), 0x7E))),
        ("kv", "col_slice", lambda: dict(kv=inside(p.kv, (N, 2 * D), (every, slice(D)), 0x7E))),
        ("kv", "row_step", lambda: dict(kv=inside(p.kv, (2 * N, D), slice(0, None, 2), 0x7E))),
        ("kv", "transposed", lambda: dict(kv=p.kv.t().contiguous().t())),
        ("kv_scales", "strided", lambda: dict(sc=inside(p.sc, (N, 2), (every, 0), 1000.0))),
        ("kv_scales", "n1_of_wider", lambda: dict(sc=inside(p.sc[:, None], (N, 3), (every, slice(1)), 1000.0))),
        ("weights", "col_slice", lambda: dict(w=inside(p.w, (S, 2 * H), (every, slice(H)), 1e4))),
        ("weights", "transposed", lambda: dict(w=p.w.t().contiguous().t())),
        ("weights", "row_step", lambda: dict(w=inside(p.w, (2 * S, H), slice(0, None, 2), 1e4))),
        ("ks", "strided", lambda: dict(ks=inside(p.ks, (S, 2), (every, 0), N))),
        ("ke", "strided", lambda: dict(ke=inside(p.ke, (S, 2), (every, 0), 0))),
        # one [S, 2] tensor of windows, as some callers hold them
        ("ks_ke", "interleaved", lambda: dict(zip(("ks", "ke"), torch.stack([p.ks, p.ke], 1).unbind(1)))),
    ]


PREFILL_VIEW_IDS = [f"{a}-{n}" for a, n, _ in _prefill_views(SimpleNamespace(S=1, N=1, H=1, D=1))]


@pytest.mark.parametrize("form", ["tuple", "explicit"])
@pytest.mark.parametrize("index", range(len(PREFILL_VIEW_IDS)), ids=PREFILL_VIEW_IDS)
def test_prefill_view_is_honoured_or_refused(index, form):
    p = prefill_problem()
    arg, name, build = _prefill_views(p)[index]
    d = dict(q=p.q, kv=p.kv, sc=p.sc, w=p.w, ks=p.ks, ke=p.ke)
    d.update(build())
    for k, v in d.items():  # the view holds the same logical values
        base = getattr(p, k)
        assert torch.equal(v.reshape(base.shape).view(torch.uint8) if v.dtype == FP8 else v.reshape(base.shape),
                           base.view(torch.uint8) if base.dtype == FP8 else base)
    kv = (d["kv"], d["sc"]) if form == "tuple" else d["kv"]
    rest = (d["w"], d["ks"], d["ke"]) if form == "tuple" else (d["sc"], d["w"], d["ks"], d["ke"])
    honoured_or_refused(lambda: mqa_cli.fp8_mqa_logits(d["q"], kv, *rest), p, f"{arg} as a {name} view")


# ------------------------------------------------------------------------------------------ paged forms

@pytest.mark.parametrize("clean", [True, False])
@pytest.mark.parametrize("T,ctx", [(2, (37, 0, 20, 1)), (3, [[5, 9, 40], [0, 0, 0], [17, 3, 0], [64, 64, 64]])],
                         ids=["1d", "2d"])
def test_paged_context_lens_with_zeros(clean, T, ctx):
    """1-D lens with 0 and 1; vLLM main's 2-D lens, 0 for padding rows (all -inf when clean)."""
    p = paged_problem(B=4, T=T, ctx=ctx)
    assert_logits(paged(p, clean_logits=clean), p.ref, p.mag, clean=clean)


@pytest.mark.parametrize("kw", [dict(), dict(logits_dtype=torch.bfloat16), dict(clean_logits=True)],
                         ids=["fp32", "bf16", "clean"])
def test_paged_output_row_stride_multiple_of_4(kw):
    p = paged_problem(B=3, T=2, ctx=(37, 2, 21))
    p.max_context_len = 45  # not a multiple of the block size or of 4
    p.ref, p.mag = p.ref[:, :45], p.mag[:, :45]
    out = paged(p, **kw)
    assert out.shape == (6, 45)
    assert out.stride(1) == 1 and out.stride(0) % 4 == 0, out.stride()
    assert out.stride(0) % 256 == 0 and (out.stride(0) * out.element_size()) % 1024 == 0, out.stride()
    assert_logits(out, p.ref, p.mag, clean=kw.get("clean_logits", False), dtype=kw.get("logits_dtype", torch.float32))


def _paged_views(p):
    B, T, H, D, bs, nb, cols, every = p.B, p.T, p.H, p.D, p.bs, p.nb, p.table.shape[1], slice(None)
    return [
        ("q", "permuted", lambda: dict(q=p.q.permute(1, 0, 2, 3).contiguous().permute(1, 0, 2, 3))),
        ("q", "dim_padded", lambda: dict(q=inside(p.q, (B, T, H, D + 16), (..., slice(D)), 0x7E))),
        # each token's row padded: stride(1) != D + 4, the byte layout differs
        ("kv_cache", "token_padded", lambda: dict(cache=inside(p.cache.reshape(nb, bs, D + 4), (nb, bs, D + 8),
                                                               (..., slice(D + 4)), 0x7E).unsqueeze(2))),
        # blocks padded to a multiple of 4 bytes: block stride > bs * (D + 4)
        ("kv_cache", "block_padded", lambda: dict(cache=inside(p.cache.reshape(nb, -1), (nb, bs * (D + 4) + 12),
                                                               (every, slice(-12)), 0x7E).view(p.cache.shape))),
        ("weights", "col_slice", lambda: dict(w=inside(p.w, (B * T, 2 * H), (every, slice(H)), 1e4))),
        ("weights", "transposed", lambda: dict(w=p.w.t().contiguous().t())),
        ("context_lens", "strided", lambda: dict(ctx=inside(p.ctx, (*p.ctx.shape, 2), (..., 0), 1))),
        # 2-D lens held as [next_n, B]; 1-D: an offset view
        ("context_lens", "transposed", lambda: dict(ctx=p.ctx.t().contiguous().t() if p.ctx.dim() == 2 else
                                                    inside(p.ctx, (2, B), 1, 1))),
        ("block_table", "col_step", lambda: dict(table=inside(p.table, (B, 2 * cols), (every, slice(0, None, 2)), 1))),
        ("block_table", "transposed", lambda: dict(table=p.table.t().contiguous().t())),
        # vLLM main: buf[:r, :c] of a persistent table, stale valid ids around it
        ("block_table", "sub_block", lambda: dict(table=inside(p.table, (B + 4, cols + 7), (slice(B), slice(cols)),
                                                               nb - 1))),
    ]


PAGED_VIEW_IDS = [f"{a}-{n}" for a, n, _ in _paged_views(SimpleNamespace(B=1, T=1, H=1, D=1, bs=1, nb=1,
                                                                          table=torch.zeros(1, 1)))]


@pytest.mark.parametrize("two_d", [False, True], ids=["ctx1d", "ctx2d"])
@pytest.mark.parametrize("index", range(len(PAGED_VIEW_IDS)), ids=PAGED_VIEW_IDS)
def test_paged_view_is_honoured_or_refused(index, two_d):
    ctx = [[5, 9], [1, 3], [33, 12]] if two_d else (37, 2, 20)
    p = paged_problem(B=3, T=2, ctx=ctx)
    arg, name, build = _paged_views(p)[index]
    d = dict(q=p.q, cache=p.cache, w=p.w, ctx=p.ctx, table=p.table)
    d.update(build())
    honoured_or_refused(lambda: paged(p, clean_logits=True, **d), p, f"{arg} as a {name} view")


def test_paged_schedule_meta_view_is_honoured_or_refused():
    p = paged_problem(B=3, T=2, ctx=(37, 2, 20))
    m = meta(p.ctx, p.bs)
    big = torch.stack([m, torch.full_like(m, 12345)], 1).reshape(-1, 2)[::2]
    honoured_or_refused(lambda: mqa_cli.fp8_paged_mqa_logits(p.q, p.cache, p.w, p.ctx, p.table, big,
                                                              p.max_context_len, clean_logits=True), p, "schedule_meta")


# ------------------------------------------------------------------------------------------ value checks

def _set(x: torch.Tensor, at, value) -> torch.Tensor:
    """A copy of x with x[at] = value (an fp8 tensor's: that byte)."""
    x = x.clone()
    (x.view(torch.uint8) if x.dtype == FP8 else x)[at] = value
    return x


def test_value_problems_not_checked_by_default():
    """Without check_values the API reads no tensor data: ks > ke, a NaN scale (explicit form) and a NaN decode
    weight pass, results unspecified (the tuple form's NaN scale: test_nonfinite_inputs_unchecked_as_the_readme_says).
    """
    p, pg = prefill_problem(), paged_problem(B=3, T=2, ctx=(37, 2, 20))
    out = mqa_cli.fp8_mqa_logits(p.q, (p.kv, p.sc), p.w, _set(p.ks, 0, 9), _set(p.ke, 0, 3))
    assert out.shape == (p.S, p.N)
    assert mqa_cli.fp8_mqa_logits(p.q, p.kv, _set(p.sc, 4, NAN), p.w, p.ks, p.ke).shape == (p.S, p.N)
    assert paged(pg, w=_set(pg.w, (0, 0), NAN)).shape == (pg.B * pg.T, pg.max_context_len)


@pytest.mark.parametrize("problem", ["ks > ke", "ke > N", "ks must be >= 0"])
def test_prefill_value_problems_checked_when_asked(problem):
    """Windows reversed or outside [0, N], refused in each form with check_values (a UserError is a ValueError) and
    not read without it (NaN and inf inputs: test_prefill_nonfinite_input_is_refused_when_checked)."""
    p = prefill_problem()
    ks, ke = {"ks > ke": (_set(p.ks, 0, 9), _set(p.ke, 0, 3)), "ke > N": (p.ks, _set(p.ke, 2, p.N + 3)),
              "ks must be >= 0": (_set(p.ks, 2, -1), p.ke)}[problem]
    for call in (lambda **kw: mqa_cli.fp8_mqa_logits(p.q, (p.kv, p.sc), p.w, ks, ke, **kw),
                 lambda **kw: mqa_cli.fp8_fp4_mqa_logits((p.q, None), (p.kv, p.sc), p.w, ks, ke, **kw),
                 lambda **kw: mqa_cli.mqa_logits(p.q, p.kv, p.sc, p.w, ks, ke, **kw)):
        with pytest.raises(ValueError, match=problem):
            call(check_values=True)
    assert issubclass(UserError, ValueError) and call().shape == (p.S, p.N)


def test_prefill_good_inputs_pass_check_values():
    p = prefill_problem()
    out = mqa_cli.fp8_mqa_logits(p.q, (p.kv, p.sc), p.w, p.ks, p.ke, check_values=True)
    assert_logits(out, p.ref, p.mag, clean=True)


def test_env_variable_turns_value_checks_on():
    """MQA_LOGITS_CHECK=1 in the environment is the same as check_values=True (a fresh process, so an
    import-time read of the variable counts too)."""
    script = textwrap.dedent("""
        import torch, mqa_cli
        from mqa_cli.errors import UserError
        q = torch.randn(4, 8, 32).to(torch.float8_e4m3fn)
        kv = torch.randn(16, 32).to(torch.float8_e4m3fn)
        sc, w = torch.ones(16), torch.randn(4, 8)
        ks = torch.tensor([0, 9, 0, 0], dtype=torch.int32)
        ke = torch.tensor([16, 3, 16, 16], dtype=torch.int32)
        try:
            mqa_cli.fp8_mqa_logits(q, (kv, sc), w, ks, ke)
        except UserError:
            print("REFUSED")
        else:
            print("ACCEPTED")
    """)
    env = dict(os.environ, MQA_LOGITS_CHECK="1", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if not torch.cuda.is_available():
        env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)
    assert "REFUSED" in proc.stdout, (proc.stdout, proc.stderr[-2000:])


# ------------------------------------------------------------------------------------------ non-finite inputs

PREFILL_OPS = {  # the engines' names through the deep_gemm stand-in (the same functions), and the project's
    "fp8_mqa_logits": lambda d, **kw: dg.fp8_mqa_logits(d["q"], (d["kv"], d["sc"]), d["w"], d["ks"], d["ke"], **kw),
    "fp8_fp4_mqa_logits": lambda d, **kw: dg.fp8_fp4_mqa_logits((d["q"], None), (d["kv"], d["sc"][:, None]), d["w"],
                                                                d["ks"], d["ke"], **kw),
    "mqa_logits": lambda d, **kw: mqa_cli.mqa_logits(d["q"], d["kv"], d["sc"], d["w"], d["ks"], d["ke"], **kw),
    "fp8_mqa_topk": lambda d, **kw: mqa_cli.fp8_mqa_topk(d["q"], d["kv"], d["sc"], d["w"], d["ks"], d["ke"], 4, **kw),
}
# (argument, its name in the message, position, value: an int is an fp8 byte, what the message calls it)
PREFILL_BAD = [("q", "q", (5, 3, 7), 0x7F, "NaN (fp8 byte 0x7f)"), ("kv", "kv", (9, 2), 0xFF, "NaN (fp8 byte 0xff)"),
               ("sc", "kv_scales", (4,), INF, "inf"), ("w", "weights", (2, 1), NAN, "NaN"),
               ("w", "weights", (0, 3), -INF, "-inf")]


@pytest.mark.parametrize("op", list(PREFILL_OPS))
@pytest.mark.parametrize("arg, name, at, value, words", PREFILL_BAD, ids=lambda v: str(v))
def test_prefill_nonfinite_input_is_refused_when_checked(op, arg, name, at, value, words):
    """With check_values, a NaN or inf in any float input is one line naming the tensor and its first bad position
    (fp8: its NaN bytes, 0x7F / 0xFF; e4m3 has no inf); refused before any launch."""
    p = prefill_problem(S=8, N=24, H=8, D=32)
    with pytest.raises(UserError) as e:
        PREFILL_OPS[op](dict(vars(p), **{arg: _set(getattr(p, arg), at, value)}), check_values=True)
    assert str(e.value) == f"{name} holds {words} at {name}[{', '.join(map(str, at))}]"


PAGED_OPS = {
    "fp8_paged_mqa_logits": lambda p, q, cache, w, **kw: dg.fp8_paged_mqa_logits(
        q, cache, w, p.ctx, p.table, meta(p.ctx, p.bs), p.max_context_len, **kw),
    "fp8_fp4_paged_mqa_logits": lambda p, q, cache, w, **kw: dg.fp8_fp4_paged_mqa_logits(
        (q, None), cache, w, p.ctx, p.table, None, p.max_context_len, **kw),
    "fp8_paged_mqa_topk": lambda p, q, cache, w, **kw: mqa_cli.fp8_paged_mqa_topk(
        q, cache, w, p.ctx, p.table, p.max_context_len, 4, **kw),
}


def _token(p, b: int, token: int) -> tuple:
    """(cache bytes [nb, block bytes] copy, block, slot) of sequence b's token."""
    return p.cache.view(p.nb, -1).clone(), int(p.table[b, token // p.bs]), token % p.bs


@pytest.mark.parametrize("op", list(PAGED_OPS))
@pytest.mark.parametrize("bad", ["q", "weights", "cache fp8", "cache scale"])
def test_paged_nonfinite_input_is_refused_when_checked(op, bad):
    """The same for decode: q, the weights, and in the cache the fp8 values and the scales of the tokens read
    (here sequence 1's last: contexts 37 and 20, next_n 2)."""
    p = paged_problem(B=2, T=2, H=8, ctx=(37, 20))
    q, cache, w = p.q, p.cache, p.w
    raw, blk, slot = _token(p, 1, 19)
    if bad == "q":
        q, expect = _set(q, (1, 0, 2, 5), 0xFF), "q holds NaN (fp8 byte 0xff) at q[1, 0, 2, 5]"
    elif bad == "weights":
        w, expect = _set(w, (3, 4), INF), "weights holds inf at weights[3, 4]"
    elif bad == "cache fp8":
        raw[blk, slot * p.D + 6] = 0x7F
        expect = f"kv_cache holds NaN (fp8 byte 0x7f) at sequence 1, token 19 (block {blk}, slot {slot}, dim 6)"
    else:
        raw[blk, p.bs * p.D:].view(torch.float32)[slot] = -INF
        expect = f"kv_cache holds -inf as a scale at sequence 1, token 19 (block {blk}, slot {slot})"
    with pytest.raises(UserError) as e:
        PAGED_OPS[op](p, q, raw.view_as(cache) if bad.startswith("cache") else cache, w, check_values=True)
    assert str(e.value) == expect


def test_paged_cache_bytes_the_call_does_not_read_are_not_checked():
    """NaN bytes past each sequence's end, in table entries past it and in unreferenced blocks (an engine's free or
    unwritten cache memory) are neither read by the kernel nor refused: checked, the logits are the clean ones."""
    p = paged_problem(B=2, T=2, H=8, ctx=(37, 20))
    clean = paged(p, clean_logits=True)
    raw = p.cache.view(p.nb, -1).clone()
    for b, end in enumerate((37, 20)):
        _, blk, slot = _token(p, b, end)
        raw[blk, slot * p.D:p.bs * p.D] = 0x7F  # the rest of the last block's fp8 values
        raw[blk, p.bs * p.D + 4 * slot:] = 0xFF  # and its scales (NaN as fp32)
    referenced = set(p.table[0, :3].tolist()) | set(p.table[1, :2].tolist())
    raw[[i for i in range(p.nb) if i not in referenced]] = 0xFF
    assert torch.equal(paged(p, cache=raw.view_as(p.cache), clean_logits=True, check_values=True), clean)


@pytest.mark.skipif(DEVICE != "cpu", reason="the CPU path's reading; the card's is tests/gpu/test_concurrency.py's")
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_nonfinite_inputs_unchecked_as_the_readme_says():
    """Unchecked (the hot path reads no data), as README "Non-finite inputs" says of the CPU path: the interpreter
    reads an fp8 NaN byte as a finite +-480 (0x7F / 0xFF), so the logits it touches are finite and wrong; a NaN
    scale makes its column NaN, an inf weight its row non-finite."""
    p = prefill_problem(S=8, N=24, H=8, D=32)
    clean = prefill(p)
    live = torch.isfinite(p.ref)
    for byte, reads_as in ((0x7F, 480.0), (0xFF, -480.0)):
        out = mqa_cli.fp8_mqa_logits(_set(p.q, (0, 2, 5), byte), (p.kv, p.sc), p.w, p.ks, p.ke)
        q = p.q.double()
        q[0, 2, 5] = reads_as
        ref, mag = prefill64(q, p.kv, p.sc, p.w, p.ks, p.ke)
        assert_logits(out, ref, mag, clean=True)
        assert torch.equal(out[1:], clean[1:]) and not torch.equal(out[0], clean[0])
    out = mqa_cli.fp8_mqa_logits(p.q, (p.kv, _set(p.sc, (3,), NAN)), p.w, p.ks, p.ke)
    assert out[:, 3][live[:, 3]].isnan().all() and live[:, 3].any()
    out = mqa_cli.fp8_mqa_logits(p.q, (p.kv, p.sc), _set(p.w, (0, 1), INF), p.ks, p.ke)
    assert not out[0].isfinite().any()
