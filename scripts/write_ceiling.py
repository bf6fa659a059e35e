"""What the card writes per second when writing is all a kernel does: the ceiling a write-bound logits shape (small
H, clean logits: the [S, N] fp32 output is most of the bytes) can approach, beside the copy rate the floors use.

Times torch's fill_ of a [8192, 8192] fp32 buffer (268 MB written) and a copy of it (268 MB read + 268 MB written),
do_bench median with the L2 flushed, and prints both rates.

    python3 scripts/write_ceiling.py        (the H200)
"""
from __future__ import annotations


def main() -> int:
    import torch
    import triton

    n = 8192 * 8192
    a = torch.empty(n, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a).normal_()
    fill = triton.testing.do_bench(lambda: a.fill_(float("-inf")), warmup=20, rep=200, return_mode="median") * 1e3
    copy = triton.testing.do_bench(lambda: a.copy_(b), warmup=20, rep=200, return_mode="median") * 1e3
    print(f"{torch.cuda.get_device_name()}: fill {n * 4 / 1e6:.0f} MB in {fill:.1f} us = {n * 4 / fill / 1e6:.2f} TB/s "
          f"written; copy {n * 8 / 1e6:.0f} MB moved in {copy:.1f} us = {n * 8 / copy / 1e6:.2f} TB/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
