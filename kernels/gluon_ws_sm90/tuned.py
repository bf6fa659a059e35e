"""The H200 (sm90) configs of the Gluon prefill kernel by (heads, dim); a shape listed here is one dispatch
gives this kernel. Two writers, each rewriting only the keys it swept (scripts/gluon_table.py):
`python3 scripts/sweep_gluon_prefill.py --write-table` (H 32 and 64 at D 128: warpgroup layout on the
seed shapes, kept when its mean time relative to (2, 1) st4 query-major is below 0.98) and
`python3 scripts/sweep_heads.py --write-table` (every other shape: 1x8192 causal, clean, kept when it
beats the fastest portable config by more than 3 %). Every candidate was checked against the float32
reference before it was timed (do_bench median, L2 flushed). The comment on each line says which run.
Last written on NVIDIA H200, 2026-11-30, triton 3.6.0."""

CUDA_TUNED = {
    (8, 64): {'groups': (2, 1), 'stages': 4, 'q_in_lanes': True, 'n': 256, 'splits': 2},  # sweep_heads 2026-11-30: gluon n256 st4 lanes x2 106.6 us, 60 % of the write floor (portable 114.9 us, dispatched (tuned.py))
    (8, 128): {'groups': (2, 1), 'stages': 4, 'q_in_lanes': True, 'n': 128},  # sweep_heads 2026-11-30: gluon n128 st4 lanes 108.9 us, 59 % of the write floor (portable 125.5 us, tiled (tuned.py))
    (8, 256): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True, 'n': 128},  # sweep_heads 2026-11-30: gluon n128 st3 lanes 125.4 us, 86 % of the fp8 floor (portable 185.6 us, tiled (tuned.py))
    (16, 64): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True, 'n': 256},  # sweep_heads 2026-11-30: gluon n256 st3 lanes 129.3 us, 50 % of the write floor (portable 150.7 us, tiled (tuned.py))
    (16, 128): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True, 'n': 256, 'splits': 2},  # sweep_heads 2026-11-30: gluon n256 st3 lanes x2 149.0 us, 73 % of the fp8 floor (portable 192.1 us, tiled (tuned.py))
    (16, 256): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True, 'n': 128},  # sweep_heads 2026-11-30: gluon n128 st3 lanes 239.5 us, 90 % of the fp8 floor (portable 306.8 us, tiled (tuned.py))
    (32, 64): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True, 'n': 256},  # sweep_heads 2026-11-30: gluon n256 st3 lanes 197.9 us, 55 % of the fp8 floor (portable 252.1 us, tiled (tuned.py))
    (32, 128): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True},  # sweep_gluon_prefill 2026-11-30: mean 0.880 of (2, 1) st4 over 2 runs
    (32, 256): {'groups': (2, 1), 'stages': 4, 'q_in_lanes': True, 'n': 128, 'splits': 2},  # sweep_heads 2026-11-30: gluon n128 st4 lanes x2 422.8 us, 102 % of the fp8 floor (portable 522.8 us, tiled (tuned.py))
    (64, 64): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True, 'n': 256},  # sweep_heads 2026-11-30: gluon n256 st3 lanes 368.3 us, 59 % of the fp8 floor (portable 433.9 us, tiled (tuned.py))
    (64, 128): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True},  # sweep_gluon_prefill 2026-11-30: mean 0.886 of (2, 1) st4 over 10 runs
    (128, 64): {'groups': (2, 1), 'stages': 4, 'q_in_lanes': False, 'n': 256, 'splits': 2},  # sweep_heads 2026-11-30: gluon n256 st4 x2 796.7 us, 54 % of the fp8 floor (portable 888.9 us, rule)
    (128, 128): {'groups': (2, 1), 'stages': 4, 'q_in_lanes': False, 'n': 256},  # sweep_heads 2026-11-30: gluon n256 st4 1016.2 us, 85 % of the fp8 floor (portable 1186.0 us, rule)
    (128, 256): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': False, 'n': 128, 'splits': 2},  # sweep_heads 2026-11-30: gluon n128 st3 x2 1665.0 us, 104 % of the fp8 floor (portable 1941.0 us, rule)
}
