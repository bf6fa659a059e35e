"""Top-k selection (mqa_cli.api.topk, mqa_kernels.topk) on the interpreter: index semantics (ties to the lowest
positions, -inf/NaN, short and empty rows, -1 padding, windows, compressed rows, decode ends read from the
context lengths), every selection path and variant (rows kernel, split kernel with its merge, aligned reads,
the 8-way reduction, the torch kind), row blocks and part borders that straddle rows, the config's regimes,
the memory bound, recall, and a cross-compile of both kernels for sm90."""

import pytest
import torch

from mqa_cli.api import topk as T
from mqa_cli.errors import UserError
from mqa_cli.api.topk import fp8_mqa_topk, fp8_paged_mqa_topk, topk_recall, topk_select
from mqa_cli.check.paged_reference import reference_paged
from mqa_cli.check.reference import reference_logits
from mqa_kernels.common import versions
from mqa_cli.problem.paged import PagedSpec
from mqa_cli.problem.paged_tensors import random_paged
from mqa_cli.problem.prefill import ProblemSpec
from mqa_cli.problem.tensors import random_prefill
from mqa_kernels.topk import config as C

from . import sm90_builds
from .conftest import HEAVY, some_heavy

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
SPLIT = {"parts": 3}  # three programs per long row, the last merging: part borders inside every window


def padded(x: torch.Tensor) -> torch.Tensor:
    """x as a view of a buffer with 24 spare columns a row (what the logits kernels return)."""
    buf = torch.full((x.shape[0], x.shape[1] + 24), float("nan"), dtype=x.dtype)
    buf[:, : x.shape[1]] = x
    return buf[:, : x.shape[1]]


def check_topk(x, k, idx, val, ks=None, ke=None, ties_lowest=True):
    """A valid top-k of each row of x within [ks, ke): min(k, live) distinct live picks in ascending position
    order, every pick >= the k-th live value and every value above it picked, the tied picks the lowest
    positions holding the k-th value, values equal to x at the picks, -1 / -inf padding."""
    x, idx = x.cpu().double(), idx.cpu().long()
    R, N = x.shape
    for r in range(R):
        s, e = (0, N) if ks is None else (int(ks[r]), int(ke[r]))
        row = x[r, s:e]
        live = torch.nonzero(row > float("-inf")).flatten() + s  # NaN and -inf are dead
        n = min(k, live.numel())
        picks = idx[r, :n]
        assert (idx[r, n:] == -1).all(), (r, idx[r].tolist())
        assert (picks[1:] > picks[:-1]).all() and ((picks >= s) & (picks < e)).all(), (r, picks.tolist())
        if val is not None:
            v = val.cpu().double()
            assert torch.isneginf(v[r, n:]).all(), r
            assert torch.equal(v[r, :n], x[r, picks]), r
        if n:
            kth = torch.topk(x[r, live], n).values[-1]
            assert (x[r, picks] >= kth).all(), r
            assert set(live[x[r, live] > kth].tolist()) <= set(picks.tolist()), r
            if ties_lowest:
                tied = live[x[r, live] == kth]
                got = picks[x[r, picks] == kth]
                assert torch.equal(got, tied[: got.numel()]), (r, got.tolist(), tied.tolist())


def windows(R, N, gen):
    ks = torch.randint(0, N // 2, (R,), generator=gen)
    ke = torch.minimum(ks + torch.randint(0, N, (R,), generator=gen), torch.tensor(N))
    ks[0], ke[0] = 0, N  # full row
    ks[1], ke[1] = 17, 17  # empty
    ks[2], ke[2] = 40, 43  # fewer live than k
    return ks.int(), ke.int()


@pytest.mark.parametrize("k,cap,tuning", [(1, None, None), (7, None, None), (7, 32, None), (64, 128, None),
                                          (64, 256, None), (7, 32, SPLIT), (64, 128, SPLIT)])
def test_select_windows(k, cap, tuning):
    gen = torch.Generator().manual_seed(k)
    R, N = 10, 520
    x = torch.randn(R, N, generator=gen)
    ks, ke = windows(R, N, gen)
    idx, val = topk_select(padded(x).to(DEVICE), k, ks.to(DEVICE), ke.to(DEVICE), cap=cap, tuning=tuning)
    assert idx.dtype == torch.int32 and idx.shape == (R, k) and val.dtype == torch.float32
    check_topk(x, k, idx, val, ks, ke)


def test_ties_and_dead_entries_every_path():
    """Integer logits (ties everywhere: the lowest positions win), -inf and NaN entries; rows sized for every
    path of both kernels."""
    gen = torch.Generator().manual_seed(1)
    R, N, k = 8, 300, 7
    x = torch.randint(0, 6, (R, N), generator=gen).float()
    x[3, ::2] = float("-inf")
    x[4, 5:] = float("nan")  # 5 finite entries: fewer than k
    x[5] = 2.0  # all tied
    x[6, :] = float("-inf")  # no live entry
    x[7, 100:110] = 9.0  # 10 values above the rest: k-th is among them
    ks = torch.tensor([0, 0, 250, 0, 0, 0, 0, 0], dtype=torch.int32)
    ke = torch.tensor([300, 20, 300, 300, 300, 300, 300, 300], dtype=torch.int32)
    seen = set()
    for cap, tuning in ((None, None), (16, None), (64, None), (16, SPLIT), (64, SPLIT)):
        stats = torch.full((R,), -1, dtype=torch.int32, device=DEVICE)
        idx, val = topk_select(x.to(DEVICE), k, ks.to(DEVICE), ke.to(DEVICE), cap=cap, stats=stats, tuning=tuning)
        check_topk(x, k, idx, val, ks, ke)
        seen |= set(stats.tolist())
    assert seen == {0, 1, 2, 3}  # registers, sampled candidates, exact passes, split + merge all ran


@HEAVY  # (the GPU's search round: the interpreter runs its reduction per element)
def test_eight_way_reduction_matches():
    """The GPU's search round (one 8-way reduction of scalar thresholds) selects what the interpreter's vector
    round does, on every path (tiny blocks: the interpreter runs that reduction per element)."""
    gen = torch.Generator().manual_seed(5)
    R, N, k = 4, 150, 20
    x = torch.randn(R, N, generator=gen)
    x[1, 10:80] = 0.5  # ties at the k-th value
    ks, ke = torch.tensor([0, 0, 30, 3], dtype=torch.int32), torch.tensor([150, 150, 31, 60], dtype=torch.int32)
    for cap, tuning in ((64, {}), (64, SPLIT)):
        stats = torch.full((R,), -1, dtype=torch.int32)
        a, _ = topk_select(x, k, ks, ke, cap=cap, tuning={**tuning, "reduce8": True}, stats=stats)
        b, _ = topk_select(x, k, ks, ke, cap=cap, tuning=tuning)
        assert torch.equal(a, b), (a, b)
        check_topk(x, k, a, None, ks, ke)
        assert {1, 3} & set(stats.tolist())  # a candidate search ran through the reduction


SENTINEL = 0x5A5A5A5A  # scratch words the kernels never wrote


def _scratch_spy(monkeypatch, narrow):
    """Makes the selection's scratch (the int32 1-D allocation mqa_cli.api.topk makes) start as SENTINEL and records
    each; returns a function giving, of the last one, the narrowed search's areas (per program or row)."""
    seen = []
    empty = torch.empty

    def spy(*size, dtype=None, **kw):
        t = empty(*size, dtype=dtype, **kw)
        if dtype == torch.int32 and len(size) == 1:
            t.fill_(SENTINEL)
            seen.append(t)
        return t

    monkeypatch.setattr(torch, "empty", spy)

    def areas(cfg):
        sch = cfg.schedule
        if sch["kind"] == "split":  # per row: 4 cap + PMAX, then the search's keys
            stride = sch["scratch_elems"] // (cfg.grid[0] // sch["parts"])
            return [seen[-1][r * stride + stride - narrow:(r + 1) * stride] for r in range(cfg.grid[0] // sch["parts"])]
        stride = sch["scratch_elems"] // cfg.grid[0]  # per program: the search's keys first
        return [seen[-1][p * stride:p * stride + narrow] for p in range(cfg.grid[0])]

    return areas


def _narrow_rows(gen, R, N, k):
    """Rows for the narrowed search: Gaussian (its bracket soon small), ties around the k-th value, all equal
    (a bracket one key wide at once: nothing compacted), two values over > narrow entries each (a bracket that
    never gets small), fewer live than k (no search: every live entry, then -1), -inf / NaN, integers."""
    x = torch.randn(R, N, generator=gen)
    x[1, 10: 10 + 3 * k] = 0.5  # the k-th value among many ties
    x[2] = 1.25
    x[3] = torch.where(torch.arange(N) % 2 == 0, 1.0, 2.0)
    x[4, k // 2:] = float("-inf")
    x[5, ::3] = float("nan")
    x[6] = torch.randint(0, 9, (N,), generator=gen).float()
    x[7, :] = float("-inf")
    return x


@pytest.mark.parametrize("cap,extra", some_heavy([(512, {}), (128, {}), (128, SPLIT), (64, {"reduce8": True}),
                                                   (64, {**SPLIT, "reduce8": True})], keep={0}))
def test_narrowed_search_selects_the_same(cap, extra, monkeypatch):
    """narrow on: the k-th key search goes on on the compacted bracket (in the interpreter's vector rounds and
    in the GPU's 8-way reduction): the same indices and values as the whole-block search, a valid top-k
    (ties to the lowest positions, -1 padding), and the narrowed keys really went through scratch."""
    gen = torch.Generator().manual_seed(cap + len(extra))
    k = 20 if extra.get("reduce8") else 40
    R, N = 10, (150 if extra.get("reduce8") else 420)
    narrow = 16
    x = _narrow_rows(gen, R, N, k)
    ks = torch.zeros(R, dtype=torch.int32)
    ke = torch.full((R,), N, dtype=torch.int32)
    ks[8], ke[8] = 3, 3 + k - 5  # fewer live than k: -1 padding
    ks[9], ke[9] = N // 3, N  # a window not starting at 0
    base, base_v = topk_select(x, k, ks, ke, cap=cap, tuning=extra)
    areas = _scratch_spy(monkeypatch, narrow)
    stats = torch.full((R,), -1, dtype=torch.int32)
    idx, val = topk_select(x, k, ks, ke, cap=cap, stats=stats, tuning={**extra, "narrow": narrow})
    assert torch.equal(idx, base) and torch.equal(val, base_v)
    check_topk(x, k, idx, val, ks, ke)
    assert (idx[8, k - 5:] == -1).all() and (idx[7] == -1).all()
    cfg = C.topk_config(rows=R, cols=N, topk=k, backend="interpreter", units=None, cap=cap,
                        **{**extra, "narrow": narrow})
    assert cfg.constexprs["NARROW"] == narrow
    written = [a for a in areas(cfg) if (a != SENTINEL).any()]
    assert written, "no search was narrowed"
    expect = {512: {0}, 128: {1, 2}, 64: {1, 2}}[cap] if not extra.get("parts") else {3, 2}
    assert set(stats.tolist()) - {0} <= expect | {0} and set(stats.tolist()) & expect  # the path meant


def test_narrowed_search_skips_brackets_that_stay_wide(monkeypatch):
    """Rows whose bracket never holds <= narrow keys (all equal; two values over many entries each) search the
    whole block to the end (nothing compacted) and still select exactly; a Gaussian row compacts."""
    k, N, narrow = 40, 400, 16
    x = torch.where(torch.arange(N) % 3 == 0, 1.0, 2.0).repeat(3, 1)  # 133 ones, 267 twos: the k-th is a 2
    x[1] = -0.75
    for tuning in ({}, {"reduce8": True}):
        areas = _scratch_spy(monkeypatch, narrow)
        idx, val = topk_select(x[:2], k, cap=512, tuning={**tuning, "narrow": narrow})
        check_topk(x[:2], k, idx, val)
        assert torch.equal(idx[0], torch.nonzero(x[0] == 2.0).flatten()[:k].int())  # the lowest tied positions
        assert torch.equal(idx[1], torch.arange(k, dtype=torch.int32))
        cfg = C.topk_config(rows=2, cols=N, topk=k, backend="interpreter", units=None, cap=512, narrow=narrow)
        assert all((a == SENTINEL).all() for a in areas(cfg))
    x[2] = torch.randn(N, generator=torch.Generator().manual_seed(9))
    areas = _scratch_spy(monkeypatch, narrow)
    idx, val = topk_select(x[2:], k, cap=512, tuning={"narrow": narrow})
    check_topk(x[2:], k, idx, val)
    cfg = C.topk_config(rows=1, cols=N, topk=k, backend="interpreter", units=None, cap=512, narrow=narrow)
    written = areas(cfg)[0]
    assert (written != SENTINEL).any()
    assert set(written[written != SENTINEL].tolist()) <= set(T_keys(x[2]).tolist())  # keys of that row only


def T_keys(row: torch.Tensor) -> torch.Tensor:
    """The kernels' int32 keys of fp32 values (order-preserving)."""
    b = row.float().view(torch.int32)
    return torch.where(b < 0, b ^ 0x7FFFFFFF, b)


def test_narrow_option_config(monkeypatch):
    """narrow: 0 or a power of two >= 16; a compile-time key that names the variant (never shares a compiled
    kernel with another narrow); its scratch is per program (rows kernel, short rows too) or per row (split)."""
    from mqa_kernels.topk import tuned

    monkeypatch.setattr(tuned, "CUDA_TUNED", {})  # the rules' configs (narrow 0), not the last sweep's table
    cuda = dict(backend="cuda", units=132)
    a = C.topk_config(rows=4096, cols=8192, topk=2048, **cuda)
    b = C.topk_config(rows=4096, cols=8192, topk=2048, narrow=256, **cuda)
    assert a.constexprs["NARROW"] == 0 and b.constexprs["NARROW"] == 256 and a.name != b.name
    assert b.name.endswith("_NARROW_256")
    assert b.schedule["scratch_elems"] == a.schedule["scratch_elems"] + 256 * b.grid[0]
    short = C.topk_config(rows=4096, cols=3000, topk=2048, narrow=512, **cuda)
    assert short.schedule["scratch_elems"] == 512 * short.grid[0]  # short rows: only the search's keys
    assert C.topk_config(rows=4096, cols=3000, topk=2048, **cuda).schedule["scratch_elems"] == 0
    s0 = C.topk_config(rows=64, cols=70000, topk=2048, **cuda)
    s1 = C.topk_config(rows=64, cols=70000, topk=2048, narrow=256, **cuda)
    assert s1.kernel == "topk_split" and s1.schedule["scratch_elems"] == s0.schedule["scratch_elems"] + 64 * 256
    for bad in (8, 100, -16):
        with pytest.raises(ValueError, match="narrow"):
            C.topk_config(rows=8, cols=8, topk=2, narrow=bad, **cuda)


@pytest.mark.parametrize("parts,cand", [(1, None), (3, None), (5, 16)])
def test_radix_select_is_the_same_selection(parts, cand):
    """The radix select (kind 'radix': four launches, parts programs a row; cand 16: the candidates overflow and
    the k-th key is found on the rows themselves) picks what the exact paths pick, in the same order, on ties,
    dead entries, windows, compressed rows, decode ends read from the context lengths and bf16."""
    tuning = {"kind": "radix", "parts": parts, "cand": cand}
    gen = torch.Generator().manual_seed(parts)
    R, N, k = 8, 300, 7
    x = torch.randint(0, 6, (R, N), generator=gen).float() + torch.randn(R, N, generator=gen) * (parts == 1)
    x[3, ::2], x[4, 5:], x[5], x[6, :], x[7, 100:110] = float("-inf"), float("nan"), 2.0, float("-inf"), 9.0
    ks, ke = windows(R, N, gen)
    for xs in (padded(x), x.to(torch.bfloat16)):
        idx, val = topk_select(xs.to(DEVICE), k, ks.to(DEVICE), ke.to(DEVICE), tuning=tuning)
        want, _ = topk_select(xs.to(DEVICE), k, ks.to(DEVICE), ke.to(DEVICE))
        assert torch.equal(idx, want) and val.dtype == xs.dtype
        check_topk(xs.float(), k, idx, val.float(), ks, ke)
    width = int((ke - ks).max())
    comp = torch.stack([torch.cat([x[r, int(ks[r]):int(ke[r])], torch.full((width - int(ke[r] - ks[r]),), 7.0)])
                        for r in range(R)])  # past each row's length: never read
    idx, _ = topk_select(comp.to(DEVICE), k, ks.to(DEVICE), ke.to(DEVICE), compressed=True, values=False,
                         tuning=tuning)
    check_topk(x, k, idx, None, ks, ke)
    ctx = torch.tensor([[5, 300], [0, 0], [70, 71], [299, 300]], dtype=torch.int32)
    idx = torch.empty(R, k, dtype=torch.int32)
    T._select_into(x, k, None, None, idx, None, paged=(ctx, 2, N), tuning=tuning)
    check_topk(x, k, idx, None, torch.zeros(R, dtype=torch.int32), ctx.reshape(-1))


def test_no_window_and_bf16():
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(5, 200, generator=gen).to(torch.bfloat16)  # bf16: many ties
    for tuning in (None, SPLIT):
        idx, val = topk_select(x.to(DEVICE), 64, cap=128, tuning=tuning)
        assert val.dtype == torch.bfloat16
        check_topk(x.float(), 64, idx, val.float())


def test_compressed_rows_give_positions():
    gen = torch.Generator().manual_seed(3)
    R, N, k = 6, 400, 7
    x = torch.randn(R, N, generator=gen)
    ks, ke = windows(R, N, gen)
    width = int((ke - ks).max())
    comp = torch.full((R, width), float("nan"))  # past each row's length: never read
    for r in range(R):
        comp[r, : int(ke[r] - ks[r])] = x[r, int(ks[r]):int(ke[r])]
    for cap, tuning in ((None, None), (32, None), (32, SPLIT)):
        idx, val = topk_select(comp.to(DEVICE), k, ks.to(DEVICE), ke.to(DEVICE), compressed=True, cap=cap,
                               tuning=tuning)
        check_topk(x, k, idx, val, ks, ke)


@HEAVY  # (test_paged_topk_recall reads decode ends in the everyday run)
def test_decode_ends_read_in_the_kernel():
    """Paged rows: each row's end comes from the context lengths (1-D with next_n 2: ctx - next_n + 1 + t;
    2-D: ctx[b, t]; clamped to [0, max_context_len]) and matches windows [0, paged_row_ends)."""
    gen = torch.Generator().manual_seed(4)
    B, nn, width, k = 3, 2, 300, 9
    x = padded(torch.randn(B * nn, width, generator=gen))
    for ctx in (torch.tensor([300, 1, 120], dtype=torch.int32),
                torch.tensor([[5, 300], [0, 0], [70, 71]], dtype=torch.int32)[:, :],
                torch.tensor([[9, 1, 250, 1, 4, 1]], dtype=torch.int32).reshape(3, 2)):
        ends = T.paged_row_ends(ctx, nn, width)
        starts = torch.zeros_like(ends)
        for cap, tuning in ((None, None), (32, None), (32, SPLIT)):
            idx = torch.empty(B * nn, k, dtype=torch.int32)
            T._select_into(x, k, None, None, idx, None, paged=(ctx, nn, width), cap=cap, tuning=tuning)
            ref, _ = topk_select(x, k, starts, ends, cap=cap, tuning=tuning)
            assert torch.equal(idx, ref), (ctx.tolist(), tuning)
            check_topk(x, k, idx, None, starts, ends)


def test_values_off_and_the_torch_kind():
    """values=False writes no values and the same indices; the opt-in torch kind selects the same set (distinct
    values) in the same position order with the same padding."""
    gen = torch.Generator().manual_seed(6)
    R, N, k = 5, 300, 16
    x = torch.randperm(R * N, generator=gen).float().reshape(R, N) / 7.0  # distinct values: no ties
    ks = torch.tensor([0, 10, 50, 7, 20], dtype=torch.int32)
    ke = torch.tensor([300, 200, 60, 7, 290], dtype=torch.int32)  # row 2: 10 live (< k), row 3: empty
    idx, val = topk_select(x, k, ks, ke)
    idx2, none = topk_select(x, k, ks, ke, values=False)
    assert none is None and torch.equal(idx, idx2)
    idx_t, val_t = topk_select(x, k, ks, ke, tuning={"kind": "torch"})
    assert torch.equal(idx, idx_t) and torch.equal(val, val_t)
    assert (idx_t[3] == -1).all() and (idx_t[2] == -1).sum() == k - 10


def test_config_regimes_and_table(monkeypatch):
    """Few rows longer than cap split over programs (parts from programs per SM, at most PMAX) on a GPU, never
    on the interpreter; many rows run the persistent kernel; bad tuning is refused; the table's nearest
    power-of-two bucket applies. The rules are checked with the sweep-written table emptied (its entries are
    whatever the last H200 sweep measured)."""
    from mqa_kernels.topk import tuned

    monkeypatch.setattr(tuned, "CUDA_TUNED", {})
    cuda = dict(backend="cuda", units=132)
    few = C.topk_config(rows=64, cols=70000, topk=2048, **cuda)
    parts = -(-C.DEFAULTS["split"]["programs_per_unit"] * 132 // 64)  # programs per SM x SMs over the rows
    assert few.kernel == "topk_split" and few.schedule["parts"] == parts and few.grid == (64 * parts,)
    tile = C.DEFAULTS["split"]["tile"]
    assert C.topk_config(rows=1, cols=40 * tile - 5, topk=2048, **cuda).schedule["parts"] == 40  # >= a tile a part
    assert C.topk_config(rows=1, cols=1 << 20, topk=2048, **cuda).schedule["parts"] == C.PMAX
    assert C.topk_config(rows=64, cols=4000, topk=2048, **cuda).kernel == "topk_rows"  # fits registers
    many = C.topk_config(rows=8192, cols=8192, topk=2048, **cuda)
    assert many.kernel == "topk_rows" and many.grid == (C.DEFAULTS["rows"]["programs_per_unit"] * 132,)
    assert many.schedule["scratch_elems"] > 0
    assert C.topk_config(rows=64, cols=70000, topk=2048, backend="interpreter", units=None).kernel == "topk_rows"
    with pytest.raises(ValueError, match="unknown top-k tuning"):
        C.topk_config(rows=8, cols=8, topk=2, nope=1, **cuda)
    with pytest.raises(ValueError, match="parts"):
        C.topk_config(rows=8, cols=9000, topk=2048, parts=C.PMAX + 1, **cuda)
    table = {4096: {"tile": 1}, 32768: {"tile": 2}}
    assert [C._bucket_entry(table, c)["tile"] for c in (100, 4096, 6000, 9000, 1 << 20)] == [1, 1, 1, 2, 2]
    assert C.workspace_bytes(8192, "interpreter", 123) == 123


def test_memory_stays_bounded():
    """1x131072 causal at k 2048 through fp8_mqa_topk: O(S k) + a fixed workspace, far below 8 GiB."""
    m = T.topk_memory(131072, 131072, 2048, sorted=False)
    assert m["total_bytes"] < 4 << 30 and m["output_bytes"] == 131072 * 2048 * 4
    assert m["scratch_bytes"] <= 64 << 20 and m["select_kernel"] == "topk_rows"
    assert T.topk_memory(64, 70000, 2048)["select_kernel"] == "topk_split"


def test_recall_semantics():
    ref = torch.tensor([[5.0, 4.0, 4.0, 1.0, float("-inf")], [1.0, 2.0, 3.0, 4.0, 5.0]], dtype=torch.float64)
    # row 0: top-2 is {0} plus one of the tied 4.0s: {0, 2} is a full hit; row 1: 4 is a hit, -1 a miss
    lo, mean = topk_recall(torch.tensor([[2, 0], [4, -1]]), ref, 2)
    assert (lo, mean) == (0.5, 0.75)
    assert topk_recall(torch.tensor([[0, 0], [4, 3]]), ref, 2)[0] == 0.5  # a duplicate counts once
    assert topk_recall(torch.tensor([[4, -1], [3, 4]]), ref, 2, torch.tensor([0, 0]), torch.tensor([5, 5]))[0] == 0.0
    assert topk_recall(torch.tensor([[-1, -1]]), torch.full((1, 3), float("-inf")), 2) == (1.0, 1.0)  # nothing live


def _topk_problem():
    return random_prefill(ProblemSpec(batch=2, seq=20, seq_kv=300, heads=16, dim=32, layout="causal"), device=DEVICE)


def test_fp8_mqa_topk_blocks_and_recall():
    """Blocks of 7 rows (rows straddle block borders), causal windows not starting at 0 in the second
    sequence, sorted output, the set in position order when unsorted, recall against the float64 reference."""
    t = _topk_problem()
    ref = reference_logits(t, dtype=torch.float64)
    k = 64
    idx, val = fp8_mqa_topk(t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke, k, return_logits=True, chunk_rows=7,
                            cap=256)
    lo, mean = topk_recall(idx, ref, k, t.ks, t.ke)
    assert mean >= 0.999 and lo >= 0.99, (lo, mean)
    assert (val[:, 1:] <= val[:, :-1]).all()  # sorted by descending logit
    assert ((idx >= t.ks[:, None]) & (idx < t.ke[:, None])).all()
    whole = fp8_mqa_topk(t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke, k, sorted=False)
    assert torch.equal(torch.sort(whole, dim=1).values, torch.sort(idx, dim=1).values)
    assert (whole[:, 1:] > whole[:, :-1]).all()  # every row has >= k live: ascending positions throughout


@HEAVY
def test_fp8_mqa_topk_bf16_logits_recall(capsys):
    """bf16 logits' recall against the float64 reference, reported beside fp32's."""
    t = _topk_problem()
    ref = reference_logits(t, dtype=torch.float64)
    k = 64
    idx = fp8_mqa_topk(t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke, k, chunk_rows=7, cap=256)
    lo, mean = topk_recall(idx, ref, k, t.ks, t.ke)
    b_idx = fp8_mqa_topk(t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke, k, logits_dtype=torch.bfloat16,
                         chunk_rows=16)
    b_lo, b_mean = topk_recall(b_idx, ref, k, t.ks, t.ke)
    with capsys.disabled():
        print(f"\n  recall k={k}: fp32 logits min {lo:.4f} mean {mean:.4f}; bf16 logits min {b_lo:.4f} "
              f"mean {b_mean:.4f}")
    assert b_mean >= 0.9


def test_short_rows_pad_with_minus_one():
    t = random_prefill(ProblemSpec(seq=12, heads=16, dim=32, layout="causal"), device=DEVICE)
    idx = fp8_mqa_topk(t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke, 7, chunk_rows=5)
    live = (t.ke - t.ks).long().cpu()
    for r in range(t.S):
        n = min(7, int(live[r]))
        assert (idx[r, n:] == -1).all() and (idx[r, :n] >= 0).all()


@pytest.mark.parametrize("ctx_2d", [False, True])
def test_paged_topk_recall(ctx_2d):
    """Blocks of 2 sequences over 3 (a block border inside the batch), next_n 2, 1-D or 2-D context lengths;
    the split kernel on the last call."""
    t = random_paged(PagedSpec(batch=3, next_n=2, context_len=200, heads=16, dim=64, block_size=16),
                     device=DEVICE)
    ctx = T.paged_row_ends(t.context_lens, 2, t.max_context_len).reshape(3, 2) if ctx_2d else t.context_lens
    k = 64
    ref = reference_paged(t, dtype=torch.float64, clean_logits=True)
    idx, val = fp8_paged_mqa_topk(t.q, t.kv_cache, t.weights, ctx, t.block_table, t.max_context_len, k,
                                  return_logits=True, chunk_batch=2, cap=128)
    lo, mean = topk_recall(idx, ref, k)
    assert mean >= 0.999 and lo >= 0.99, (lo, mean)
    assert (val[:, 1:] <= val[:, :-1]).all()
    T.TUNING.update(SPLIT)
    try:
        unsorted = fp8_paged_mqa_topk(t.q, t.kv_cache, t.weights, ctx, t.block_table, t.max_context_len, k,
                                      sorted=False, cap=128)
    finally:
        T.TUNING.clear()
    assert torch.equal(torch.sort(unsorted, dim=1).values, torch.sort(idx, dim=1).values)
    # the engines' layouts (FlashInfer's transforms): a ragged offset a row, or a token-level page table
    call = lambda **kw: fp8_paged_mqa_topk(t.q, t.kv_cache, t.weights, ctx, t.block_table, t.max_context_len, k,
                                           sorted=False, cap=128, **kw)
    plain = call()
    offsets = torch.arange(6, dtype=torch.int32, device=DEVICE) * 1000
    table = torch.randperm(3 * 256, device=DEVICE).to(torch.int32).reshape(3, 256)
    for kw, want in ((dict(offsets=offsets), plain + offsets[:, None]),
                     (dict(page_table=table), table[torch.arange(6)[:, None] // 2, plain.clamp(min=0).long()])):
        assert torch.equal(call(**kw), torch.where(plain >= 0, want, -1)), kw
    with pytest.raises(UserError, match="not both"):
        call(offsets=offsets, page_table=table)
    with pytest.raises(UserError, match=r"page_table must be int32 \[3, >= "):
        call(page_table=table[:, :10])


@pytest.mark.versions
@pytest.mark.heavy
@pytest.mark.skipif(not versions.holds("triton_kernels"), reason=versions.FACTS["triton_kernels"].required())
def test_kernels_compile_for_sm90(tmp_path):
    """Both kernels (persistent rows; split with its atomic count-in and L2-only merge reads) compile for sm90 on the CPU, named after their config keys (a subprocess: the suite runs the interpreter)."""
    rows, split = sm90_builds.build("topk", tmp_path, cases=[(4096, 8192, False), (64, 70000, True)])
    assert (rows["kernel"], split["kernel"]) == ("topk_rows", "topk_split")
    assert rows["name"].startswith("topk_rows_CAP_4096_SAMPLE_") and "_R8_1" in rows["name"] and "_PAGED_1" in split["name"]
    assert "atom" in split["ptx"] and "ld.global.cg" in split["ptx"]


def test_table_routes_and_tunes(monkeypatch):
    """tuned.py entries apply by regime and row length: a decode bucket routed to torch.topk, a prefill bucket's
    warps; an explicit kind override takes that kind's own defaults."""
    from mqa_kernels.topk import tuned

    monkeypatch.setattr(tuned, "CUDA_TUNED", {"rows": {8192: {"num_warps": 8, "programs_per_unit": 2}},
                                              "split": {131072: {"kind": "torch"}}})
    cuda = dict(backend="cuda", units=132)
    assert C.topk_config(rows=64, cols=90000, topk=2048, **cuda).schedule["kind"] == "torch"
    rows = C.topk_config(rows=8192, cols=8192, topk=2048, **cuda)
    assert rows.options["num_warps"] == 8 and rows.grid == (264,)
    forced = C.topk_config(rows=8192, cols=8192, topk=2048, kind="split", **cuda)
    assert forced.kernel == "topk_split" and forced.options["num_warps"] == C.DEFAULTS["split"]["num_warps"]
    assert C.topk_config(rows=64, cols=90000, topk=2048, kind="split", **cuda).kernel == "topk_split"


def test_repeated_selection_relaunches_with_the_full_paths_arguments(monkeypatch):
    """The selection's fast path (a repeated call signature): the compiled launcher is called directly, with
    exactly the argument list the full path builds for the new call's tensors (fresh scratch and zeroed arrive
    counters, the same integers). The launch itself is replaced here (the fast path exists on CUDA only)."""
    from mqa_cli.api import fastpath
    from mqa_cli.launch import common as launch

    calls = {"full": [], "fast": []}

    class Compiled:  # what run_kernel returns: the handles a direct launch needs
        function, packed_metadata = object(), object()

        def run(self, gx, gy, gz, stream, function, packed, meta, enter, exit_, *args):
            calls["fast"].append(((gx, gy, gz), args))

    def run_kernel(kernel, cfg, a, interpret):
        calls["full"].append((cfg, a))
        return Compiled()

    class Cuda:
        def stream(self, index):
            return 7

        def hooked(self):
            return False

    monkeypatch.setattr(launch, "run_kernel", run_kernel)
    monkeypatch.setattr(fastpath, "_cuda", Cuda())
    monkeypatch.setattr(fastpath, "_runtime", lambda: fastpath._cuda)
    # the signature as on CUDA, for these CPU tensors
    monkeypatch.setattr(T, "_signature", lambda logits, topk, ks, ke, i, v, comp, paged, cap, stats, tuning: (
        (("opts",), 0), fastpath.key((logits, ks, ke, i, v, paged[0] if paged else None), (topk, comp, cap))))
    monkeypatch.setattr(T, "_FAST", {})
    R, cols, k = 6, 700, 64
    for split in (False, True):
        calls["full"].clear(), calls["fast"].clear()
        T._FAST.clear()
        tuning = None
        if split:  # long rows over 3 programs each: scratch and arrive counters per call
            monkeypatch.setattr(T, "TUNING", {})
            monkeypatch.setattr(T, "_config", lambda *a, **kw: C.topk_config(
                rows=a[0], cols=a[1], topk=a[2], backend="cuda", units=2, window=kw["window"],
                compressed=kw["compressed"], paged=kw["paged"], values=kw["values"], stats=kw["stats"],
                cap=kw["cap"], parts=3))
        ins = []
        for seed in (0, 1):
            g = torch.Generator().manual_seed(seed)
            logits = torch.randn(R, cols, generator=g)
            ks = torch.randint(0, 100, (R,), generator=g, dtype=torch.int32)
            ke = ks + torch.randint(300, 600, (R,), generator=g, dtype=torch.int32)
            idx, val = torch.empty(R, k, dtype=torch.int32), torch.empty(R, k)
            T._select_into(logits, k, ks, ke, idx, val, cap=128, tuning=tuning)
            ins.append((logits, ks, ke, idx, val))
        assert len(calls["full"]) == 1 and len(calls["fast"]) == 1, (len(calls["full"]), len(calls["fast"]))
        cfg, a = calls["full"][0]
        logits, ks, ke, idx, val = ins[1]
        grid, got = calls["fast"][0]
        assert grid == tuple(cfg.grid) + (1,) * (3 - len(cfg.grid))
        names = [n for n in cfg.jitted().arg_names if n not in cfg.constexprs]
        assert len(got) == len(names) + len(cfg.constexprs)
        assert got[len(names):] == tuple(cfg.constexprs[n] for n in cfg.jitted().arg_names[len(names):])
        want = T.select_args(cfg, logits, ks, ke, idx, val, scratch=got[6] if cfg.schedule["scratch_elems"] else None,
                             arrive=got[7] if cfg.schedule["arrive"] else None).args
        for x, y in zip(got[:len(names)], want):
            if isinstance(y, torch.Tensor):
                assert x is y or (x.shape == y.shape and x.dtype == y.dtype and x.data_ptr() == y.data_ptr())
            else:
                assert type(x) is type(y) and x == y
        assert (got[0] is logits and got[4] is idx and got[5] is val and got[1] is ks and got[2] is ke)
        if cfg.schedule["arrive"]:  # a fresh, zeroed counter per call
            assert got[7] is not a.args[7] and got[7].shape == (R,) and not got[7].any()
            assert got[6].numel() == cfg.schedule["scratch_elems"]
