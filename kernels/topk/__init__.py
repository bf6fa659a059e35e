"""Per-row top-k selection over a logits matrix (config.py: its config and cost model; kernel.py: the kernels;
tuned.py: the H200 table tools/tune/sweep_topk.py writes)."""

# The constexpr names that make its compiled variants differ (and name them): written once, read by
# config.py (the config) and kernel.py (the kernels' repr).
KEYS = ("CAP", "SAMPLE", "TILE", "NW", "MARGIN", "WINDOW", "COMPRESSED", "PAGED", "VALUES", "STATS", "R8",
        "NARROW", "CAND")
RADIX_WS = 4100 + 3 * 64  # int32 workspace words a row of the radix select (kernel.py: its layout; 64 = PMAX)
