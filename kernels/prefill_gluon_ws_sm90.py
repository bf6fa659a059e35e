"""Hopper (sm90) prefill kernel in Gluon, warp-specialised: fp8 MQA logits with ping-pong math warpgroups.

Partitions (gl.warp_specialize, register reallocation by setmaxnreg):
- default partition = math warpgroup 0 (4 warps), worker 0 = math warpgroup 1 (4 warps);
- worker 1 = TMA producer (1 warp): q blocks into a double-buffered slot per math warpgroup and kv tiles
  into a STAGES-deep ring, paced by empty/full mbarrier pairs (kv slots are released by both math
  warpgroups: empty count 2);
- worker 2 = -inf filler (1 warp, CLEAN only): vectorised -inf stores over each block's dead columns,
  running beside the math instead of before it.
Work item = 2*BLOCK_Q query rows; math warpgroup g owns rows [q0 + g*BLOCK_Q, q0 + (g+1)*BLOCK_Q), so
each kv tile [BLOCK_KV = 64, D] (the wgmma's M, A operand) is loaded once for both warpgroups and each
warpgroup multiplies it by its own K-major q block [D, BLOCK_Q*H] (the wgmma's N, B operand; 256 at H 64).
Each math warpgroup waits for its own wgmma right away; the other warpgroup's MMA fills the tensor cores
while it runs its fp32 epilogue (relu, x weight, head sum, x kv_scale, -inf mask on boundary tiles, store).
PINGPONG (off by default: 2-4 % slower on the H200) makes the warpgroups take turns issuing their wgmma
through a pair of turn mbarriers. Persistent grid: program p takes work items in snake order (p, 2P-1-p,
2P+p, ...) counted from the last query block (the heaviest in causal-like layouts) backwards, which
evens out each program's sum of work. No CTA-wide barrier in the loop.
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

CONFIG_KEYS = ("H", "D", "BLOCK_Q", "BLOCK_KV", "STAGES", "CLEAN", "PINGPONG", "MATH_REGS", "SMALL_REGS")


@gluon.jit
def _live_tiles(ks_ptr, ke_ptr, q0, S, N, ROWS: gl.constexpr, BLOCK_KV: gl.constexpr, WARPS: gl.constexpr):
    """First kv tile and tile count covering [min ks, max ke) of query rows [q0, q0 + ROWS)."""
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])
    r = q0 + gl.arange(0, ROWS, layout=layout)
    ok = r < S
    lo = gl.min(gl.load(ks_ptr + r, mask=ok, other=2147483647), axis=0)
    hi = gl.minimum(gl.max(gl.load(ke_ptr + r, mask=ok, other=0), axis=0), N)
    t_lo = gl.maximum(lo, 0) // BLOCK_KV
    t_hi = (hi + BLOCK_KV - 1) // BLOCK_KV
    return t_lo, gl.maximum(t_hi - t_lo, 0)


@gluon.jit
def _item_q0(j, n_items, BLOCK_Q: gl.constexpr):
    """Round j of this program: snake order over work items (p, 2P-1-p, 2P+p, ...) counted from the last
    query block (the heaviest in causal-like layouts), so each program's sum of work evens out.
    Returns the item's first query row."""
    P = gl.num_programs(0)
    p = gl.program_id(0)
    item = j * P + gl.where(j % 2 == 0, p, P - 1 - p)
    return (n_items - 1 - item) * (2 * BLOCK_Q)


@gluon.jit
def _my_rounds(n_items):
    """Rounds of this program: every full round, plus the last partial one if its snake slot is filled."""
    P = gl.num_programs(0)
    p = gl.program_id(0)
    full = n_items // P
    last = full * P + gl.where(full % 2 == 0, p, P - 1 - p)
    return full + gl.where(last < n_items, 1, 0)


@gluon.jit
def _math_partition(q_desc, kv_smem, q_smem, kv_full, kv_empty, q_full, q_empty, turn,
                    kv_scale_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, S, N, stride_w_s, stride_out_s, n_items,
                    WG: gl.constexpr, H: gl.constexpr, BLOCK_Q: gl.constexpr, BLOCK_KV: gl.constexpr,
                    STAGES: gl.constexpr, CLEAN: gl.constexpr, PINGPONG: gl.constexpr):
    """One math warpgroup: for each work item, its BLOCK_Q query rows against every live kv tile."""
    BQH: gl.constexpr = BLOCK_Q * H
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, BQH, 32])
    acc = gl.zeros([BLOCK_KV, BQH], gl.float32, layout=mma_layout)
    red_layout: gl.constexpr = gl.sum(gl.reshape(acc, [BLOCK_KV, BLOCK_Q, H]), axis=2).type.layout
    cols = gl.arange(0, BQH, layout=gl.SliceLayout(0, mma_layout))
    offs_q = gl.arange(0, BLOCK_Q, layout=gl.SliceLayout(0, red_layout))
    offs_kv = gl.arange(0, BLOCK_KV, layout=gl.SliceLayout(1, red_layout))

    c = 0  # kv tiles consumed so far (ring index / phase)
    i = 0  # work items done (q slot / phase)
    for j in range(0, _my_rounds(n_items)):
        q0 = _item_q0(j, n_items, BLOCK_Q)
        t_lo, n_tiles = _live_tiles(ks_ptr, ke_ptr, q0, S, N, 2 * BLOCK_Q, BLOCK_KV, 4)
        my0 = q0 + WG * BLOCK_Q

        c_row = my0 + cols // H
        w2 = gl.expand_dims(gl.load(w_ptr + c_row * stride_w_s + cols % H, mask=c_row < S, other=0.0), 0)
        qr = my0 + offs_q
        q_ok = qr < S
        # Rows of this warpgroup's block: int32 offsets from one scalar base pointer (few registers).
        out_base = out_ptr + my0.to(gl.int64) * stride_out_s
        out_offs = gl.expand_dims(offs_q * stride_out_s, 0)
        if CLEAN:
            # Tiles inside [max ks, min ke) of the warpgroup's valid rows need no -inf mask.
            ks_q = gl.load(ks_ptr + qr, mask=q_ok, other=0)
            ke_q = gl.load(ke_ptr + qr, mask=q_ok, other=2147483647)
            in_lo = gl.max(ks_q, axis=0)
            in_hi = gl.min(ke_q, axis=0)

        qs = i % 2
        mbarrier.wait(q_full.index(qs), (i // 2) & 1)
        q_t = q_smem.index(qs).permute((1, 0))  # [D, BQH], K-major B operand

        for t in range(n_tiles):
            s = c % STAGES
            start = (t_lo + t) * BLOCK_KV
            rows = start + offs_kv
            scale = gl.load(kv_scale_ptr + rows, mask=rows < N, other=0.0)
            mbarrier.wait(kv_full.index(s), (c // STAGES) & 1)
            if PINGPONG:
                mbarrier.wait(turn.index(WG), (c & 1) ^ (1 - WG))
            tok = warpgroup_mma(kv_smem.index(s), q_t, acc, use_acc=False, is_async=True)
            if PINGPONG:
                mbarrier.arrive(turn.index(1 - WG), count=1)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(tok, ))
            mbarrier.arrive(kv_empty.index(s), count=1)

            x = gl.maximum(acc, 0.0) * w2
            logits = gl.sum(gl.reshape(x, [BLOCK_KV, BLOCK_Q, H]), axis=2)  # [BLOCK_KV, BLOCK_Q]
            logits = logits * gl.expand_dims(scale, 1)
            rows2 = gl.expand_dims(rows, 1)
            if CLEAN:
                if (start < in_lo) | (start + BLOCK_KV > in_hi):
                    ks2 = gl.expand_dims(gl.load(ks_ptr + qr, mask=q_ok, other=0), 0)
                    ke2 = gl.expand_dims(gl.load(ke_ptr + qr, mask=q_ok, other=0), 0)
                    logits = gl.where((rows2 >= ks2) & (rows2 < ke2), logits, float("-inf"))
            gl.store(out_base + (out_offs + rows2), logits, mask=gl.expand_dims(qr < S, 0))
            c += 1

        mbarrier.arrive(q_empty.index(qs), count=1)
        i += 1


@gluon.jit
def _math_worker(q_desc, kv_smem, q_smem, kv_full, kv_empty, q_full, q_empty, turn,
                 kv_scale_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, S, N, stride_w_s, stride_out_s, n_items,
                 H: gl.constexpr, BLOCK_Q: gl.constexpr, BLOCK_KV: gl.constexpr, STAGES: gl.constexpr,
                 CLEAN: gl.constexpr, PINGPONG: gl.constexpr):
    _math_partition(q_desc, kv_smem, q_smem, kv_full, kv_empty, q_full, q_empty, turn,
                    kv_scale_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, S, N, stride_w_s, stride_out_s, n_items,
                    1, H, BLOCK_Q, BLOCK_KV, STAGES, CLEAN, PINGPONG)


@gluon.jit
def _load_partition(q_desc, kv_desc, kv_smem, q_smem0, q_smem1, kv_full, kv_empty, q_full0, q_empty0, q_full1,
                    q_empty1, ks_ptr, ke_ptr, S, N, n_items,
                    H: gl.constexpr, BLOCK_Q: gl.constexpr, BLOCK_KV: gl.constexpr, STAGES: gl.constexpr):
    """TMA producer (1 warp): per work item the two q blocks, then its live kv tiles through the ring."""
    c = 0
    i = 0
    for j in range(0, _my_rounds(n_items)):
        q0 = _item_q0(j, n_items, BLOCK_Q)
        t_lo, n_tiles = _live_tiles(ks_ptr, ke_ptr, q0, S, N, 2 * BLOCK_Q, BLOCK_KV, 1)
        qs = i % 2
        qph = ((i // 2) & 1) ^ 1
        mbarrier.wait(q_empty0.index(qs), qph)
        mbarrier.expect(q_full0.index(qs), q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [q0 * H, 0], q_full0.index(qs), q_smem0.index(qs))
        mbarrier.wait(q_empty1.index(qs), qph)
        mbarrier.expect(q_full1.index(qs), q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [(q0 + BLOCK_Q) * H, 0], q_full1.index(qs), q_smem1.index(qs))
        for t in range(n_tiles):
            s = c % STAGES
            mbarrier.wait(kv_empty.index(s), ((c // STAGES) & 1) ^ 1)
            mbarrier.expect(kv_full.index(s), kv_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(kv_desc, [(t_lo + t) * BLOCK_KV, 0], kv_full.index(s), kv_smem.index(s))
            c += 1
        i += 1


@gluon.jit
def _fill_partition(ks_ptr, ke_ptr, out_ptr, S, N, stride_out_s, n_items,
                    BLOCK_Q: gl.constexpr, BLOCK_KV: gl.constexpr, CLEAN: gl.constexpr):
    """-inf over the dead columns of each work item's rows: [0, first live tile) and [last live tile, N)."""
    if CLEAN:
        FILL: gl.constexpr = 512
        layout: gl.constexpr = gl.BlockedLayout([4], [32], [1], [0])
        offs = gl.arange(0, FILL, layout=layout)
        neg = gl.full([FILL], float("-inf"), gl.float32, layout=layout)
        for j in range(0, _my_rounds(n_items)):
            q0 = _item_q0(j, n_items, BLOCK_Q)
            t_lo, n_tiles = _live_tiles(ks_ptr, ke_ptr, q0, S, N, 2 * BLOCK_Q, BLOCK_KV, 1)
            live_lo = gl.minimum(t_lo * BLOCK_KV, N)
            live_hi = gl.minimum((t_lo + n_tiles) * BLOCK_KV, N)
            if n_tiles == 0:
                live_lo = N
                live_hi = N
            for r in range(q0, gl.minimum(q0 + 2 * BLOCK_Q, S)):
                row = out_ptr + r.to(gl.int64) * stride_out_s
                for col in range(0, live_lo, FILL):
                    cc = col + offs
                    gl.store(row + cc, neg, mask=cc < live_lo)
                for col in range(live_hi, N, FILL):
                    cc = col + offs
                    gl.store(row + cc, neg, mask=cc < N)


@gluon.jit(repr=make_kernel_repr("mqa_logits_gluon_ws_sm90", CONFIG_KEYS))
def mqa_logits_gluon_ws_sm90(
    q_desc,  # TMA descriptor: fp8 e4m3 q viewed [S*H, D] (dim contiguous), block [BLOCK_Q*H, D]
    kv_desc,  # TMA descriptor: fp8 e4m3 kv [N, D] (dim contiguous), block [BLOCK_KV, D]
    kv_scale_ptr,  # fp32 [N]
    w_ptr,  # fp32 [S, H], head contiguous
    ks_ptr,  # int32 [S]: first live kv row of each query row
    ke_ptr,  # int32 [S]: one past the last live kv row
    out_ptr,  # fp32 [S, stride_out_s] (row stride padded to whole kv tiles; the caller views [:, :N])
    S,  # int32: query rows
    N,  # int32: kv rows
    stride_w_s,  # int32: weights row stride (elements)
    stride_out_s,  # int32: logits row stride (elements), >= ceil(N / BLOCK_KV) * BLOCK_KV
    n_items,  # int32: work items = ceil(S / (2 * BLOCK_Q)); the grid is persistent over them
    H: gl.constexpr,
    D: gl.constexpr,
    BLOCK_Q: gl.constexpr,  # query rows per math warpgroup; BLOCK_Q * H = the wgmma's N (128 or 256)
    BLOCK_KV: gl.constexpr,  # kv rows per tile = the wgmma's M (64, one warpgroup)
    STAGES: gl.constexpr,  # kv ring depth
    CLEAN: gl.constexpr,  # write -inf outside [ks, ke)
    PINGPONG: gl.constexpr,  # math warpgroups take turns issuing their wgmma
    MATH_REGS: gl.constexpr,  # registers per thread of math warpgroup 1 (setmaxnreg; math 0 gets the rest)
    SMALL_REGS: gl.constexpr,  # registers per thread of the producer and filler warps
):
    gl.static_assert(gl.num_warps() == 4, "the default partition is one math warpgroup")
    gl.static_assert(BLOCK_KV == 64, "kv tile = one warpgroup's 64 MMA rows")
    BQH: gl.constexpr = BLOCK_Q * H

    q_smem0 = gl.allocate_shared_memory(q_desc.dtype, [2, BQH, D], q_desc.layout)
    q_smem1 = gl.allocate_shared_memory(q_desc.dtype, [2, BQH, D], q_desc.layout)
    kv_smem = gl.allocate_shared_memory(kv_desc.dtype, [STAGES, BLOCK_KV, D], kv_desc.layout)
    kv_full = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    q_full0 = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_empty0 = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_full1 = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_empty1 = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(kv_full.index(s), count=1)
        mbarrier.init(kv_empty.index(s), count=2)
    for s in gl.static_range(2):
        mbarrier.init(q_full0.index(s), count=1)
        mbarrier.init(q_empty0.index(s), count=1)
        mbarrier.init(q_full1.index(s), count=1)
        mbarrier.init(q_empty1.index(s), count=1)
        mbarrier.init(turn.index(s), count=1)
    fence_async_shared()

    gl.warp_specialize([
        (_math_partition, (q_desc, kv_smem, q_smem0, kv_full, kv_empty, q_full0, q_empty0, turn,
                           kv_scale_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, S, N, stride_w_s, stride_out_s, n_items,
                           0, H, BLOCK_Q, BLOCK_KV, STAGES, CLEAN, PINGPONG)),
        (_math_worker, (q_desc, kv_smem, q_smem1, kv_full, kv_empty, q_full1, q_empty1, turn,
                        kv_scale_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, S, N, stride_w_s, stride_out_s, n_items,
                        H, BLOCK_Q, BLOCK_KV, STAGES, CLEAN, PINGPONG)),
        (_load_partition, (q_desc, kv_desc, kv_smem, q_smem0, q_smem1, kv_full, kv_empty, q_full0, q_empty0,
                           q_full1, q_empty1, ks_ptr, ke_ptr, S, N, n_items, H, BLOCK_Q, BLOCK_KV, STAGES)),
        (_fill_partition, (ks_ptr, ke_ptr, out_ptr, S, N, stride_out_s, n_items, BLOCK_Q, BLOCK_KV, CLEAN)),
    ], [4, 1, 1], [MATH_REGS, SMALL_REGS, SMALL_REGS])
