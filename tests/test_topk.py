"""Top-k selection (mqa_cli.topk, mqa_kernels.topk) on the interpreter: index semantics (ties, -inf/NaN,
short and empty rows, -1 padding, windows, compressed rows), the three selection paths, row blocks that
straddle rows, and recall of fp8_mqa_topk against the float64 reference."""
import pytest
import torch

from mqa_cli.paged_problem import PagedSpec
from mqa_cli.paged_reference import reference_paged
from mqa_cli.paged_tensors import random_paged
from mqa_cli.problem import ProblemSpec
from mqa_cli.reference import reference_logits
from mqa_cli.tensors import random_prefill
from mqa_cli.topk import fp8_mqa_topk, fp8_paged_mqa_topk, topk_recall, topk_select

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def check_topk(x, k, idx, val, ks=None, ke=None):
    """A valid top-k of each row of x within [ks, ke): min(k, live) distinct live picks, every pick >= the
    k-th live value and every value above it picked, values equal to x at the picks, -1 / -inf padding."""
    x, idx, val = x.cpu().double(), idx.cpu().long(), val.cpu().double()
    R, N = x.shape
    for r in range(R):
        s, e = (0, N) if ks is None else (int(ks[r]), int(ke[r]))
        row = x[r, s:e]
        live = torch.nonzero(row > float("-inf")).flatten() + s  # NaN and -inf are dead
        n = min(k, live.numel())
        picks = idx[r, :n]
        assert (idx[r, n:] == -1).all(), (r, idx[r].tolist())
        assert torch.isneginf(val[r, n:]).all(), r
        assert len(set(picks.tolist())) == n and ((picks >= s) & (picks < e)).all(), (r, picks.tolist())
        assert torch.equal(val[r, :n], x[r, picks]), r
        if n:
            kth = torch.topk(x[r, live], n).values[-1]
            assert (x[r, picks] >= kth).all(), r
            assert set(live[x[r, live] > kth].tolist()) <= set(picks.tolist()), r


def windows(R, N, gen):
    ks = torch.randint(0, N // 2, (R,), generator=gen)
    ke = torch.minimum(ks + torch.randint(0, N, (R,), generator=gen), torch.tensor(N))
    ks[0], ke[0] = 0, N  # full row
    ks[1], ke[1] = 17, 17  # empty
    ks[2], ke[2] = 40, 43  # fewer live than k
    return ks.int(), ke.int()


@pytest.mark.parametrize("k,cap", [(1, None), (7, None), (7, 32), (64, 128), (64, 256)])
def test_select_windows(k, cap):
    gen = torch.Generator().manual_seed(k)
    R, N = 10, 520
    x = torch.randn(R, N, generator=gen)
    ks, ke = windows(R, N, gen)
    stats = torch.empty(R, dtype=torch.int32)
    idx, val = topk_select(x.to(DEVICE), k, ks.to(DEVICE), ke.to(DEVICE), cap=cap, stats=stats.to(DEVICE))
    assert idx.dtype == torch.int32 and idx.shape == (R, k) and val.dtype == torch.float32
    check_topk(x, k, idx, val, ks, ke)


def test_ties_and_dead_entries_every_path():
    """Integer logits (ties everywhere), -inf and NaN entries; rows sized for each of the three paths."""
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
    for cap in (None, 16, 64):
        stats = torch.full((R,), -1, dtype=torch.int32, device=DEVICE)
        idx, val = topk_select(x.to(DEVICE), k, ks.to(DEVICE), ke.to(DEVICE), cap=cap, stats=stats)
        check_topk(x, k, idx, val, ks, ke)
        seen |= set(stats.tolist())
    assert seen == {0, 1, 2}  # registers, sampled candidates, exact passes all ran


def test_no_window_and_bf16():
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(5, 200, generator=gen).to(torch.bfloat16)  # bf16: many ties
    idx, val = topk_select(x.to(DEVICE), 64, cap=128)
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
    for cap in (None, 32):
        idx, val = topk_select(comp.to(DEVICE), k, ks.to(DEVICE), ke.to(DEVICE), compressed=True, cap=cap)
        check_topk(x, k, idx, val, ks, ke)


def test_recall_semantics():
    ref = torch.tensor([[5.0, 4.0, 4.0, 1.0, float("-inf")], [1.0, 2.0, 3.0, 4.0, 5.0]], dtype=torch.float64)
    # row 0: top-2 is {0} plus one of the tied 4.0s: {0, 2} is a full hit; row 1: 4 is a hit, -1 a miss
    lo, mean = topk_recall(torch.tensor([[2, 0], [4, -1]]), ref, 2)
    assert (lo, mean) == (0.5, 0.75)
    assert topk_recall(torch.tensor([[0, 0], [4, 3]]), ref, 2)[0] == 0.5  # a duplicate counts once
    assert topk_recall(torch.tensor([[4, -1], [3, 4]]), ref, 2, torch.tensor([0, 0]), torch.tensor([5, 5]))[0] == 0.0
    assert topk_recall(torch.tensor([[-1, -1]]), torch.full((1, 3), float("-inf")), 2) == (1.0, 1.0)  # nothing live


def test_fp8_mqa_topk_blocks_and_recall(capsys):
    """Blocks of 7 rows (rows straddle block borders), causal windows not starting at 0 in the second
    sequence, sorted output, recall against the float64 reference; bf16 logits' recall is reported."""
    t = random_prefill(ProblemSpec(batch=2, seq=20, seq_kv=300, heads=16, dim=32, layout="causal"), device=DEVICE)
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


def test_paged_topk_recall():
    t = random_paged(PagedSpec(batch=3, next_n=2, context_len=200, heads=16, dim=64, block_size=16),
                     device=DEVICE)
    k = 64
    idx, val = fp8_paged_mqa_topk(t.q, t.kv_cache, t.weights, t.context_lens, t.block_table, t.max_context_len, k,
                                  return_logits=True, chunk_batch=2, cap=128)
    ref = reference_paged(t, dtype=torch.float64, clean_logits=True)
    lo, mean = topk_recall(idx, ref, k)
    assert mean >= 0.999 and lo >= 0.99, (lo, mean)
    assert (val[:, 1:] <= val[:, :-1]).all()


def test_few_long_rows_path_matches_the_kernel():
    """The torch.topk path taken on a GPU for a few very long rows picks the same set, with the same -1 / -inf
    padding, as the selection kernel (distinct values, windows, compressed rows, a short and an empty row)."""
    import torch

    from mqa_cli import topk as T

    g = torch.Generator().manual_seed(3)
    R, N, k = 5, 300, 16
    logits = torch.randperm(R * N, generator=g).float().reshape(R, N) / 7.0  # distinct values: no ties
    ks = torch.tensor([0, 10, 50, 7, 20], dtype=torch.int32)
    ke = torch.tensor([300, 200, 60, 7, 290], dtype=torch.int32)  # row 2: 10 live (< k), row 3: empty
    for compressed in (False, True):
        x = logits
        if compressed:
            c = torch.arange(N)
            x = torch.where(c[None, :] < (ke - ks)[:, None], logits, torch.tensor(float("-inf")))
        idx_k, val_k = T.topk_select(x, k, ks, ke, compressed=compressed)
        idx_t = torch.empty(R, k, dtype=torch.int32)
        val_t = torch.empty(R, k)
        T._torch_select_into(x, k, ks, ke, idx_t, val_t, compressed)
        for r in range(R):
            assert set(idx_k[r].tolist()) == set(idx_t[r].tolist()), (compressed, r)
            assert sorted(val_k[r].tolist()) == sorted(val_t[r].tolist())
        assert (idx_t[3] == -1).all() and (idx_t[2] == -1).sum() == k - 10
