"""The H200 (sm90) choices of the Gluon paged decode kernel, by live columns next_n x H (H 64 in the sweep;
config.table_entry falls back to the padded N = NP x H for other head counts) and the size class
(config.regime): written by `python3 tools/tune/paged_ws_experiment.py` on
NVIDIA H200, 2026-12-01, triton 3.6.0: every candidate checked against the
reference, then timed by CUDA-graph replay from a cold L2 (2-D context lengths); kept:
the least time summed over the swept shapes of the class (each relative to the portable kernel on that
shape)."""

CUDA_TUNED = {
    64: {
        'small': {'STAGES': 4, 'SUBS': 3},  # st4-sub3: mean 0.833 of the portable kernel's time, 6 shapes
        'large': {'MATH_WG': 2, 'STAGES': 4, 'SUBS': 2},  # st4-sub2-wg2: mean 0.796 of the portable kernel's time, 3 shapes
    },
    128: {
        'small': {'PIPE': True, 'STAGES': 5, 'SUBS': 2},  # st5-sub2-pipe: mean 0.779 of the portable kernel's time, 6 shapes
        'large': {'MATH_WG': 4, 'STAGES': 4, 'SUBS': 1},  # st4-sub1-wg4-wgl (four producer warps): mean 0.678 of the portable kernel's time, 3 shapes
    },
    192: {
        'small': {'MATH_WG': 2, 'MMA_N': 64, 'STAGES': 6, 'SUBS': 1},  # st6-sub1-wg2-mma64: mean 0.652 of the portable kernel's time, 1 shapes
        'large': {'MATH_WG': 2, 'MMA_N': 64, 'STAGES': 6, 'SUBS': 1},  # st6-sub1-wg2-mma64: mean 0.676 of the portable kernel's time, 1 shapes
    },
    256: {
        'small': {'MATH_WG': 2, 'Q_IN_LANES': True, 'STAGES': 8, 'SUBS': 1},  # st8-sub1-wg2-lanes: mean 0.750 of the portable kernel's time, 1 shapes
        'large': {'MATH_WG': 2, 'STAGES': 6, 'SUBS': 1},  # st6-sub1-wg2: mean 0.812 of the portable kernel's time, 1 shapes
    },
    320: {
        'small': {'AHEAD': False, 'MATH_WG': 3, 'MMA_N': 128, 'PTX_SLOTS': True, 'STAGES': 3, 'SUBS': 1},  # st3-sub1-wg3-mma128-seq-ptx: mean 0.361 of the portable kernel's time, 1 shapes
        'large': {'AHEAD': False, 'MATH_WG': 3, 'MMA_N': 64, 'PTX_SLOTS': True, 'STAGES': 4, 'SUBS': 1},  # st4-sub1-wg3-mma64-seq-ptx: mean 0.348 of the portable kernel's time, 1 shapes
    },
    384: {
        'small': {'AHEAD': False, 'MATH_WG': 3, 'MMA_N': 128, 'PTX_SLOTS': True, 'STAGES': 3, 'SUBS': 1},  # st3-sub1-wg3-mma128-seq-ptx: mean 0.392 of the portable kernel's time, 1 shapes
        'large': {'AHEAD': False, 'MATH_WG': 3, 'MMA_N': 128, 'PTX_SLOTS': True, 'STAGES': 3, 'SUBS': 1},  # st3-sub1-wg3-mma128-seq-ptx: mean 0.376 of the portable kernel's time, 1 shapes
    },
    448: {
        'small': {'AHEAD': False, 'MATH_WG': 3, 'MMA_N': 128, 'STAGES': 3, 'SUBS': 1},  # st3-sub1-wg3-mma128-seq: mean 0.483 of the portable kernel's time, 1 shapes
        'large': {'AHEAD': False, 'MATH_WG': 3, 'MMA_N': 128, 'STAGES': 3, 'SUBS': 1},  # st3-sub1-wg3-mma128-seq: mean 0.466 of the portable kernel's time, 1 shapes
    },
    512: {
        'small': {'MATH_WG': 2, 'MMA_N': 128, 'STAGES': 4, 'SUBS': 1},  # st4-sub1-wg2-mma128: mean 0.555 of the portable kernel's time, 1 shapes
        'large': {'AHEAD': False, 'MATH_WG': 3, 'MMA_N': 128, 'PTX_SLOTS': True, 'STAGES': 3, 'SUBS': 1},  # st3-sub1-wg3-mma128-seq-ptx: mean 0.544 of the portable kernel's time, 1 shapes
    },
}
