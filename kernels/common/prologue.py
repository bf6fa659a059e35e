"""Prologue pieces the plain-Triton prefill kernels share: a query block's windows and its q / weights tiles.

Written once so the 64-bit block bases and the stride handling are the same in every kernel.
"""
import triton
import triton.language as tl

from .epilogue import INT32_MAX


@triton.jit
def ordered_program(ORDER: tl.constexpr):
    """This program's query block in the launch order ORDER: 0 forward, 1 last-first, 2 zigzag (last, first,
    second-last, second, ...), so that long causal rows start first."""
    pid = tl.program_id(0)
    last = tl.num_programs(0) - 1
    if ORDER == 1:
        pid = last - pid
    elif ORDER == 2:
        pid = tl.where(pid % 2 == 0, last - pid // 2, pid // 2)
    return pid


@triton.jit
def block_windows(ks_ptr, ke_ptr, rows, row_ok, stride_ks, stride_ke):
    """ks, ke of the block's rows (rows past S: an empty window) and the block's span [min ks, max ke)."""
    ks = tl.load(ks_ptr + rows * stride_ks, mask=row_ok, other=INT32_MAX)
    ke = tl.load(ke_ptr + rows * stride_ke, mask=row_ok, other=0)
    return ks, ke, tl.min(ks, axis=0), tl.max(ke, axis=0)


@triton.jit
def block_queries(q_ptr, w_ptr, q0, S, stride_q_s, stride_q_h, stride_w_s, stride_w_h,
                  BLOCK_Q: tl.constexpr, H: tl.constexpr, D: tl.constexpr, MASKED: tl.constexpr):
    """q^T [D, BLOCK_Q*H] and weights [BLOCK_Q*H] of query rows q0 .. q0+BLOCK_Q-1: column c is (row c // H,
    head c % H). The block's base is 64-bit (q0 * stride can pass 2^31); MASKED guards rows past S."""
    cols = tl.arange(0, BLOCK_Q * H)
    dims = tl.arange(0, D)
    q_ptrs = (q_ptr + tl.cast(q0, tl.int64) * stride_q_s + ((cols // H) * stride_q_s + (cols % H) * stride_q_h)[None, :]
              + dims[:, None])
    w_ptrs = w_ptr + tl.cast(q0, tl.int64) * stride_w_s + (cols // H) * stride_w_s + (cols % H) * stride_w_h
    if MASKED:
        c_ok = q0 + cols // H < S
        q_t = tl.load(q_ptrs, mask=c_ok[None, :], other=0.0)
        w = tl.load(w_ptrs, mask=c_ok, other=0.0)
    else:
        q_t = tl.load(q_ptrs)
        w = tl.load(w_ptrs)
    return q_t, w
