"""Prefill kernels, one home per variant: tiled (portable Triton), h64d128 (specialised Triton),
gluon_ws_sm90 (warp-specialised Gluon)."""
