"""The shape matrix shared by tests, `verify` and the GPU check script: every layout, S = 1,
N not a multiple of any block, H 8..64, D 64 and 128, non-zero ks, clean on and off."""
from __future__ import annotations

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

# The seed's benchmark shapes (anchors-h200.md): (label, spec, target full-op µs on the H200).
SEED_SUITE: list[tuple[str, ProblemSpec, float]] = [
    ("1x4096 causal", P(batch=1, seq=4096, heads=64, dim=128), 140.0),
    ("1x4096 causal H32", P(batch=1, seq=4096, heads=32, dim=128), 90.0),
    ("1x8192 causal", P(batch=1, seq=8192, heads=64, dim=128), 540.0),
    ("4x8192 ratio 4", P(batch=4, seq=8192, ratio=4, heads=64, dim=128), 600.0),
    ("S4096 N65536 full", P(batch=1, seq=4096, seq_kv=65536, heads=64, dim=128, layout="full"), 4100.0),
    ("1x32768 causal", P(batch=1, seq=32768, heads=64, dim=128), 8600.0),
]
