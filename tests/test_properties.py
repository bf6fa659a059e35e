"""Property tests: random problems through the public API on the interpreter, judged against the independent
float64 reference (tests/reference64.py).

Prefill draws H, D, S, N, per-row windows (empty anywhere, full, random, suffix to N, causal), the call form,
views of every argument the engines pass as views, clean on/off, compressed on/off and bf16 on/off. Paged
draws B, next_n, H, D, block size, 1-D or 2-D context lengths (zeros included), the views engines pass, clean
and bf16. Every example checks the exact -inf pattern (clean), that every live entry is finite, and the error
of each live entry against rtol * (the same sum with |weights|).

Examples are derandomised and no database is kept, so CI sees the same problems on every run. The everyday run
draws 40 prefill and 15 paged problems; the heavy run (`-m heavy`, which CI runs) 220 and 100.
MQA_PROPERTY_SCALE (default 1) multiplies the example counts, for a longer local run. A failure is reported
as found (shrinking one costs minutes of interpreter launches); MQA_PROPERTY_SHRINK=1 shrinks it.
"""
import os

import torch
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

import mqa_cli

from .conftest import HEAVY
from .reference64 import assert_logits, compress64, fp8_q, fp8_rows, gen, inside, prefill64
from .test_api_forms import DEVICE, paged_problem

SCALE = float(os.environ.get("MQA_PROPERTY_SCALE", "1"))
# examples: the everyday run, then the heavy run's (CI runs both)
PREFILL_EXAMPLES = [max(1, int(n * SCALE)) for n in (40, 220)]
PAGED_EXAMPLES = [max(1, int(n * SCALE)) for n in (8, 100)]


SHRINK = os.environ.get("MQA_PROPERTY_SHRINK") == "1"
PHASES = [Phase.explicit, Phase.generate] + ([Phase.shrink, Phase.explain] if SHRINK else [])


def profile(n: int) -> settings:
    return settings(max_examples=n, deadline=None, database=None, derandomize=True, print_blob=True, phases=PHASES,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ------------------------------------------------------------------------------------------ prefill

@st.composite
def windows(draw, S: int, N: int):
    """Per-row [ks, ke): empty (anywhere, ends included), full, random, suffix to N, causal."""
    ks, ke = [], []
    for i in range(S):
        kind = draw(st.sampled_from(["empty", "full", "random", "suffix", "causal"]))
        if kind == "empty":
            a = draw(st.sampled_from([0, N, draw(st.integers(0, N))]))
            b = a
        elif kind == "full":
            a, b = 0, N
        elif kind == "random":
            a, b = sorted((draw(st.integers(0, N)), draw(st.integers(0, N))))
        elif kind == "suffix":
            a, b = draw(st.integers(0, N)), N
        else:
            a, b = 0, max(0, min(N, N - S + i + 1))
        ks.append(a)
        ke.append(b)
    return torch.tensor(ks, dtype=torch.int32), torch.tensor(ke, dtype=torch.int32)


@st.composite
def prefill_cases(draw):
    H = draw(st.sampled_from([8, 16, 32, 64]))
    D = draw(st.sampled_from([32, 64, 128]))
    S = draw(st.integers(1, 24))
    N = draw(st.integers(1, 160))
    ks, ke = draw(windows(S, N))
    return dict(
        H=H, D=D, S=S, N=N, ks=ks, ke=ke, seed=draw(st.integers(0, 2 ** 20)),
        clean=draw(st.booleans()), compressed=draw(st.booleans()), bf16=draw(st.booleans()),
        extra_width=draw(st.integers(0, 3)),
        form=draw(st.sampled_from(["tuple", "explicit", "fp8_fp4"])),
        q_view=draw(st.sampled_from(["plain", "row_slice"])),
        w_view=draw(st.sampled_from(["plain", "row_slice"])),
        kv_view=draw(st.sampled_from(["plain", "prefix", "offset"])),
        sc_view=draw(st.sampled_from(["plain", "n1", "strided"])),
        ks_view=draw(st.sampled_from(["plain", "strided", "interleaved"])),
    )


def _rows_in_bigger(x: torch.Tensor, off: int, extra: int, fill) -> torch.Tensor:
    """x as rows [off, off + len) of a bigger tensor whose other rows hold `fill`."""
    return inside(x, (x.shape[0] + off + extra, *x.shape[1:]), slice(off, off + x.shape[0]), fill)


def _strided(x: torch.Tensor, fill) -> torch.Tensor:
    """x as column 0 of [len, 2] (stride 2)."""
    return inside(x, (*x.shape, 2), (..., 0), fill)


def prefill_matches_float64_reference(c):
    S, N, H, D = c["S"], c["N"], c["H"], c["D"]
    g = gen(c["seed"])
    q = fp8_q((S, H, D), g)
    kv, sc = fp8_rows(N, D, g)
    w = torch.randn(S, H, generator=g)
    ks, ke = c["ks"], c["ke"]
    ref, mag = prefill64(q, kv, sc, w, ks, ke)
    width = 0
    if c["compressed"]:
        width = max(1, int((ke - ks).max())) + c["extra_width"]
        ref, mag = compress64(ref, mag, ks, ke, width)
    dtype = torch.bfloat16 if c["bf16"] else torch.float32

    q, kv, sc, w, ks, ke = (x.to(DEVICE) for x in (q, kv, sc, w, ks, ke))
    if c["q_view"] == "row_slice":
        q = _rows_in_bigger(q, 3, 2, 0x7E)
    if c["w_view"] == "row_slice":
        w = _rows_in_bigger(w, 2, 3, 1e4)
    if c["kv_view"] == "prefix":
        kv, sc = _rows_in_bigger(kv, 0, 5, 0x7E), _rows_in_bigger(sc, 0, 5, 1e3)
    elif c["kv_view"] == "offset":
        kv, sc = _rows_in_bigger(kv, 4, 1, 0x7E), _rows_in_bigger(sc, 4, 1, 1e3)
    if c["sc_view"] == "n1":
        sc = sc.reshape(-1, 1)
    elif c["sc_view"] == "strided":
        sc = _strided(sc, 1e3)
    if c["ks_view"] == "strided":
        ks, ke = _strided(ks, N + 3), _strided(ke, 0)
    elif c["ks_view"] == "interleaved":
        both = torch.stack([ks, ke], dim=1)
        ks, ke = both[:, 0], both[:, 1]

    kw = dict(clean_logits=c["clean"], max_seqlen_k=width, logits_dtype=dtype)
    defaults = c["clean"] and not width and not c["bf16"]
    if c["form"] == "explicit" and defaults:
        # Six tensors fill DeepGEMM's five tensor slots and clean_logits, so fp8_mqa_logits takes the
        # explicit form with the defaults only; mqa_logits takes it with options by keyword.
        out = mqa_cli.fp8_mqa_logits(q, kv, sc, w, ks, ke)
    elif c["form"] == "explicit":
        out = mqa_cli.mqa_logits(q, kv, sc, w, ks, ke, **kw)
    elif c["form"] == "tuple":
        out = mqa_cli.fp8_mqa_logits(q, (kv, sc), w, ks, ke, **kw)
    else:
        out = mqa_cli.fp8_fp4_mqa_logits(q=(q, None), kv=(kv, sc), weights=w, cu_seq_len_k_start=ks,
                                         cu_seq_len_k_end=ke, **kw)
    assert out.stride(0) % 4 == 0 and out.stride(1) == 1, out.stride()
    assert_logits(out, ref, mag, clean=c["clean"], dtype=dtype)


# ------------------------------------------------------------------------------------------ paged

@st.composite
def paged_cases(draw):
    B = draw(st.integers(1, 4))
    T = draw(st.integers(1, 4))
    two_d = draw(st.booleans())
    ctx_len = st.one_of(st.just(0), st.integers(1, 8), st.integers(1, 160))
    if two_d:
        ctx = [[draw(ctx_len) for _ in range(T)] for _ in range(B)]
    else:
        ctx = [draw(ctx_len) for _ in range(B)]
    return dict(
        B=B, T=T, two_d=two_d, ctx=ctx, seed=draw(st.integers(0, 2 ** 20)),
        H=draw(st.sampled_from([8, 16, 32, 64])), D=draw(st.sampled_from([64, 128])),
        bs=draw(st.sampled_from([16, 32, 64])), extra_cols=draw(st.integers(0, 2)),
        extra_len=draw(st.integers(0, 40)),
        clean=draw(st.booleans()), bf16=draw(st.booleans()),
        q_view=draw(st.sampled_from(["plain", "flat_view", "batch_slice"])),
        w_view=draw(st.sampled_from(["plain", "row_slice"])),
        ctx_view=draw(st.sampled_from(["plain", "strided"])),
        table_view=draw(st.sampled_from(["plain", "strided_rows", "sub_block"])),
        cache_view=draw(st.sampled_from(["plain", "multi_layer", "padded_block"])),
        fp4_name=draw(st.booleans()),
    )


def paged_matches_float64_reference(c):
    B, T, H, D, bs = c["B"], c["T"], c["H"], c["D"], c["bs"]
    p = paged_problem(B, T, H, D, bs, c["ctx"], c["seed"], spare=2, extra_cols=c["extra_cols"],
                      extra_len=c["extra_len"])
    g, nb, cols = gen(c["seed"] + 1), p.nb, p.table.shape[1]
    dtype = torch.bfloat16 if c["bf16"] else torch.float32

    nbytes = bs * (D + 4)
    flat = p.cache.reshape(nb, nbytes)
    if c["cache_view"] == "multi_layer":
        buf = torch.randint(0, 256, (nb, 2, nbytes), generator=g, dtype=torch.uint8).to(DEVICE)
        buf[:, 1] = flat
        cache = buf[:, 1].view(nb, bs, 1, D + 4)
    elif c["cache_view"] == "padded_block":
        cache = inside(flat, (nb, nbytes + 4 * (1 + c["seed"] % 5)), (slice(None), slice(nbytes)), 0x7E)
        cache = cache.view(nb, bs, 1, D + 4)
    else:
        cache = p.cache

    q, w, ctx, table, max_context_len = p.q, p.w, p.ctx, p.table, p.max_context_len
    if c["q_view"] == "flat_view":
        q = q.reshape(B * T, H, D).view(B, -1, H, D)
    elif c["q_view"] == "batch_slice":
        q = _rows_in_bigger(q, 1, 1, 0x7E)
    if c["w_view"] == "row_slice":
        w = _rows_in_bigger(w, 0, 3, 1e4)
    if c["ctx_view"] == "strided":
        ctx = _strided(ctx, 1)
    if c["table_view"] == "strided_rows":
        table = torch.stack([table, (table + 1) % nb], dim=1).reshape(2 * B, cols)[::2]
    elif c["table_view"] == "sub_block":
        table = inside(table, (B + 3, cols + 5), (slice(B), slice(cols)), nb - 1)

    sched = mqa_cli.get_paged_mqa_logits_metadata(ctx, bs, mqa_cli.get_num_sms())
    if c["fp4_name"]:
        out = mqa_cli.fp8_fp4_paged_mqa_logits((q, None), cache, w, ctx, table, sched, max_context_len,
                                               clean_logits=c["clean"], logits_dtype=dtype)
    else:
        out = mqa_cli.fp8_paged_mqa_logits(q, cache, w, ctx, table, sched, max_context_len,
                                           clean_logits=c["clean"], logits_dtype=dtype)
    assert out.stride(0) % 4 == 0 and out.stride(1) == 1, out.stride()
    assert_logits(out, p.ref, p.mag, clean=c["clean"], dtype=dtype)


test_prefill_matches_float64_reference = profile(PREFILL_EXAMPLES[0])(given(prefill_cases())(
    prefill_matches_float64_reference))
test_prefill_matches_float64_reference_more = HEAVY(profile(PREFILL_EXAMPLES[1])(given(prefill_cases())(
    prefill_matches_float64_reference)))
test_paged_matches_float64_reference = profile(PAGED_EXAMPLES[0])(given(paged_cases())(
    paged_matches_float64_reference))
test_paged_matches_float64_reference_more = HEAVY(profile(PAGED_EXAMPLES[1])(given(paged_cases())(
    paged_matches_float64_reference)))
