"""What every kernel shares: KernelConfig and its helpers, the Triton epilogue and prologue, config-aware
kernel names, the Gluon API bridge, the Gluon ring and head sums, the version facts, and the overlay of a
variant's tuned entries by triton release. It imports no variant (tests/test_structure.py)."""
