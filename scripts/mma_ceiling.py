"""What the H200's tensor cores sustain on fp8 wgmma when nothing else runs: the ceiling the compute-bound floors
should use. The floors so far used 1270 TF/s, a plain fp8 matmul's rate, and the prefill kernel passed it at D 256
(1282-1393 TF/s), so that number is a matmul's rate, not the card's.

One program per SM, two warpgroups (M 128 = 2 x 64 rows), each looping wgmma [64, K] x [K, N] from shared memory
into a fp32 accumulator (async, one group in flight), on random fp8 operands (zeros draw less power, and the card
runs at its 700 W cap). No loads, no epilogue. TF/s = programs x iterations x 2 x 128 x N x K / time (do_bench
median). N 256 and 128, K 128 and 64 (the prefill kernel's wgmma shapes).

    python3 scripts/mma_ceiling.py      (the H200; --cpu-compile: only cross-compile for sm90, no GPU)
"""
from __future__ import annotations

import sys

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, warpgroup_mma, warpgroup_mma_wait

M = 128  # two warpgroups of 64 rows


@gluon.jit
def operands_in_shared(a_ptr, b_ptr, M: gl.constexpr, N: gl.constexpr, K: gl.constexpr):
    """fp8 A [M, K] and B [N, K] (row-major, K contiguous) loaded once into wgmma-swizzled shared memory, fenced
    for the async proxy. (Also scripts/overlap_probe.py's.)"""
    ld: gl.constexpr = gl.BlockedLayout([1, 16], [4, 8], [gl.num_warps(), 1], [1, 0])
    rows_a = gl.arange(0, M, layout=gl.SliceLayout(1, ld))
    rows_b = gl.arange(0, N, layout=gl.SliceLayout(1, ld))
    cols = gl.arange(0, K, layout=gl.SliceLayout(0, ld))
    a_val = gl.load(a_ptr + gl.expand_dims(rows_a, 1) * K + gl.expand_dims(cols, 0))
    b_val = gl.load(b_ptr + gl.expand_dims(rows_b, 1) * K + gl.expand_dims(cols, 0))
    a_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([M, K], gl.float8e4nv)
    b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([N, K], gl.float8e4nv)
    a_smem = gl.allocate_shared_memory(gl.float8e4nv, [M, K], a_layout, a_val)
    b_smem = gl.allocate_shared_memory(gl.float8e4nv, [N, K], b_layout, b_val)
    fence_async_shared()
    return a_smem, b_smem


@gluon.jit
def mma_loop(a_ptr, b_ptr, out_ptr, iters, M: gl.constexpr, N: gl.constexpr, K: gl.constexpr):
    """iters wgmmas of [M, K] x [K, N] on operands loaded once into shared memory; the accumulator's sum is
    stored so that the loop is not dead code."""
    a_smem, b_smem = operands_in_shared(a_ptr, b_ptr, M, N, K)
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[gl.num_warps(), 1],
                                                  instr_shape=[16, N, 32])
    acc = gl.zeros([M, N], gl.float32, layout=mma)
    b_t = b_smem.permute((1, 0))  # [K, N], K-major B operand
    for _ in range(iters):
        acc = warpgroup_mma(a_smem, b_t, acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
    total = gl.sum(gl.sum(acc, axis=1), axis=0)
    gl.store(out_ptr + gl.program_id(0), total)


def cpu_compile() -> int:
    """Cross-compile each shape for sm90 (no GPU): the loop must be a wgmma loop."""
    import triton
    from triton.backends.compiler import GPUTarget

    for n, k in ((256, 128), (128, 128), (256, 64)):
        src = gluon._runtime.GluonASTSource(
            mma_loop, signature={"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "out_ptr": "*fp32", "iters": "i32",
                                 "M": "constexpr", "N": "constexpr", "K": "constexpr"},
            constexprs={"M": M, "N": n, "K": k})
        ck = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})
        ptx = ck.asm["ptx"]
        print(f"N {n} K {k}: wgmma in the PTX: {'wgmma.mma_async' in ptx}")
        if "wgmma.mma_async" not in ptx:
            return 1
    return 0


def main(argv: list[str]) -> int:
    if "--cpu-compile" in argv:
        return cpu_compile()
    import torch
    import triton

    units = torch.cuda.get_device_properties(0).multi_processor_count
    gen = torch.Generator(device="cuda").manual_seed(0)
    out = torch.empty(units, dtype=torch.float32, device="cuda")
    print(f"{torch.cuda.get_device_name()}, {units} SMs, triton {triton.__version__}: fp8 wgmma from shared memory, "
          f"one program per SM, 2 warpgroups (M {M})")
    for n, k in ((256, 128), (128, 128), (256, 64), (128, 64)):
        a = (torch.randn(M, k, device="cuda", generator=gen) * 2).to(torch.float8_e4m3fn)
        b = (torch.randn(n, k, device="cuda", generator=gen) * 2).to(torch.float8_e4m3fn)
        iters = 20000
        run = lambda: mma_loop[(units, )](a, b, out, iters, M=M, N=n, K=k, num_warps=8)  # noqa: E731
        run()
        torch.cuda.synchronize()
        ms = triton.testing.do_bench(run, warmup=50, rep=500, return_mode="median")
        tf = units * iters * 2 * M * n * k / (ms * 1e-3) / 1e12
        print(f"  wgmma N {n:3d} K {k:3d}: {ms * 1e3:9.1f} us for {iters} iterations = {tf:7.1f} TF/s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
