"""The shape matrix shared by tests, `verify` and the GPU check script: every layout, S = 1,
N not a multiple of any block, H 8..64, D 64 and 128, non-zero ks, clean on and off."""
from __future__ import annotations

from dataclasses import dataclass

from .prefill import ProblemSpec

P = ProblemSpec

VERIFY_MATRIX: list[ProblemSpec] = [
    P(batch=1, seq=1, seq_kv=113, heads=64, dim=128, layout="full"),
    P(batch=1, seq=17, seq_kv=76, heads=8, dim=64, layout="full"),
    P(batch=1, seq=200, heads=16, dim=64, layout="causal"),
    P(batch=1, seq=200, heads=16, dim=64, layout="causal", clean_logits=False),
    P(batch=2, seq=96, ratio=4, heads=32, dim=128, layout="causal"),
    P(batch=3, seq=100, heads=8, dim=128, layout="window", window=37),
    P(batch=1, seq=64, seq_kv=256, heads=64, dim=128, layout="cp"),
    P(batch=2, seq=128, seq_kv=77, heads=64, dim=64, layout="full", clean_logits=False),
    P(batch=1, seq=130, heads=64, dim=128, layout="causal", seed=7),
    P(batch=2, seq=33, heads=32, dim=64, layout="window", window=5, clean_logits=False),
]

# Sizes only a GPU checks in reasonable time.
GPU_EXTRA: list[ProblemSpec] = [
    # Odd sizes for the sm90 rows (S >= 1024, H 64 / 32, D 128), clean on and off.
    P(batch=1, seq=1031, seq_kv=2061, heads=64, dim=128, layout="causal"),
    P(batch=3, seq=1100, heads=64, dim=128, layout="window", window=300, clean_logits=False),
    P(batch=2, seq=2048, seq_kv=8192, heads=64, dim=128, layout="cp", clean_logits=False),
    P(batch=1, seq=1027, heads=32, dim=128, layout="causal"),
    P(batch=2, seq=4100, ratio=4, heads=32, dim=128, layout="causal", clean_logits=False),
    P(batch=1, seq=4096, heads=64, dim=128, layout="causal"),
    P(batch=4, seq=8192, ratio=4, heads=64, dim=128, layout="causal"),
    P(batch=1, seq=32768, heads=64, dim=128, layout="causal"),
]


# Where the reference figures below come from (docs/REFERENCE.md has the whole table and method).
REFERENCE_SOURCE = "DeepGEMM 54e2261 on the H200, 2026-11-29 (docs/REFERENCE.md)"


@dataclass(frozen=True)
class BenchShape:
    """A benchmark shape and, where measured, the reference implementation's time on the H200."""

    name: str
    spec: ProblemSpec
    reference_us: float | None = None  # DeepGEMM full op (clean_logits), REFERENCE_SOURCE
    reference_kernel_us: float | None = None  # DeepGEMM kernel only (clean_logits=False)


# The benchmark shapes of aiter's pull request, with DeepGEMM's figures on the H200 (REFERENCE_SOURCE).
SEED_SUITE: list[BenchShape] = [
    BenchShape("1x4096 causal", P(batch=1, seq=4096, heads=64, dim=128), 163.0, 146.0),
    BenchShape("1x4096 causal H32", P(batch=1, seq=4096, heads=32, dim=128), 105.0, 84.0),
    BenchShape("1x8192 causal", P(batch=1, seq=8192, heads=64, dim=128), 617.0, 585.0),
    BenchShape("4x8192 ratio 4", P(batch=4, seq=8192, ratio=4, heads=64, dim=128), 882.0, 648.0),
    BenchShape("S4096 N65536 full", P(batch=1, seq=4096, seq_kv=65536, heads=64, dim=128, layout="full"),
               4488.0, 4675.0),
    BenchShape("1x32768 causal", P(batch=1, seq=32768, heads=64, dim=128), 9421.0, 9218.0),
]

# Head counts and dims the reference cannot run on Hopper (1x8192 causal): ours alone, against the floor.
HEADS_SUITE: list[BenchShape] = [
    BenchShape(f"1x8192 causal H{h} D{d}", P(batch=1, seq=8192, heads=h, dim=d))
    for h, d in ((8, 64), (8, 128), (16, 64), (16, 128), (32, 128), (64, 64), (128, 128), (64, 256))
]

# DeepSeek V3.2 prefill (H 64, D 128, causal): chunk lengths an engine sees.
DSV32_SUITE: list[BenchShape] = [
    BenchShape(f"v3.2 1x{L} causal", P(batch=1, seq=L, heads=64, dim=128)) for L in (2048, 4096, 8192, 16384)
] + [BenchShape("v3.2 4x4096 causal", P(batch=4, seq=4096, heads=64, dim=128))]

# DeepSeek V4 compressed indexer (ratio 4).
DSV4_SUITE: list[BenchShape] = [
    BenchShape(f"v4 {B}x{L} ratio 4", P(batch=B, seq=L, ratio=4, heads=64, dim=128))
    for B, L in ((1, 8192), (4, 8192), (1, 32768), (2, 16384))
]

SUITES = {"seed": SEED_SUITE, "dsv32": DSV32_SUITE, "dsv4": DSV4_SUITE, "heads": HEADS_SUITE}


# ------------------------------------------------------------------------------------------- paged decode
from .paged import PagedSpec  # noqa: E402

PG = PagedSpec

# `verify --paged`: next_n 1, 2, 3, 4, 8 (and 5), block sizes 16/32/64, H 8..64, D 64/128, clean on/off,
# B = 1, contexts not a multiple of any block, and one very long context among many short ones.
PAGED_VERIFY_MATRIX: list[PagedSpec] = [
    PG(batch=1, next_n=1, context_len=200, context_jitter=0.0, block_size=64, heads=64, dim=128),
    PG(batch=3, next_n=2, context_len=150, block_size=16, heads=8, dim=64),
    PG(batch=2, next_n=3, context_len=130, block_size=32, heads=32, dim=128),
    PG(batch=2, next_n=4, context_len=100, block_size=64, heads=16, dim=64, clean_logits=False),
    PG(batch=2, next_n=8, context_len=90, block_size=16, heads=64, dim=128),
    PG(batch=2, next_n=8, context_len=77, block_size=32, heads=8, dim=64, clean_logits=False),
    PG(batch=8, next_n=2, block_size=16, heads=16, dim=64, contexts=(1500, 2, 17, 64, 5, 129, 8, 33)),
    PG(batch=1, next_n=4, context_len=333, context_jitter=0.0, block_size=16, heads=32, dim=64, seed=3),
    PG(batch=4, next_n=1, context_len=256, context_jitter=0.0, block_size=64, heads=64, dim=128, clean_logits=False),
    PG(batch=2, next_n=5, context_len=70, block_size=32, heads=64, dim=64, seed=5),
]

# Sizes only a GPU checks in reasonable time (verify --paged --large).
PAGED_GPU_EXTRA: list[PagedSpec] = [
    PG(batch=16, next_n=3, context_len=8192, block_size=64, heads=64, dim=128),
    PG(batch=16, next_n=4, context_len=8192, block_size=32, heads=64, dim=128),
    PG(batch=16, next_n=8, context_len=8192, block_size=16, heads=64, dim=128),
    PG(batch=33, next_n=2, block_size=64, heads=64, dim=128, contexts=(65536,) + tuple(range(3, 3 + 32 * 37, 37))),
    PG(batch=64, next_n=1, context_len=65536, block_size=64, heads=64, dim=128),
]

# bench --suite decode: B x context x next_n at H 64, D 128, block 64, jitter 0.3, clean_logits off as in
# the reference figures (REFERENCE_SOURCE: DeepGEMM, clean off, do_bench median with L2 flush, µs).
DECODE_REFERENCE_US: dict = {  # (B, C, next_n) -> µs
    (1, 8192, 1): 6.8, (1, 8192, 2): 7.2, (8, 8192, 1): 9.5, (8, 8192, 2): 10.7, (64, 8192, 1): 28.8,
    (64, 8192, 2): 31.2, (128, 8192, 1): 46.6, (128, 8192, 2): 49.4, (8, 32768, 1): 18.8, (8, 32768, 2): 19.9,
    (64, 32768, 1): 81.4, (64, 32768, 2): 87.3, (1, 65536, 1): 11.0, (1, 65536, 2): 11.9, (8, 65536, 1): 32.5,
    (8, 65536, 2): 34.3, (32, 65536, 1): 85.2, (32, 65536, 2): 90.7, (64, 65536, 1): 155.3, (64, 65536, 2): 164.1,
    (128, 65536, 1): 285.5, (128, 65536, 2): 313.5,
}

DECODE_SUITE: list[PagedSpec] = [
    PG(batch=B, next_n=T, context_len=C, context_jitter=0.3, block_size=64, heads=64, dim=128, clean_logits=False)
    for C in (8192, 32768, 65536) for B in (1, 8, 32, 64, 128) for T in (1, 2, 4)
] + [PG(batch=4096, next_n=1, context_len=8192, context_jitter=0.3, block_size=64, heads=64, dim=128,
        clean_logits=False)]

# bench --suite drafts: next_n 3-8 (speculative draft rows, which DeepGEMM does not run on sm90) at the batches
# and contexts where the floor binds (compute from next_n 3 at H 64), no reference figure: the floor is the mark.
DRAFTS_SUITE: list[PagedSpec] = [
    PG(batch=B, next_n=T, context_len=C, context_jitter=0.3, block_size=64, heads=64, dim=128, clean_logits=False)
    for C in (8192, 65536) for B in (64, 128) for T in range(3, 9)
]

PAGED_SUITES: dict = {"decode": DECODE_SUITE, "drafts": DRAFTS_SUITE}  # bench's paged suites by name
