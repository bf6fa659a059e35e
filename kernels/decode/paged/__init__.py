"""Paged decode kernel: a persistent, length-balanced walk of the fp8 kv cache (config.py: its config;
kernel.py: the kernel; mqa_cli.launch.schedule computes the balanced split on the device)."""

# The constexpr names that make its compiled variants differ (and name them): written once, read by
# config.py (the config) and kernel.py (the kernel's repr).
KEYS = ("NEXT_N", "H", "D", "BS", "BLOCK_KV", "ROWS", "CHUNKS", "SUBS", "CLEAN", "SELF_SCHEDULE")
