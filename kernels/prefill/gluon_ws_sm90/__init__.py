"""Warp-specialised Gluon prefill kernel for Hopper (sm90, on the releases of version fact gluon_hopper): config.py its
config, kernel.py the kernel."""

# The constexpr names that make its compiled variants differ (and name them): written once, read by
# config.py (the config) and kernel.py (the kernel's repr).
KEYS = ("H", "D", "BLOCK_Q", "BLOCK_KV", "STAGES", "CLEAN", "COMPRESSED", "BF16", "MATH_REGS", "SMALL_REGS",
        "Q_GROUPS", "KV_GROUPS", "Q_IN_LANES", "TMA_STORE", "CHAINS", "TILE_PTR", "PTX_SLOTS", "PINGPONG")
