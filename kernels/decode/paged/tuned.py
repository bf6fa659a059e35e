"""The H200 (sm90) configs of the paged decode kernel, by the dot's width N = next_n x H: from
`python3 tools/tune/paged_experiment.py` on the NVIDIA H200, 2026-11-30, triton 3.6.0 (two runs; every config
checked against the reference before it was timed, CUDA-graph replay). `--write-table` rewrites this file
from a sweep; the entries below are that sweep's winners (its CSV: paged_sweep.csv under $OUT)."""

CUDA_TUNED = {
    64: {"BLOCK_KV": 64, "num_stages": 5, "SUBS": 4},  # pl5-kv64-s4
    128: {"BLOCK_KV": 128, "num_stages": 6, "SUBS": 2},  # r2-pl6-kv128-s2
    256: {"ROWS": 2, "BLOCK_KV": 64, "num_stages": 5, "SUBS": 3, "maxnreg": 168},  # r2-pl5-kv64-s3-r168
    512: {"BLOCK_KV": 64, "num_stages": 5, "SUBS": 2},  # not swept: the 256 rule's fallback
}
