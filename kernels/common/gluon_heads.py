"""The head sum of the Gluon Hopper kernels: sum over heads of relu(score) x weight, over a wgmma accumulator whose
lane t of a quad holds columns 8j + 2t + {0, 1}.

One coding per triton release, chosen by a version fact (kernels/common/versions.py):
- in_order_reduce (3.6): the plain gl.sum of the products, which 3.6 adds in order and contracts into one FMA chain
  (the written-out chain compiles to a slower epilogue schedule there: docs/CODEGEN.md);
- tree_reduce (3.8, 3.9): the chain written out (a reduction there adds as a tree, whose inner adds take no multiply).
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from . import gluon_compat as compat

PLAIN_SUMS = gl.constexpr(compat.in_order_reduce)  # fact in_order_reduce: gl.sum of the products


@gluon.jit
def _halves(x, K: gl.constexpr):
    """[..., K] -> [..., K / 2, 2]: the first and the second half of the last axis side by side, for split."""
    y = gl.reshape(x, x.shape[:-1] + [2, K // 2])
    if len(x.shape) == 2:
        return gl.permute(y, (0, 2, 1))
    elif len(x.shape) == 3:
        return gl.permute(y, (0, 1, 3, 2))
    else:
        gl.static_assert(len(x.shape) == 4, "fma_chain takes tensors of rank 2 to 4")
        return gl.permute(y, (0, 1, 2, 4, 3))


@gluon.jit
def fma_chain(acc, x, w, K: gl.constexpr, FIRST: gl.constexpr):
    """acc + sum_k x[..., k] * w[..., k] over the last axis (K, a power of two >= 2, one thread's registers, so each
    split only renames registers), as K dependent FMAs in k order (FIRST: it starts with a multiply, acc unread)."""
    if K == 2:
        x0, x1 = gl.split(x)
        w0, w1 = gl.split(w)
        if FIRST:
            acc = x0 * w0
        else:
            acc = gl.fma(x0, w0, acc)
        return gl.fma(x1, w1, acc)
    else:
        x0, x1 = gl.split(_halves(x, K))
        w0, w1 = gl.split(_halves(w, K))
        acc = fma_chain(acc, x0, w0, K // 2, FIRST)
        return fma_chain(acc, x1, w1, K // 2, False)


@gluon.jit
def lane_head_sum(x, w, K: gl.constexpr):
    """sum_k x[..., k] * w[..., k] over the last axis (K values of one thread): one FMA chain per value."""
    if PLAIN_SUMS:
        return gl.sum(x * w, axis=len(x.shape) - 1)
    else:
        return fma_chain(0.0, x, w, K, True)


@gluon.jit
def quad_head_sum(x, w, KV: gl.constexpr, ROWS: gl.constexpr, H: gl.constexpr):
    """sum_h x * w over row-major columns (n = row * H + head, H >= 8) of an accumulator [KV, ROWS * H]: a row's heads
    h = 8j + 2t + e lie H / 4 in each lane t of the quad; each lane's share is one chain (lane_head_sum), then the
    quad's 4 partial sums are added (two shuffle rounds). [KV, ROWS * H] -> [KV, ROWS]."""
    # [kv, row, j, t, e] -> [kv, row, t, (j, e)]: each lane's heads of a row on the last axis
    xs = gl.reshape(gl.permute(gl.reshape(x, [KV, ROWS, H // 8, 4, 2]), (0, 1, 3, 2, 4)), [KV, ROWS, 4, H // 4])
    ws = gl.reshape(gl.permute(gl.reshape(w, [KV, ROWS, H // 8, 4, 2]), (0, 1, 3, 2, 4)), [KV, ROWS, 4, H // 4])
    return gl.sum(lane_head_sum(xs, ws, H // 4), axis=2)
