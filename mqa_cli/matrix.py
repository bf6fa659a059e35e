"""The shape matrix shared by tests, `verify` and the GPU check script: every layout, S = 1,
N not a multiple of any block, H 8..64, D 64 and 128, non-zero ks, clean on and off."""
from __future__ import annotations

from dataclasses import dataclass

from .problem import ProblemSpec

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
    P(batch=1, seq=4096, heads=64, dim=128, layout="causal"),
    P(batch=4, seq=8192, ratio=4, heads=64, dim=128, layout="causal"),
    P(batch=1, seq=32768, heads=64, dim=128, layout="causal"),
]


@dataclass(frozen=True)
class BenchShape:
    """A benchmark shape; on the H200, the reference implementation's full-op time and our target."""

    name: str
    spec: ProblemSpec
    target_us: float | None = None  # issue target on the H200, full op (clean_logits)
    reference_us: float | None = None  # DeepGEMM full op on the H200 (anchors-h200.md)
    reference_kernel_us: float | None = None  # DeepGEMM kernel only (clean_logits=False)


# The seed's benchmark shapes, with DeepGEMM's figures measured on the project's H200 (anchors-h200.md).
SEED_SUITE: list[BenchShape] = [
    BenchShape("1x4096 causal", P(batch=1, seq=4096, heads=64, dim=128), 140.0, 163.0, 146.0),
    BenchShape("1x4096 causal H32", P(batch=1, seq=4096, heads=32, dim=128), 90.0, 105.0, 84.0),
    BenchShape("1x8192 causal", P(batch=1, seq=8192, heads=64, dim=128), 540.0, 617.0, 585.0),
    BenchShape("4x8192 ratio 4", P(batch=4, seq=8192, ratio=4, heads=64, dim=128), 600.0, 882.0, 648.0),
    BenchShape("S4096 N65536 full", P(batch=1, seq=4096, seq_kv=65536, heads=64, dim=128, layout="full"),
               4100.0, 4488.0, 4675.0),
    BenchShape("1x32768 causal", P(batch=1, seq=32768, heads=64, dim=128), 8600.0, 9421.0, 9218.0),
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

SUITES = {"seed": SEED_SUITE, "dsv32": DSV32_SUITE, "dsv4": DSV4_SUITE}
