"""The H200 (sm90) warpgroup layout of the Gluon prefill kernel by head count: written by
`python3 scripts/sweep_gluon_prefill.py --write-table` on NVIDIA H200, 2026-11-30, triton 3.6.0.
Every candidate checked against the float32 reference, then timed (do_bench median, L2 flushed) on the
seed shapes, clean and not; kept when its mean time relative to (2, 1) st4 is below 0.98."""

CUDA_TUNED = {
}
