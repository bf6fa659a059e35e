"""Warp-specialised Gluon paged decode kernel for Hopper (sm90, on the releases of version fact gluon_hopper):
config.py its config, kernel.py the kernel."""

# The constexpr names that make its compiled variants differ (and name them): written once, read by
# config.py (the config) and kernel.py (the kernel's repr).
KEYS = ("NEXT_N", "H", "D", "BS", "NP", "STAGES", "SUBS", "CLEAN", "SELF_SCHEDULE", "PIPE", "MATH_WG",
        "Q_IN_LANES", "MMA_N", "AHEAD", "PTX_SLOTS", "LOADERS", "SPLIT_INSIDE")
