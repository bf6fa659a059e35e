"""What every kernel shares: KernelConfig and its helpers, the Triton epilogue and prologue, config-aware
kernel names, the Gluon API bridge, and the tuned tables by triton release."""
