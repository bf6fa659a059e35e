"""The H200 (sm90) choices of the Gluon paged decode kernel, by the wgmma's N = NP x H: written by
`python3 scripts/paged_ws_experiment.py --write-table` on NVIDIA H200, 2026-11-30, triton 3.6.0: every candidate checked against the reference,
then timed by CUDA-graph replay; kept: the least time summed over the swept shapes (each relative to the
portable kernel on that shape)."""

CUDA_TUNED = {
    64: {'STAGES': 4, 'SUBS': 3, 'PIPE': False},  # mean 0.832 of the portable kernel's time over 9 shapes
    128: {'STAGES': 5, 'SUBS': 2, 'PIPE': True},  # mean 0.794 of the portable kernel's time over 9 shapes
    256: {'STAGES': 8, 'SUBS': 1, 'PIPE': False},  # mean 0.915 of the portable kernel's time over 4 shapes
}
