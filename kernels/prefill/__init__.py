"""Prefill kernels, one home per variant: tiled (portable Triton), h64d128 (specialised Triton, sm90),
heads_on_m (Triton for AMD's matrix cores, gfx950 and gfx942), gluon_ws_sm90 (warp-specialised Gluon)."""
