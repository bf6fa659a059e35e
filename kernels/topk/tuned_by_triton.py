"""This variant's choices by triton release, laid over tuned.py's on that release alone
(mqa_kernels.common.tuned_by_triton.table). Triton 3.8 (vLLM 0.34's and SGLang 0.5.23's): the decode regimes, chosen
on an H100 from the configs each shape's selection was timed with, exact first (docs/PERFORMANCE.md, "The indexer
step"); other releases keep tuned.py's."""
BY_RELEASE: dict = {
    (3, 8): {
        # at most one row per 8 SMs (decode at batch 1-16): 16 warps a program; a row of up to 8192 columns
        # searched in registers by one program
        "lone": {
            8192: {"kind": "split", "num_warps": 16, "tile": 4096, "parts": 16, "cap": 8192},
            32768: {"kind": "split", "num_warps": 16, "tile": 4096, "parts": 8},
            65536: {"kind": "split", "num_warps": 16, "tile": 4096, "parts": 16},
        },
        # few rows (decode at batch 17-128): up to 8192 columns, one 16-warp program a row, in registers; longer
        # rows as tuned.py's 'split' (its two entries, the regime's whole value on this release)
        "split": {
            8192: {"kind": "rows", "num_warps": 16, "tile": 4096, "programs_per_unit": 1, "cap": 8192},
            16384: {"kind": "rows", "num_warps": 4, "tile": 1024, "programs_per_unit": 4},
            131072: {"num_warps": 8, "tile": 2048, "maxnreg": 128, "programs_per_unit": 4},
        },
    },
}
