"""The one-launch schedule kernel (mqa_kernels.decode.paged_schedule) against the torch split it replaces: bit for bit,
through the interpreter, over the context-length forms engines pass (1-D, 2-D, strided, zeros)."""

import pytest
import torch

from mqa_cli.errors import UserError
from mqa_cli.launch import schedule
from mqa_cli.launch.schedule import _metadata_torch, get_paged_mqa_logits_metadata

from . import sm90_builds
from .conftest import HEAVY

INT32_MAX = 2**31 - 1


@pytest.fixture(autouse=True)
def kernel_path_only(monkeypatch):
    """The public function must launch the kernel here (CPU + interpreter), never fall back to torch ops."""
    def refuse(*a, **k):
        raise AssertionError("get_paged_mqa_logits_metadata took the torch path")

    monkeypatch.setattr(schedule, "_metadata_torch", refuse)


def check(ctx: torch.Tensor, block_kv: int, P: int):
    got = get_paged_mqa_logits_metadata(ctx, block_kv, P)
    want = _metadata_torch(ctx, block_kv, P)
    assert got.dtype == torch.int32 and got.shape == (P + 1, 2) and got.is_contiguous()
    if not torch.equal(got, want):
        bad = (got != want).any(dim=1).nonzero().flatten()[:5].tolist()
        raise AssertionError(f"B={ctx.shape[0]} P={P} block_kv={block_kv}: entries {bad}: "
                             f"got {got[bad].tolist()}, want {want[bad].tolist()}")


def lens(kind: str, B: int, g: torch.Generator, hi: int = 9000) -> torch.Tensor:
    """int32 [B] context lengths of one kind."""
    if kind == "random":
        c = torch.randint(0, hi, (B,), generator=g)
        c[torch.rand(B, generator=g) < 0.3] = 0  # empty sequences between the others
    elif kind == "zeros":
        c = torch.zeros(B, dtype=torch.int64)
    elif kind.startswith("one"):  # all but one zero: first, last or in between
        c = torch.zeros(B, dtype=torch.int64)
        at = {"one_first": 0, "one_last": B - 1}.get(kind, int(torch.randint(0, B, (1,), generator=g)))
        c[at] = int(torch.randint(1, hi, (1,), generator=g))
    elif kind == "edges":  # around block boundaries, and negatives (counted as 0)
        c = torch.tensor([0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, -5, 128, 1000])[torch.arange(B) % 14]
    elif kind == "skewed":  # one long sequence among short ones: it holds most programs
        c = torch.randint(0, 40, (B,), generator=g)
        c[B // 2] = 200_000
    elif kind == "huge":  # prefixes and p * T past 2^32 (the 64-bit paths and the low-32-bit block math)
        c = INT32_MAX - torch.randint(0, 1000, (B,), generator=g)
    else:
        raise ValueError(kind)
    return c.to(torch.int32)


KINDS = ("random", "zeros", "one_first", "one_last", "one_mid", "edges", "skewed", "huge")
CASES = [  # (B, P, block_kv)
    (1, 1, 64), (1, 132, 16), (2, 200, 32), (3, 7, 64), (5, 2, 16), (64, 132, 64), (100, 1, 32),
    (257, 132, 16), (1000, 200, 64), (5000, 132, 32), pytest.param(5000, 3, 16, marks=HEAVY),
]


@pytest.mark.parametrize("B, P, block_kv", CASES)
def test_one_d_matches_torch(B, P, block_kv):
    g = torch.Generator().manual_seed(B * 1000 + P + block_kv)
    for kind in KINDS:
        check(lens(kind, B, g), block_kv, P)


@pytest.mark.parametrize("B, P, block_kv, next_n", [
    (1, 1, 16, 1), (1, 132, 32, 2), (4, 5, 32, 4), (33, 132, 64, 2), (33, 7, 16, 1), (300, 200, 16, 4),
    pytest.param(5000, 17, 64, 2, marks=HEAVY),
])
def test_two_d_matches_torch(B, P, block_kv, next_n):
    g = torch.Generator().manual_seed(B + 7 * P + next_n)
    for kind in ("random", "zeros", "one_mid", "skewed", "huge"):
        c = torch.stack([lens(kind, B, g) for _ in range(next_n)], dim=1)
        if kind == "random":
            c[torch.rand(B, generator=g) < 0.2] = 0  # whole rows empty
            c[torch.rand(B, generator=g) < 0.2, 0] = -3  # a negative row end among positive ones
        check(c.contiguous(), block_kv, P)
        big = torch.full((B, next_n + 3), 99_999, dtype=torch.int32)  # rows and columns of other data between
        big[:, 1:next_n + 1] = c
        check(big[:, 1:next_n + 1], block_kv, P)
        check(c.t().contiguous().t(), block_kv, P)  # column-major: stride_b 1, stride_t B


@pytest.mark.parametrize("B, P", [(1, 3), (300, 132), (4000, 200)])
def test_strided_one_d(B, P):
    g = torch.Generator().manual_seed(B + P)
    c = lens("random", B, g)
    big = torch.full((B * 3 + 1,), 77_777, dtype=torch.int32)
    big[1::3] = c
    check(big[1::3], 16, P)
    big2 = torch.full((B, 2), 55_555, dtype=torch.int32)  # the [B, 1] -> [:, 0]-style view
    big2[:, 1] = c
    check(big2[:, 1], 64, P)


def test_empty_forms():
    check(torch.zeros(0, dtype=torch.int32), 64, 5)  # no sequences
    check(torch.zeros(0, 2, dtype=torch.int32), 64, 5)
    check(torch.zeros(6, 0, dtype=torch.int32), 32, 4)  # no draft rows: all sequences empty
    check(torch.full((9,), -10, dtype=torch.int32), 16, 3)


def test_errors_unchanged():
    c = torch.tensor([10, 20], dtype=torch.int32)
    with pytest.raises(UserError, match="sm100"):
        get_paged_mqa_logits_metadata(c, 64, 4, indices=torch.zeros(2, dtype=torch.int32))
    for bad in (c.long(), c[None, None], [10, 20]):
        with pytest.raises(UserError, match="int32 tensor"):
            get_paged_mqa_logits_metadata(bad, 64, 4)
    with pytest.raises(UserError, match=">= 1"):
        get_paged_mqa_logits_metadata(c, 0, 4)
    with pytest.raises(UserError, match=">= 1"):
        get_paged_mqa_logits_metadata(c, 64, 0)


def test_compiles_for_sm90(tmp_path):
    """Cross-compiles (no GPU needed) in a child process (tests/sm90_builds.py)."""
    for r in sm90_builds.build("paged_schedule", tmp_path, cases=[(64, 1, 132), (5000, 2, 132)]):
        assert r["grid"] == [1] and r["ptx"].count("bar.sync") >= 2, r["name"]
