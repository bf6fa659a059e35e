"""The H200 (sm90) warpgroup layout of the Gluon prefill kernel by head count: written by
`python3 scripts/sweep_gluon_prefill.py --write-table`. Empty until that sweep has run: every head count keeps
the default layout, groups (2, 1), 4 stages."""

CUDA_TUNED = {
}
