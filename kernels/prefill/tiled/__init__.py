"""Portable prefill kernel: any Triton target and the interpreter (config.py: its config; kernel.py: the kernel)."""

# The constexpr names that make its compiled variants differ (and name them): written once, read by
# config.py (the config) and kernel.py (the kernel's repr).
KEYS = ("H", "D", "BLOCK_Q", "BLOCK_KV", "CLEAN", "COMPRESSED", "BF16", "HEAD_MAJOR")
