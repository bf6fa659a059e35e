"""Schedule metadata of the paged decode kernel in one launch (config.py: its config; kernel.py: the kernel;
mqa_cli.launch.schedule launches it)."""

# The constexpr names that make its compiled variants differ (and name them): written once, read by
# config.py (the config) and kernel.py (the kernel's repr).
KEYS = ("CHUNK", "PBLOCK")
