"""The H200 (sm90) warpgroup layout of the Gluon prefill kernel by head count: written by
`python3 scripts/sweep_gluon_prefill.py --write-table` on NVIDIA H200, 2026-11-30, triton 3.6.0.
Every candidate checked against the float32 reference, then timed (do_bench median, L2 flushed) on the
seed shapes, clean and not; the best kept when its mean time relative to (2, 1) st4 (query-major) is
below 0.98, else that baseline."""

CUDA_TUNED = {
    32: {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True},  # best: mean 0.856 of (2, 1) st4 over 2 runs
    64: {'groups': (2, 1), 'stages': 3, 'q_in_lanes': True},  # best: mean 0.914 of (2, 1) st4 over 10 runs
}
