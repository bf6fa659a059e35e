"""The H200 (sm90) choices of the Gluon paged decode kernel, by the wgmma's N = NP x H and the size class
(config.regime): written by `python3 scripts/paged_ws_experiment.py` on
NVIDIA H200, 2026-12-01, triton 3.6.0: every candidate checked against the
reference, then timed by CUDA-graph replay from a cold L2 (2-D context lengths); kept:
the least time summed over the swept shapes of the class (each relative to the portable kernel on that
shape)."""

CUDA_TUNED = {
    64: {
        'small': {'STAGES': 4, 'SUBS': 3},  # st4-sub3: mean 0.834 of the portable kernel's time, 5 shapes
        'large': {'STAGES': 4, 'SUBS': 3},  # st4-sub3: mean 0.832 of the portable kernel's time, 4 shapes
    },
    128: {
        'small': {'PIPE': True, 'STAGES': 5, 'SUBS': 2},  # st5-sub2-pipe: mean 0.783 of the portable kernel's time, 5 shapes
        'large': {'MATH_WG': 4, 'STAGES': 4, 'SUBS': 1},  # st4-sub1-wg4: mean 0.755 of the portable kernel's time, 4 shapes
    },
    256: {
        'small': {'MATH_WG': 2, 'MMA_N': 128, 'STAGES': 6, 'SUBS': 1},  # st6-sub1-wg2-mma128: mean 0.706 of the portable kernel's time, 2 shapes
        'large': {'MATH_WG': 2, 'MMA_N': 128, 'STAGES': 6, 'SUBS': 1},  # st6-sub1-wg2-mma128: mean 0.739 of the portable kernel's time, 2 shapes
    },
}
