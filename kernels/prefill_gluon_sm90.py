"""Hopper (sm90) prefill kernel in Gluon: fp8 MQA logits with the MMA overlapping the epilogue.

One program = one block of BLOCK_Q query rows; one warpgroup (4 warps).
- The block's q rows x heads, [BLOCK_Q*H, D] fp8, come in once by TMA; their K-major
  transposed view is the wgmma's B operand (N = BLOCK_Q*H = 128).
- kv tiles [BLOCK_KV = 64, D] (the wgmma's M operand) stream through a STAGES-deep ring of
  NVMMA-swizzled shared-memory slots, each paced by its own mbarrier (TMA expect-tx).
- Software pipeline with two accumulators: warpgroup_mma_wait hands back tile i, the async
  wgmma of tile i+1 is issued into the other accumulator, tile i's slot is refilled and its
  epilogue (relu, x weight, head sum, x kv_scale, -inf mask, store) runs while the tensor
  cores work on tile i+1.
- Only kv tiles inside [min ks, max ke) of the block are computed; with CLEAN the rest of
  the block's rows is written as -inf by the same program (vectorised stores).
- Programs run heaviest-last-rows first (program 0 takes the last query block).
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from .naming import make_kernel_repr

CONFIG_KEYS = ("H", "D", "BLOCK_Q", "BLOCK_KV", "STAGES", "CLEAN")


@gluon.jit
def _epilogue(acc, w2, scale, ks2, ke2, kv_rows, row_end, out_rows, q_ok2,
              BLOCK_KV: gl.constexpr, BLOCK_Q: gl.constexpr, H: gl.constexpr, CLEAN: gl.constexpr):
    """acc [BLOCK_KV, BLOCK_Q*H] fp32 scores -> logits [BLOCK_KV, BLOCK_Q] stored to out."""
    x = gl.maximum(acc, 0.0) * w2
    logits = gl.sum(gl.reshape(x, [BLOCK_KV, BLOCK_Q, H]), axis=2)  # [BLOCK_KV, BLOCK_Q]
    logits = logits * gl.expand_dims(scale, 1)
    rows2 = gl.expand_dims(kv_rows, 1)  # [BLOCK_KV, 1] int32
    if CLEAN:
        live = (rows2 >= ks2) & (rows2 < ke2)
        logits = gl.where(live, logits, float("-inf"))
    gl.store(out_rows + rows2, logits, mask=q_ok2 & (rows2 < row_end))


@gluon.jit
def _refill(kv_desc, kv_smem, bars, t_done, n_tiles, kv0, BLOCK_KV: gl.constexpr, STAGES: gl.constexpr):
    """Tile t_done's MMA is complete: load tile t_done + STAGES into its slot (if it exists)."""
    s = t_done % STAGES
    nxt = t_done + STAGES
    mbarrier.expect(bars.index(s), kv_desc.block_type.nbytes, pred=nxt < n_tiles)
    tma.async_copy_global_to_shared(kv_desc, [kv0 + nxt * BLOCK_KV, 0], bars.index(s), kv_smem.index(s),
                                    pred=nxt < n_tiles)


@gluon.jit
def _fill_dead(out_rows_f, q_ok_f, col_lo, col_hi, cols_f):
    """Write -inf to columns [col_lo, col_hi) of the block's rows (vectorised)."""
    FILL: gl.constexpr = cols_f.shape[0]
    neg = gl.full([out_rows_f.shape[0], FILL], float("-inf"), gl.float32, layout=out_rows_f.type.layout)
    for c in range(col_lo, col_hi, FILL):
        cc = gl.expand_dims(c + cols_f, 0)
        gl.store(out_rows_f + cc, neg, mask=q_ok_f & (cc < col_hi))


@gluon.jit(repr=make_kernel_repr("mqa_logits_gluon_sm90", CONFIG_KEYS))
def mqa_logits_gluon_sm90(
    q_desc,  # TMA descriptor: fp8 e4m3 q viewed [S*H, D] (dim contiguous), block [BLOCK_Q*H, D]
    kv_desc,  # TMA descriptor: fp8 e4m3 kv [N, D] (dim contiguous), block [BLOCK_KV, D]
    kv_scale_ptr,  # fp32 [N]
    w_ptr,  # fp32 [S, H], head contiguous
    ks_ptr,  # int32 [S]: first live kv row of each query row
    ke_ptr,  # int32 [S]: one past the last live kv row
    out_ptr,  # fp32 [S, stride_out_s] (row stride padded; the caller views [:, :N])
    S,
    N,
    stride_w_s,
    stride_out_s,
    H: gl.constexpr,
    D: gl.constexpr,
    BLOCK_Q: gl.constexpr,
    BLOCK_KV: gl.constexpr,
    STAGES: gl.constexpr,
    CLEAN: gl.constexpr,
):
    BQH: gl.constexpr = BLOCK_Q * H
    gl.static_assert(gl.num_warps() == 4, "one warpgroup per program")
    gl.static_assert(BLOCK_KV == 64, "kv tile = the warpgroup's 64 MMA rows")

    # Heaviest blocks first: for causal-like windows the last query rows are the longest.
    qb = gl.num_programs(0) - 1 - gl.program_id(0)
    q0 = qb * BLOCK_Q

    # ---- layouts ----
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, BQH, 32])
    fill_layout: gl.constexpr = gl.BlockedLayout([1, 4], [1, 32], [1, 4], [1, 0])
    row1_layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])

    # ---- shared memory and barriers ----
    q_smem = gl.allocate_shared_memory(q_desc.dtype, q_desc.block_type.shape, q_desc.layout)
    kv_smem = gl.allocate_shared_memory(kv_desc.dtype, [STAGES] + kv_desc.block_type.shape, kv_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(bars.index(s), count=1)
    mbarrier.init(q_bar, count=1)
    fence_async_shared()

    # ---- the block's live kv range ----
    r1 = q0 + gl.arange(0, BLOCK_Q, layout=row1_layout)
    r1_ok = r1 < S
    lo = gl.min(gl.load(ks_ptr + r1, mask=r1_ok, other=2147483647), axis=0)
    hi = gl.max(gl.load(ke_ptr + r1, mask=r1_ok, other=0), axis=0)
    t_lo = lo // BLOCK_KV
    t_hi = (hi + BLOCK_KV - 1) // BLOCK_KV
    n_tiles = gl.maximum(t_hi - t_lo, 0)
    kv0 = t_lo * BLOCK_KV

    # ---- issue the loads first: q block and the first STAGES kv tiles ----
    mbarrier.expect(q_bar, q_desc.block_type.nbytes, pred=n_tiles > 0)
    tma.async_copy_global_to_shared(q_desc, [q0 * H, 0], q_bar, q_smem, pred=n_tiles > 0)
    for s in gl.static_range(STAGES):
        mbarrier.expect(bars.index(s), kv_desc.block_type.nbytes, pred=s < n_tiles)
        tma.async_copy_global_to_shared(kv_desc, [kv0 + s * BLOCK_KV, 0], bars.index(s), kv_smem.index(s),
                                        pred=s < n_tiles)

    # ---- -inf for the dead part of the block's rows, while the loads fly ----
    if CLEAN:
        FILL: gl.constexpr = 512
        rf = q0 + gl.arange(0, BLOCK_Q, layout=gl.SliceLayout(1, fill_layout))
        out_rows_f = gl.expand_dims(out_ptr + rf.to(gl.int64) * stride_out_s, 1)
        q_ok_f = gl.expand_dims(rf < S, 1)
        cols_f = gl.arange(0, FILL, layout=gl.SliceLayout(0, fill_layout))
        live_lo = gl.minimum(kv0, N)
        live_hi = gl.minimum(gl.maximum(t_hi * BLOCK_KV, kv0), N)
        if n_tiles == 0:
            live_lo = N
            live_hi = N
        _fill_dead(out_rows_f, q_ok_f, 0, live_lo, cols_f)
        _fill_dead(out_rows_f, q_ok_f, live_hi, N, cols_f)

    if n_tiles > 0:
        # Per-column (query row, head) weights, in the accumulator's column layout.
        cols = gl.arange(0, BQH, layout=gl.SliceLayout(0, mma_layout))
        c_row = q0 + cols // H
        w = gl.load(w_ptr + c_row * stride_w_s + cols % H, mask=c_row < S, other=0.0)
        w2 = gl.expand_dims(w, 0)

        # The reduced [BLOCK_KV, BLOCK_Q] layout, found by tracing the reduction once.
        zero = gl.zeros([BLOCK_KV, BQH], gl.float32, layout=mma_layout)
        red_layout: gl.constexpr = gl.sum(gl.reshape(zero, [BLOCK_KV, BLOCK_Q, H]), axis=2).type.layout
        qr = q0 + gl.arange(0, BLOCK_Q, layout=gl.SliceLayout(0, red_layout))
        q_ok = qr < S
        ks2 = gl.expand_dims(gl.load(ks_ptr + qr, mask=q_ok, other=0), 0)
        ke2 = gl.expand_dims(gl.load(ke_ptr + qr, mask=q_ok, other=0), 0)
        q_ok2 = gl.expand_dims(q_ok, 0)
        out_rows = gl.expand_dims(out_ptr + qr.to(gl.int64) * stride_out_s, 0)
        offs_kv = gl.arange(0, BLOCK_KV, layout=gl.SliceLayout(1, red_layout))

        mbarrier.wait(q_bar, 0)
        q_t = q_smem.permute((1, 0))  # [D, BQH], K-major B operand

        # Two accumulators, A (even tiles) and B (odd tiles), each feeding its own registers back
        # into the next MMA (use_acc=False) so no register copies sit inside a wgmma's flight.
        # Each half-step: full wait for the MMA in flight, issue the next tile's MMA into the
        # other accumulator, then run the finished tile's epilogue under it. (Waits are full:
        # ptxas serialises every wgmma of the kernel (C7514) when a wgmma in flight at the loop
        # back-edge has its registers read after a partial wait.)
        # When n_tiles is even the last MMA (tile n_tiles) is a dummy whose stores are masked off.
        row_end = gl.minimum(t_hi * BLOCK_KV, N)
        mbarrier.wait(bars.index(0), 0)
        tok_a = warpgroup_mma(kv_smem.index(0), q_t, zero, use_acc=False, is_async=True)
        rows_a = kv0 + offs_kv
        scale_a = gl.load(kv_scale_ptr + rows_a, mask=rows_a < row_end, other=0.0)
        acc_b = zero
        for j in range(0, n_tiles // 2):
            t1 = 2 * j + 1
            mbarrier.wait(bars.index(t1 % STAGES), (t1 // STAGES) & 1)
            acc_a = warpgroup_mma_wait(num_outstanding=0, deps=(tok_a, ))
            tok_b = warpgroup_mma(kv_smem.index(t1 % STAGES), q_t, acc_b, use_acc=False, is_async=True)
            _refill(kv_desc, kv_smem, bars, t1 - 1, n_tiles, kv0, BLOCK_KV, STAGES)
            rows_b = rows_a + BLOCK_KV
            scale_b = gl.load(kv_scale_ptr + rows_b, mask=rows_b < row_end, other=0.0)
            _epilogue(acc_a, w2, scale_a, ks2, ke2, rows_a, row_end, out_rows, q_ok2, BLOCK_KV, BLOCK_Q, H, CLEAN)

            t2 = t1 + 1
            mbarrier.wait(bars.index(t2 % STAGES), (t2 // STAGES) & 1, pred=t2 < n_tiles)
            acc_b = warpgroup_mma_wait(num_outstanding=0, deps=(tok_b, ))
            tok_a = warpgroup_mma(kv_smem.index(t2 % STAGES), q_t, acc_a, use_acc=False, is_async=True)
            _refill(kv_desc, kv_smem, bars, t1, n_tiles, kv0, BLOCK_KV, STAGES)
            rows_a = rows_b + BLOCK_KV
            scale_a = gl.load(kv_scale_ptr + rows_a, mask=rows_a < row_end, other=0.0)
            _epilogue(acc_b, w2, scale_b, ks2, ke2, rows_b, row_end, out_rows, q_ok2, BLOCK_KV, BLOCK_Q, H, CLEAN)
        acc_a = warpgroup_mma_wait(num_outstanding=0, deps=(tok_a, ))
        _epilogue(acc_a, w2, scale_a, ks2, ke2, rows_a, row_end, out_rows, q_ok2, BLOCK_KV, BLOCK_Q, H, CLEAN)

    for s in gl.static_range(STAGES):
        mbarrier.invalidate(bars.index(s))
    mbarrier.invalidate(q_bar)
