"""Paged decode kernels, one home per variant: paged (portable Triton), paged_ws_sm90 (warp-specialised
Gluon), and paged_schedule (the one-launch schedule metadata both read)."""
