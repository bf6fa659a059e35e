"""AMD prefill kernel for H 64 (and 32) x D 128: one query row per wave, its heads in that wave's registers, so the head sum
stays in one wave's registers (config.py: its config; kernel.py: the kernel)."""

# The constexpr names that make its compiled variants differ (and name them): written once, read by
# config.py (the config) and kernel.py (the kernel's repr).
KEYS = ("H", "D", "BLOCK_Q", "BLOCK_KV", "CLEAN", "COMPRESSED", "BF16", "EVEN_S", "ORDER", "DEAD_MULT")
