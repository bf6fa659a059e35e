"""The H200 (sm90) configs of the top-k selection, by regime ('rows': many rows, one program each at a
time; 'split': few long rows, several programs each) and power-of-two row length: written by
`python3 tools/tune/sweep_topk.py --write-table` on NVIDIA H200 (132 SMs), 2026-11-30, triton 3.6.0.
Every config was checked (exact top-k of the same fp32 logits) before it was timed; the one with the
least total time over the bucket's shapes is kept. WORKSPACE: bytes of logits fp8_mqa_topk holds at
once, by row length, where more than 256 MiB measured > 3 % faster."""

CUDA_TUNED = {
    'rows': {
        # num_warps=4,tile=1024,maxnreg=96,narrow=256,programs_per_unit=8: 116.7 us over 1 shapes (1x4096 causal)
        4096: {'num_warps': 4, 'tile': 1024, 'maxnreg': 96, 'narrow': 256, 'programs_per_unit': 8},
        # num_warps=4,tile=512,narrow=256,programs_per_unit=4: 569.5 us over 2 shapes (1x8192 causal, 4x8192 ratio 4)
        8192: {'num_warps': 4, 'tile': 512, 'narrow': 256, 'programs_per_unit': 4},
        # num_warps=4,tile=1024,maxnreg=96,narrow=256,programs_per_unit=8: 3407.2 us over 1 shapes (1x32768 causal)
        32768: {'num_warps': 4, 'tile': 1024, 'maxnreg': 96, 'narrow': 256, 'programs_per_unit': 8},
    },
    'split': {
        # kind=rows,num_warps=4,tile=1024,programs_per_unit=4: 95.5 us over 2 shapes (paged B64 C8K n1, paged B128 C8K n1)
        16384: {'kind': 'rows', 'num_warps': 4, 'tile': 1024, 'programs_per_unit': 4},
        # kind=split,num_warps=8,tile=2048,maxnreg=128,programs_per_unit=4: 204.0 us over 2 shapes (paged B64 C64K n1, paged B128 C64K n1)
        131072: {'num_warps': 8, 'tile': 2048, 'maxnreg': 128, 'programs_per_unit': 4},
    },
}
WORKSPACE = {}
