"""Per-row top-k selection over a logits matrix (config.py: its config; kernel.py: the kernel)."""

# The constexpr names that make its compiled variants differ (and name them): written once, read by
# config.py (the config) and kernel.py (the kernel's repr).
KEYS = ("CAP", "SAMPLE", "TILE", "NW", "MARGIN", "WINDOW", "COMPRESSED", "VALUES", "STATS")
