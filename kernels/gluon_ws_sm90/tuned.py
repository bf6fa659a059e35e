"""The H200 (sm90) configs of the Gluon prefill kernel by (heads, dim); a shape listed here is one dispatch
gives this kernel. Two writers, each rewriting only the keys it swept (scripts/gluon_table.py):
`python3 scripts/sweep_gluon_prefill.py --write-table` (H 32 and 64 at D 128: warpgroup layout on the
seed shapes, kept when its mean time relative to (2, 1) st4 query-major is below 0.98) and
`python3 scripts/sweep_heads.py --write-table` (every other shape: 1x8192 causal, clean, kept when it
beats the fastest portable config by more than 3 %). Every candidate was checked against the float32
reference before it was timed (do_bench median, L2 flushed). The comment on each line says which run.
Last written on NVIDIA H200, 2026-11-30, triton 3.6.0."""

CUDA_TUNED = {
    (8, 128): {'groups': (2, 1), 'stages': 4, 'q_in_lanes': True, 'n': 128},  # sweep_heads 2026-11-30: gluon n128 st4 lanes 107.8 us, 60 % of the write floor (portable 124.4 us, dispatched (tuned.py))
    (8, 256): {'groups': (2, 1), 'stages': 4, 'q_in_lanes': True, 'n': 128},  # sweep_heads 2026-11-30: gluon n128 st4 lanes 127.4 us, 85 % of the fp8 floor (portable 186.7 us, dispatched (tuned.py))
    (16, 64): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True, 'n': 256},  # sweep_heads 2026-11-30: gluon n256 st3 lanes 130.0 us, 50 % of the write floor (portable 149.0 us, dispatched (tuned.py))
    (16, 128): {'groups': (2, 1), 'stages': 4, 'q_in_lanes': True, 'n': 256},  # sweep_heads 2026-11-30: gluon n256 st4 lanes 150.1 us, 72 % of the fp8 floor (portable 192.4 us, dispatched (tuned.py))
    (16, 256): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True, 'n': 128},  # sweep_heads 2026-11-30: gluon n128 st3 lanes 246.9 us, 88 % of the fp8 floor (portable 307.5 us, dispatched (tuned.py))
    (32, 64): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True, 'n': 256},  # sweep_heads 2026-11-30: gluon n256 st3 lanes 197.6 us, 55 % of the fp8 floor (portable 248.9 us, dispatched (tuned.py))
    (32, 128): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True},  # best: mean 0.856 of (2, 1) st4 over 2 runs
    (32, 256): {'groups': (2, 1), 'stages': 4, 'q_in_lanes': True, 'n': 128},  # sweep_heads 2026-11-30: gluon n128 st4 lanes 457.4 us, 95 % of the fp8 floor (portable 554.1 us, dispatched (tuned.py))
    (64, 64): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True, 'n': 256},  # sweep_heads 2026-11-30: gluon n256 st3 lanes 370.9 us, 58 % of the fp8 floor (portable 433.1 us, dispatched (tuned.py))
    (64, 128): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True},  # best: mean 0.914 of (2, 1) st4 over 10 runs
    (128, 64): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': False, 'n': 256},  # sweep_heads 2026-11-30: gluon n256 st3 794.0 us, 55 % of the fp8 floor (portable 879.4 us, rule)
    (128, 128): {'groups': (2, 1), 'stages': 3, 'q_in_lanes': False, 'n': 256},  # sweep_heads 2026-11-30: gluon n256 st3 1055.6 us, 82 % of the fp8 floor (portable 1171.8 us, rule)
    (128, 256): {'groups': (2, 1), 'stages': 4, 'q_in_lanes': False, 'n': 128},  # sweep_heads 2026-11-30: gluon n128 st4 1728.2 us, 100 % of the fp8 floor (portable 1938.9 us, rule)
}
