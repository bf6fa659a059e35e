"""Does one warpgroup's fp8 wgmma run beside another warpgroup's fp32 epilogue on the H200, and how much of the
tensor cores' rate is left once the decode epilogue runs between wgmmas?

The decode kernel at next_n 3-8 reaches 48-59 % of the fp8 ceiling although, counted per cache block, its epilogue
needs fewer issue cycles (833 instructions a warp at next_n 8) than its wgmmas need tensor cycles (about 1190):
with two or three math warpgroups the two should overlap. This probe takes away everything but the wgmma and the
epilogue: no loads, no barriers, no ring.

One program per SM, G warpgroups (num_warps 4 G, M = 64 G: each warpgroup its own 64 rows, as a decode math
warpgroup its cache block), each looping: wgmma [64, 128] x [128, N] from shared memory (N = next_n rows x 64
heads), then EPI:
  0  nothing (the tensor ceiling),
  1  the decode epilogue: relu, x weight, head sum, x row scale, added to a running sum,
  2  the same with the weights read again every iteration from global memory (L1), as next_n 5-8 do,
  3  one FFMA a score (the weighted head sum without relu), 4  four a score (relu and its complement, each
     weighted): with 1 and 2, how the time grows with the epilogue's instructions.
AHEAD: the next wgmma issued before this one's epilogue (two accumulators), as the decode kernel's parts do.
PP: the warpgroups issue their wgmmas in turn (named barriers), so that the tensor cores run one warpgroup's wgmma
while the one before runs its epilogue (without it, wgmmas issued together share the tensor cores, finish
together, and the epilogues then run together while the tensor cores wait).

TF/s = programs x iterations x 2 x M x N x 128 / time (do_bench median).

    python3 scripts/overlap_probe.py            (the H200)
    python3 scripts/overlap_probe.py --cpu-compile   (cross-compile each variant for sm90, print its loop's
                                                    instruction mix; no GPU)
"""
from __future__ import annotations

import collections
import re
import sys

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma, warpgroup_mma_wait

from mma_ceiling import operands_in_shared  # (scripts/ is the script's own folder, first on sys.path)

K = 128
H = 64
# (G warpgroups, N columns, EPI, AHEAD, PP)
# (G 4 at N 256 would need 128 accumulator registers of the 128 a thread that 16 warps leave)
VARIANTS = [(g, n, e, False, pp) for e in (0, 1, 2) for g in (1, 2, 4) for n in (128, 256) if g * n < 1024
            for pp in ((False, True) if g > 1 and e > 0 else (False, ))] + \
           [(g, 128, e, True, False) for e in (1, 2) for g in (1, 2)] + \
           [(g, 128, e, False, False) for e in (3, 4) for g in (1, 2, 4) if g * e < 16]


PP_BAR = gl.constexpr(8)  # named barriers PP_BAR .. PP_BAR + G - 1 (0 is the CTA's)


@gluon.jit
def _bar_sync(bar):
    """bar.sync on named barrier `bar` (a register) for 256 threads: this warpgroup and the one before."""
    gl.inline_asm_elementwise("{ bar.sync $1, 256; mov.b32 $0, 0; }", "=r,r", [bar], dtype=gl.int32,
                              is_pure=False, pack=1)


@gluon.jit
def _bar_arrive(bar):
    """bar.arrive on named barrier `bar` for 256 threads: lets the warpgroup that syncs on it go."""
    gl.inline_asm_elementwise("{ bar.arrive $1, 256; mov.b32 $0, 0; }", "=r,r", [bar], dtype=gl.int32,
                              is_pure=False, pack=1)


@gluon.jit
def _warpgroup():
    return gl.inline_asm_elementwise("mov.u32 $0, %tid.x;", "=r", [], dtype=gl.int32, is_pure=True, pack=1) // 128


@gluon.jit
def _issue(a_smem, b_t, acc, use_acc: gl.constexpr, wg, G: gl.constexpr, PP: gl.constexpr):
    """One wgmma; PP: in turn, warpgroup after warpgroup (wait for the one before to have issued, then let the next
    one go), so that the tensor cores run one warpgroup's wgmma while the one before runs its epilogue."""
    if PP:
        _bar_sync(PP_BAR + wg)
    tok = warpgroup_mma(a_smem, b_t, acc, use_acc=use_acc, is_async=True)
    if PP:
        _bar_arrive(PP_BAR + (wg + 1) % G)
    return tok


@gluon.jit
def probe(a_ptr, b_ptr, w_ptr, sc_ptr, out_ptr, iters, M: gl.constexpr, N: gl.constexpr, K: gl.constexpr,
          H: gl.constexpr, EPI: gl.constexpr, AHEAD: gl.constexpr, PP: gl.constexpr):
    """iters wgmmas [M, K] x [K, N] on operands loaded once into shared memory, each followed (EPI) by the decode
    epilogue on its accumulator; the running sum is stored so that nothing is dead code."""
    NP: gl.constexpr = N // H
    a_smem, b_smem = operands_in_shared(a_ptr, b_ptr, M, N, K)
    gl.thread_barrier()  # here, not where triton would put it: before the first wgmma, past a PP bar.sync (a hang)
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[gl.num_warps(), 1],
                                                  instr_shape=[16, N, 32])
    acc = gl.zeros([M, N], gl.float32, layout=mma)
    red: gl.constexpr = gl.sum(gl.reshape(acc, [M, NP, H]), axis=2).type.layout
    n_cols = gl.arange(0, N, layout=gl.SliceLayout(0, mma))
    m_rows = gl.arange(0, M, layout=gl.SliceLayout(1, red))
    w2 = gl.expand_dims(gl.load(w_ptr + n_cols), 0)
    sc = gl.expand_dims(gl.load(sc_ptr + m_rows), 1)
    tot = gl.zeros([M, NP], gl.float32, layout=red)
    b_t = b_smem.permute((1, 0))  # [K, N], K-major B operand
    G: gl.constexpr = M // 64
    wg = _warpgroup()
    if PP:
        if wg == G - 1:  # the first turn is warpgroup 0's
            _bar_arrive(PP_BAR + 0 * wg)
    tok = _issue(a_smem, b_t, acc, False, wg, G, PP)
    for it in range(iters):
        if AHEAD:
            nxt = warpgroup_mma(a_smem, b_t, acc, use_acc=False, is_async=True)
        if EPI == 2:
            w2 = gl.expand_dims(gl.load(w_ptr + (it % 4) * N + n_cols), 0)
        if AHEAD:
            done = warpgroup_mma_wait(num_outstanding=1, deps=(tok, ))
        else:
            done = warpgroup_mma_wait(num_outstanding=0, deps=(tok, ))
        if EPI == 1 or EPI == 2:
            x = gl.maximum(done, 0.0) * w2
            tot += gl.sum(gl.reshape(x, [M, NP, H]), axis=2) * sc
        elif EPI == 3:  # one FFMA a score: the weighted head sum without relu
            tot += gl.sum(gl.reshape(done * w2, [M, NP, H]), axis=2) * sc
        elif EPI == 4:  # four a score: both halves of the scores, each weighted and summed
            x = gl.maximum(done, 0.0) * w2 + gl.minimum(done, 0.0) * (w2 + 1.0)
            tot += gl.sum(gl.reshape(x, [M, NP, H]), axis=2) * sc
        if AHEAD:
            tok = nxt
        elif EPI == 0:  # the wgmmas chained through one accumulator: none is dead, nothing between them
            tok = _issue(a_smem, b_t, done, True, wg, G, PP)
        else:
            tok = _issue(a_smem, b_t, acc, False, wg, G, PP)
    done = warpgroup_mma_wait(num_outstanding=0, deps=(tok, ))
    tot += gl.sum(gl.reshape(done, [M, NP, H]), axis=2)
    gl.store(out_ptr + gl.program_id(0), gl.sum(gl.sum(tot, axis=1), axis=0))


def _name(g: int, n: int, epi: int, ahead: bool, pp: bool) -> str:
    return f"G {g} N {n} EPI {epi}{' AHEAD' if ahead else ''}{' PP' if pp else ''}"


def _turns_first(sass: str) -> bool:
    """PP: no CTA-wide barrier (bar.sync 0) between a warpgroup's first wait for its turn and its first wgmma. The
    warpgroup waiting for its turn would never reach it, and the others wait there for it: a hang (triton puts one
    before the first wgmma after shared memory is written, unless the kernel has one already)."""
    ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+([^;]*);", sass)
    first = next(i for i, op in enumerate(ops) if re.match(r"BAR\.SYNC\S* R\d+", op))
    mma = next(i for i, op in enumerate(ops) if "GMMA" in op and i > first)
    return not any(re.match(r"BAR\.SYNC\S* 0x0", op) for op in ops[first:mma])


def cpu_compile() -> int:
    """Cross-compile each variant for sm90 (no GPU) and print its wgmma loop's instruction mix and registers."""
    import triton
    from triton.backends.compiler import GPUTarget

    from mqa_cli.sass_loops import loop_mix, tile_loops
    from triton import knobs

    from mqa_cli.compile import run_tool

    bad = 0
    for g, n, epi, ahead, pp in VARIANTS:
        src = gluon._runtime.GluonASTSource(
            probe, signature={"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "w_ptr": "*fp32", "sc_ptr": "*fp32",
                              "out_ptr": "*fp32", "iters": "i32", "M": "constexpr", "N": "constexpr",
                              "K": "constexpr", "H": "constexpr", "EPI": "constexpr", "AHEAD": "constexpr",
                              "PP": "constexpr"},
            constexprs={"M": 64 * g, "N": n, "K": K, "H": H, "EPI": epi, "AHEAD": ahead, "PP": pp})
        ck = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4 * g})
        sass = run_tool(knobs.nvidia.cuobjdump.path, "-sass", data=ck.asm["cubin"], suffix=".cubin")
        usage = run_tool(knobs.nvidia.cuobjdump.path, "--dump-resource-usage", data=ck.asm["cubin"],
                         suffix=".cubin")
        loops = tile_loops(sass)
        regs = int(re.search(r"REG:(\d+)", usage).group(1))
        spills = len(re.findall(r"\b(?:STL|LDL)\b", sass))
        ops = collections.Counter(loop_mix(loops[0]) if loops else {})
        print(f"{_name(g, n, epi, ahead, pp):22s} regs {regs:3d} spills {spills:3d} loop "
              f"{sum(ops.values()):4d}, QGMMA {ops['QGMMA']}, BAR {ops['BAR']}: {dict(ops.most_common(8))}")
        bad += not loops or spills > 0 or ops["BAR"] != (2 if pp else 0) or (pp and not _turns_first(sass))
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    if "--cpu-compile" in argv:
        return cpu_compile()
    import torch
    import triton

    units = torch.cuda.get_device_properties(0).multi_processor_count
    gen = torch.Generator(device="cuda").manual_seed(0)
    out = torch.empty(units, dtype=torch.float32, device="cuda")
    print(f"{torch.cuda.get_device_name()}, {units} SMs, triton {triton.__version__}: wgmma [64, {K}] x [{K}, N] a "
          f"warpgroup, one program per SM, the decode epilogue between wgmmas")
    print("| variant | µs | TF/s | of EPI 0 at the same G, N |")
    print("|---|---|---|---|")
    base = {}
    for g, n, epi, ahead, pp in VARIANTS:
        m = 64 * g
        a = (torch.randn(m, K, device="cuda", generator=gen) * 2).to(torch.float8_e4m3fn)
        b = (torch.randn(n, K, device="cuda", generator=gen) * 2).to(torch.float8_e4m3fn)
        w = torch.randn(4 * n, device="cuda", generator=gen)
        sc = torch.rand(m, device="cuda", generator=gen) + 0.5
        iters = 4000

        def run(a=a, b=b, w=w, sc=sc, m=m, n=n, epi=epi, ahead=ahead, g=g, pp=pp):
            probe[(units, )](a, b, w, sc, out, iters, M=m, N=n, K=K, H=H, EPI=epi, AHEAD=ahead, PP=pp,
                             num_warps=4 * g)

        run()
        torch.cuda.synchronize()
        ms = triton.testing.do_bench(run, warmup=25, rep=300, return_mode="median")
        tf = units * iters * 2 * m * n * K / (ms * 1e-3) / 1e12
        if epi == 0:
            base[(g, n)] = tf
        frac = tf / base[(g, n)] if (g, n) in base else float("nan")
        print(f"| {_name(g, n, epi, ahead, pp)} | {ms * 1e3:.1f} | {tf:.1f} | {frac:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
