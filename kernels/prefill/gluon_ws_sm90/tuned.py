"""The H200 (sm90) configs of the Gluon prefill kernel by (heads, dim); a shape listed here is one dispatch
gives this kernel. Two writers, each rewriting only the keys it swept (tools/tune/sweep_heads.py):
`python3 tools/tune/sweep_gluon_prefill.py --write-table` (H 32 and 64 at D 128: warpgroup layout on the
seed shapes, kept when its mean time relative to (2, 1) st4 query-major is below 0.98) and
`python3 tools/tune/sweep_heads.py --write-table` (every other shape: 1x8192 causal, clean, kept when it
beats the fastest portable config by more than 3 %). Every candidate was checked against the float32
reference before it was timed (a CUDA-graph replay per sample after an L2 flush, median; runs before
2026-11-30 17:30 UTC timed the call itself with do_bench). The comment on each line says which run.
Last written on NVIDIA H200, 2026-12-01, triton 3.6.0."""

CUDA_TUNED = {
    (8, 64): {'groups': (1, 3), 'stages': 3, 'q_in_lanes': True, 'n': 128, 'tma_store': True},  # sweep_heads 2026-11-30: gluon 3wg n128 st3 lanes tma 102.2 us, 62 % of the write floor (portable 114.2 us, tiled (tuned.py))
    (8, 128): {'groups': (2, 1), 'stages': 4, 'q_in_lanes': True, 'n': 128},  # sweep_heads 2026-11-30: gluon n128 st4 lanes 108.1 us, 60 % of the write floor (portable 125.0 us, tiled (tuned.py))
    (8, 256): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True, 'n': 128},  # sweep_heads 2026-11-30: gluon n128 st3 lanes 127.7 us, 85 % of the fp8 floor (portable 186.0 us, tiled (tuned.py))
    (16, 64): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True, 'n': 256, 'chains': 4},  # sweep_heads 2026-12-01: gluon n256 st3 lanes c4 112.7 us, 57 % of the write floor (portable 149.7 us, tiled (tuned.py))
    (16, 128): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True, 'n': 256, 'chains': 4},  # sweep_heads 2026-11-30: gluon n256 st3 lanes c4 145.8 us, 74 % of the fp8 floor (portable 193.8 us, tiled (tuned.py))
    (16, 256): {'groups': (1, 3), 'stages': 3, 'q_in_lanes': True, 'n': 128},  # sweep_heads 2026-11-30: gluon 3wg n128 st3 lanes 232.3 us, 93 % of the fp8 floor (portable 309.4 us, tiled (tuned.py))
    (32, 64): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True, 'n': 256},  # sweep_heads 2026-11-30: gluon n256 st3 lanes 197.3 us, 55 % of the fp8 floor (portable 247.8 us, tiled (tuned.py))
    (32, 128): {'groups': (2, 1), 'stages': 4, 'q_in_lanes': True},  # sweep_gluon_prefill 2026-12-01: mean 0.805 of (2, 1) st4 over 2 runs
    (32, 256): {'groups': (1, 3), 'stages': 3, 'q_in_lanes': True, 'n': 128},  # sweep_heads 2026-11-30: gluon 3wg n128 st3 lanes 429.0 us, 101 % of the fp8 floor (portable 557.0 us, tiled (tuned.py))
    (64, 64): {'groups': (2, 1), 'stages': 4, 'q_in_lanes': True, 'n': 256, 'splits': 2, 'ptx_slots': True},  # sweep_heads 2026-12-01: gluon n256 st4 lanes x2 ptx_slots1 365.3 us, 46 % of the fp8 floor (portable 433.0 us, tiled (tuned.py))
    (64, 128): {'groups': (2, 1), 'stages': 4, 'q_in_lanes': True},  # sweep_gluon_prefill 2026-12-01: mean 0.849 of (2, 1) st4 over 10 runs
    (128, 64): {'groups': (1, 3), 'stages': 5, 'q_in_lanes': False, 'n': 128},  # sweep_heads 2026-11-30: gluon 3wg n128 st5 789.6 us, 55 % of the fp8 floor (portable 883.6 us, rule)
    (128, 128): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': False, 'n': 256},  # sweep_heads 2026-12-01: gluon n256 st3 1037.4 us, 65 % of the fp8 floor (portable 1218.3 us, rule)
    (128, 256): {'groups': (1, 3), 'stages': 3, 'q_in_lanes': False, 'n': 128, 'splits': 2},  # sweep_heads 2026-11-30: gluon 3wg n128 st3 x2 1579.2 us, 110 % of the fp8 floor (portable 1989.6 us, rule)
}
