"""The Gluon paged decode kernel (mqa_kernels.decode.paged_ws_sm90) on a machine without a GPU: what dispatch picks, that
the plan hands a cache TMA cannot describe to the portable kernel (and its launcher refuses one), that the fast relaunch rebuilds the very
arguments of the first launch, and the kernel cross-compiled for sm90 (TMA loads into fp8 wgmma, no spills).
Its numbers are checked on the card by tests/gpu (Gluon has no interpreter path)."""
import os
import re
import subprocess
import sys

import pytest

from mqa_kernels.common import versions
import torch

from mqa_cli.api import fastpath
from mqa_cli.launch.common import alloc_logits
from mqa_cli.errors import UserError
from mqa_cli.launch.paged_ws_sm90 import paged_ws_sm90_args
from mqa_cli.plan.build import with_schedule
from mqa_cli.plan import dispatch, targets
from mqa_kernels.decode.paged_ws_sm90.config import (SMEM_PER_SM, padded_rows, paged_ws_sm90_config, q_rows, regime,
                                                     smem_bytes)
from mqa_kernels.decode.paged_ws_sm90.config import parts as config_parts
from mqa_kernels.decode.paged_ws_sm90.tuned import CUDA_TUNED

from mqa_cli.inspect.sass_loops import tile_loops
from . import sm90_builds
from .conftest import HEAVY, some_heavy
from .sm90_builds import meta_paged

SM90 = targets.TARGETS["sm90"]


def shape(B=8, T=2, H=64, D=128, bs=64, L=8192):
    return dispatch.Shape("paged", B * T, L, H, D, False, batch=B, next_n=T, block_size=bs)


@pytest.mark.skipif(not versions.holds("gluon_hopper"), reason=versions.FACTS["gluon_hopper"].required())
@pytest.mark.parametrize("kw, row", [
    ({}, "paged_ws_sm90"),
    ({"T": 4}, "paged_ws_sm90"),  # 4 x 64 = N 256
    ({"T": 8, "H": 32}, "paged_ws_sm90"),  # 8 x 32 = N 256
    ({"T": 5}, "paged_ws_sm90"),  # 8 (padded) x 64 = 512: past one wgmma, in parts (MMA_N)
    ({"T": 8}, "paged_ws_sm90"),
    ({"bs": 32}, "paged"),  # a cache block must be one wgmma's 64 rows
])
def test_dispatch_picks_the_gluon_row_where_the_rows_fit_one_program(kw, row):
    got = dispatch.plan(shape(**kw), SM90)
    assert got.chosen.row.name == row, [c.sentence() for c in got.chosen.checks if not c.ok]
    if row == "paged_ws_sm90":
        c = got.config.constexprs
        # past 256 columns the rows go in parts of at most 128 columns, and only the parts holding rows run
        assert (c["NP"] * c["H"] <= 256) or 0 < c["MMA_N"] <= 128


@pytest.mark.parametrize("T, mma, parts, rows", [(3, 64, 3, 192), (3, 128, 2, 256), (4, 0, 1, 256), (5, 128, 3, 384),
                                                 (5, 64, 5, 320), (8, 128, 4, 512), (7, 0, 4, 512)])
def test_parts_cover_the_live_draft_rows_and_size_the_q_slot(T, mma, parts, rows):
    """MMA_N: a block's next_n rows in parts of MMA_N / 64 rows; the q slot holds only the parts that run (next_n 3
    at N 64: 3 rows, not the padded 4), so the program's shared memory is what config.smem_bytes counts."""
    cfg = paged_ws_sm90_config(heads=64, dim=128, next_n=T, block_size=64, batch=8, max_context_len=8192,
                               clean=False, units=132, override={"MMA_N": mma, "MATH_WG": 2, "SUBS": 1, "STAGES": 4})
    got = cfg.constexprs["MMA_N"]
    assert got == (mma or (128 if T > 4 else 0))  # past one wgmma (T > 4 at H 64) parts are not optional
    assert q_rows(T, 64, got) == rows and config_parts(T, 64, got) == parts and (not got or rows == parts * got)
    assert cfg.schedule["smem_per_program"] == smem_bytes(rows, 128, 64, 4 * 2)


@pytest.mark.parametrize("ov, msg", [({"MMA_N": 96}, "power of two"), ({"MMA_N": 256}, "at most 128"),
                                     ({"MMA_N": 32}, "multiple of heads")])
def test_mma_n_must_be_a_part_of_whole_rows(ov, msg):
    with pytest.raises(ValueError, match=msg):
        paged_ws_sm90_config(heads=64, dim=128, next_n=6, block_size=64, batch=8, max_context_len=8192,
                             clean=False, units=132, override=ov)


def test_a_batch_past_the_32_bit_split_runs_the_portable_row():
    """The Gluon kernel counts the batch's cache blocks in 32 bits when it splits the work; a shape whose
    batch x cdiv(max_context_len, 64) reaches 2^31 goes to the portable row, and explain says why."""
    ok = dispatch.plan(shape(B=2 ** 14, T=1, L=2 ** 20), SM90)  # 2^14 x 2^14 blocks = 2^28
    assert ok.chosen.row.name == "paged_ws_sm90"
    big = dispatch.plan(shape(B=2 ** 17, T=1, L=2 ** 20), SM90)  # 2^17 x 2^14 = 2^31
    assert big.chosen.row.name == "paged"
    ws = next(c for c in big.candidates if c.row.name == "paged_ws_sm90")
    assert [c.name for c in ws.checks if not c.ok] == ["split blocks"]


def test_cpu_never_dispatches_the_gluon_row():
    assert dispatch.plan(shape(), targets.TARGETS["cpu"]).chosen.row.name == "paged"


@pytest.mark.skipif(not versions.holds("gluon_hopper"), reason=versions.FACTS["gluon_hopper"].required())
@pytest.mark.parametrize("extra, ok", [(0, True), (128, True), (4, False), (16, False)])
def test_cache_described_by_tma_or_planned_for_the_portable_kernel(extra, ok):
    """Block stride must be a multiple of 16 bytes and of D (rows of the fp8 view); otherwise the plan picks the
    portable kernel, and the TMA launcher refuses such a cache in one line rather than misread it."""
    t = meta_paged(extra=extra)
    got = dispatch.plan(dispatch.Shape("paged", 16, 8192, 64, 128, False, batch=8, next_n=2, block_size=64,
                                       cache_block_stride=t.kv_cache.stride(0)), SM90)
    assert got.chosen.row.name == ("paged_ws_sm90" if ok else "paged")
    assert ("TMA cannot describe" in dict((d.about, d.decided) for d in got.decisions)["cache"]) is not ok
    cfg = paged_ws_sm90_config(heads=64, dim=128, next_n=2, block_size=64, batch=8, max_context_len=8192, clean=False,
                               units=132)
    if not ok:
        with pytest.raises(UserError, match="TMA"):
            paged_ws_sm90_args(t, cfg, alloc_logits(t.S, 8192, "meta"), None)


@pytest.mark.parametrize("given", [False, True])
def test_fast_relaunch_rebuilds_the_first_launchs_arguments(given):
    """The fast path replays a signature through `rebuild`; it must give back exactly what the full path built
    (descriptors field by field, tensors by address, every integer)."""
    t = meta_paged(B=4, T=2)
    cfg = with_schedule(paged_ws_sm90_config(heads=64, dim=128, next_n=2, block_size=64, batch=4, max_context_len=8192,
                                             clean=True, units=132), not given)
    meta = torch.empty(133, 2, dtype=torch.int32, device="meta") if given else None
    out = alloc_logits(t.S, t.max_context_len, "meta")
    a = paged_ws_sm90_args(t, cfg, out, meta)
    ins = (t.q, t.kv_cache, t.weights, t.context_lens, t.block_table, meta)
    assert fastpath._same_args(a.rebuild(ins, out), a.args)
    assert a.grid == (132 * cfg.constexprs["SUBS"],)
    other = alloc_logits(t.S, t.max_context_len, "meta")  # another output: the rebuilt list points at it
    assert a.rebuild(ins, other)[7] is other


def _tables():
    from mqa_kernels.common import tuned_by_triton
    from mqa_kernels.decode.paged_ws_sm90.tuned_by_triton import BY_RELEASE

    return [(rel, N, reg, ch) for rel in ((3, 6), (3, 8), (3, 9))
            for N, per in sorted(tuned_by_triton.table(BY_RELEASE, CUDA_TUNED, rel).items())
            for reg, ch in sorted(per.items())]


@pytest.mark.parametrize("release, N, reg, choice", _tables())
def test_every_tuned_choice_fits_an_sm(monkeypatch, release, N, reg, choice):
    """Each entry of the sweep-written table (on each release: its tuned_by_triton.py's entries over tuned.py's) is what
    the config picks for a shape of its size class there, and fits one SM's shared memory and registers."""
    from mqa_kernels.common import tuned_by_triton

    monkeypatch.setattr(tuned_by_triton, "installed_release", lambda: release)
    H = 64
    T = N // H
    batch = 4096 if reg == "large" else 8
    assert regime(batch, 8192) == reg
    cfg = paged_ws_sm90_config(heads=H, dim=128, next_n=T, block_size=64, batch=batch, max_context_len=8192,
                               clean=False, units=132)
    c = cfg.constexprs
    assert all(c[k] == v for k, v in choice.items() if k in c)
    assert smem_bytes(q_rows(T, H, c["MMA_N"]), 128, 64, c["STAGES"] * c["MATH_WG"]) * c["SUBS"] <= SMEM_PER_SM
    threads = (c["MATH_WG"] + 1) * 128  # math warpgroups + the producer's (padded) warpgroup
    assert cfg.options["maxnreg"] * threads * c["SUBS"] <= 65536
    assert c["MATH_REGS"] * 128 * (c["MATH_WG"] - 1) <= cfg.options["maxnreg"] * threads  # setmaxnreg stays in budget


@pytest.mark.skipif(not versions.holds("gluon_hopper"), reason=versions.FACTS["gluon_hopper"].required())
@pytest.mark.parametrize("T, H, D, clean, bf16, given, pipe, wg, lanes, mma, ahead, ptx", some_heavy([
    (1, 64, 128, 0, 0, 0, 0, 1, 0, 0, 1, 0), (2, 64, 128, 1, 1, 1, 1, 1, 0, 0, 1, 0),
    (4, 64, 128, 1, 0, 0, 0, 2, 0, 0, 1, 0), (2, 32, 64, 0, 1, 1, 0, 1, 0, 0, 1, 0),
    (2, 64, 128, 1, 0, 0, 0, 3, 0, 0, 1, 0), (4, 64, 128, 1, 0, 0, 0, 2, 1, 0, 1, 0),
    (3, 64, 128, 0, 1, 1, 0, 2, 1, 0, 1, 0), (2, 64, 128, 1, 0, 0, 0, 3, 1, 0, 1, 0),
    (4, 64, 128, 1, 0, 0, 0, 2, 0, 128, 1, 0), (3, 64, 128, 0, 1, 1, 0, 2, 0, 128, 1, 0),
    (3, 64, 128, 1, 0, 0, 0, 2, 0, 64, 1, 0), (6, 64, 128, 1, 0, 0, 0, 2, 0, 128, 1, 0),
    (8, 64, 128, 0, 1, 1, 0, 2, 0, 128, 1, 0), (5, 64, 64, 1, 0, 0, 0, 2, 0, 64, 1, 0),
    (6, 64, 128, 1, 0, 0, 0, 3, 0, 64, 0, 0),
    # PTX_SLOTS: one wgmma with two accumulators (PIPE), three warpgroups, parts one at a time
    (2, 64, 128, 1, 0, 0, 1, 1, 0, 0, 1, 1), (1, 64, 128, 0, 0, 1, 0, 2, 0, 0, 1, 1),
    (6, 64, 128, 1, 1, 0, 0, 3, 0, 64, 0, 1)], keep={16}))  # PTX_SLOTS at two math warpgroups
def test_cross_compiles_to_tma_and_fp8_wgmma_without_spills(tmp_path, T, H, D, clean, bf16, given, pipe, wg, lanes,
                                                            mma, ahead, ptx):
    (res,) = sm90_builds.build("paged_ws", tmp_path, tmp_path / "cache", T=T, H=H, D=D, clean=clean, bf16=bf16,
                               given=given, pipe=pipe, wg=wg, lanes=lanes, mma=mma, ahead=ahead, ptx=ptx)
    assert "UTMALDG.2D" in res["sass"]  # cache blocks, scales and q by TMA
    n = mma or padded_rows(T, H) * H
    assert f"QGMMA.64x{n}x32.F32.E4M3.E4M3" in res["sass"]  # one wgmma: all rows x heads (or one per part)
    if mma:  # parts: each block loop holds one wgmma (D / 32 QGMMAs) per part with rows below next_n (3 at next_n 3)
        per_loop = {sum("QGMMA" in op for op in body) for body in tile_loops(res["sass"])} - {0}
        assert per_loop == {-(-T // (mma // H)) * D // 32}, per_loop
    assert "LOCAL:0" in res["usage"]  # no register spills
    tail = (f"_Q_IN_LANES_{int(lanes == 1)}_MMA_N_{mma}_AHEAD_{int(ahead or not mma)}_PTX_SLOTS_{ptx}"
            f"_LOADERS_{4 if wg == 4 else 1}_SPLIT_INSIDE_{int(wg == 1 and not given)}")
    assert res["lanes"] == (lanes == 1) and res["name"].endswith(tail)
    # One math warpgroup: the split's results (computed in the kernel or read from the metadata) reach the block
    # loop in uniform registers, so the loop has no uniform-register moves (kernel._through_shared says what they
    # cost). With several math warpgroups each one's ring slots are per-block arithmetic: moves there are expected.
    loops = tile_loops(res["sass"])
    assert loops and (wg > 1 or not [op for body in loops for op in body if "R2UR" in op])
    # The block table's rows are asked of the L2 before the split (one predicated prefetch), and the split needs
    # no 64-bit division subroutine (kernel._split_points: 32-bit, on a decode step's critical path).
    assert "CCTL.E.PF2" in res["sass"]
    assert "CALL.REL" not in res["sass"]
    # The three TMA descriptors (q, the cache's rows, its scales) are asked of the TMA unit at entry: the prefetches
    # name exactly the kernel's 128-byte descriptor parameters (a 4-D q with Q_IN_LANES moves the later ones).
    assert len(res["maps"]) == 3 and res["prefetched"] == res["maps"], (res["maps"], res["prefetched"])
    assert res["sass"].count("UTMACCTL.PF") == 3
    # A block's kv scales go from shared memory straight into the accumulator's row layout: no shared-memory
    # store (a layout conversion) inside the block loops.
    assert not [op for body in loops for op in body if op.startswith("STS") or " STS " in op]
    # Slot waits and releases: triton's ops put a warpgroup barrier (BAR.SYNC) in every block loop, PTX_SLOTS none;
    # its waits and releases address the ring's barriers where the build put them.
    bars = [sum("BAR.SYNC" in op for op in body) for body in loops]
    assert all(bars) if not ptx else not any(bars), bars
    if ptx:
        assert res["offsets"] == res["inits"] and min(res["offsets"]) > 0
        assert all(sum("SYNCS.ARRIVE" in op for op in body) for body in loops)  # every thread releases its slot


@pytest.mark.parametrize("T, R", [(4, 2), (3, 2), (2, 4)])
def test_q_in_lanes_descriptor(T, R):
    """Q_IN_LANES (a sweep option): q is described as [H/R, B*T, R, D] (R = 8 / NP) so that a block's shared row
    n holds draft row (n % 8) // R and head (n // 8) * R + n % R, the order the kernel's head sum reads; the same
    bytes as the [B*T*H, D] rows, read in place. Off by default and where NP is 1."""
    from mqa_cli.launch.common import alloc_logits
    from mqa_cli.launch.paged_ws_sm90 import paged_ws_sm90_args
    from mqa_kernels.decode.paged_ws_sm90.config import paged_ws_sm90_config

    t = meta_paged(B=4, T=T)
    kw = dict(heads=64, dim=128, next_n=T, block_size=64, batch=4, max_context_len=8192, clean=False, units=132)
    cfg = paged_ws_sm90_config(**kw, override={"Q_IN_LANES": True, "MATH_WG": 2, "SUBS": 1, "STAGES": 6})
    a = paged_ws_sm90_args(t, cfg, alloc_logits(4 * T, 8192, "meta"), None)
    NP = cfg.constexprs["NP"]
    assert cfg.constexprs["Q_IN_LANES"] and 8 // NP == R
    assert a.args[0].base is t.q
    assert a.args[0].shape == [64 // R, 4 * T, R, 128] and a.args[0].strides == [R * 128, 64 * 128, 128, 1]
    assert a.args[0].block_shape == [64 // R, NP, R, 128]
    from mqa_kernels.decode.paged_ws_sm90.config import regime, table_entry

    chosen = table_entry(T, 64, regime(4, 8192, 64)).get("Q_IN_LANES", False)
    assert paged_ws_sm90_config(**kw).constexprs["Q_IN_LANES"] == chosen  # the table's choice (the sweep's)
    one = dict(kw, next_n=1)
    assert not paged_ws_sm90_config(**one, override={"Q_IN_LANES": True}).constexprs["Q_IN_LANES"]  # NP 1: no use


def test_table_is_read_by_live_columns_then_padded_n():
    """config.table_entry: next_n 3 at H 64 (192 live columns) has its own entry, apart from next_n 4 (256); a head
    count the sweep did not run falls back to the entry of its padded N (H 32 next_n 3: NP 4 x 32 = 128)."""
    from mqa_kernels.decode.paged_ws_sm90.config import table_entry

    assert table_entry(3, 64, "large") == CUDA_TUNED[192]["large"]
    assert table_entry(4, 64, "large") == CUDA_TUNED[256]["large"]
    assert 96 not in CUDA_TUNED and table_entry(3, 32, "small") == CUDA_TUNED[128]["small"]
    cfg = paged_ws_sm90_config(heads=32, dim=128, next_n=3, block_size=64, batch=8, max_context_len=8192,
                               clean=False, units=132)
    assert all(cfg.constexprs[k] == v for k, v in CUDA_TUNED[128]["small"].items() if k in cfg.constexprs)


@pytest.mark.parametrize("ptx", [False, True])
def test_ptx_slots_is_a_choice_the_config_carries_and_names(ptx):
    """PTX_SLOTS comes from the table or an override, names the compiled variant, and leaves the barrier offsets
    unresolved (-1) until a build reads them; the schedule says which slot waits the config runs."""
    cfg = paged_ws_sm90_config(heads=64, dim=128, next_n=6, block_size=64, batch=8, max_context_len=8192,
                               clean=False, units=132, override={"PTX_SLOTS": ptx})
    c = cfg.constexprs
    assert c["PTX_SLOTS"] is ptx and (c["FULL_AT"], c["EMPTY_AT"]) == (-1, -1)
    assert cfg.name.endswith(f"_PTX_SLOTS_{int(ptx)}_LOADERS_1_SPLIT_INSIDE_0")
    assert ("PTX" in cfg.schedule["slots"]) is ptx


def test_four_math_warpgroups_each_have_their_own_producer_warp():
    """With four math warpgroups (the table's next_n 2 at large batches) LOADERS = 4 producer warps, warp k streaming
    math warpgroup k's ring, named in the compiled variant; with fewer, one producer warp feeds every ring."""
    kw = dict(heads=64, dim=128, next_n=2, block_size=64, batch=128, max_context_len=65536, clean=False, units=132)
    table = paged_ws_sm90_config(**kw)
    assert (table.constexprs["MATH_WG"], table.constexprs["LOADERS"]) == (4, 4)  # the table's choice
    assert table.name.endswith("_LOADERS_4_SPLIT_INSIDE_0")
    for g in (1, 2, 3):
        cfg = paged_ws_sm90_config(**kw, override={"MATH_WG": g, "STAGES": 4, "SUBS": 1})
        assert cfg.constexprs["LOADERS"] == 1 and cfg.name.endswith("_LOADERS_1_SPLIT_INSIDE_0")


@HEAVY
@pytest.mark.skipif(not versions.holds("gluon_hopper"), reason=versions.FACTS["gluon_hopper"].required())
def test_split_inside_moves_only_the_computed_split():
    """SPLIT_INSIDE (the rule: the small class with one math warpgroup) makes each partition compute its range after
    warp_specialize; a schedule the plan reads is read before it, as before (split_constexprs turns SPLIT_INSIDE off
    with SELF_SCHEDULE; the kernel takes both as they come)."""
    from mqa_kernels.decode.paged_ws_sm90.config import paged_ws_sm90_config

    kw = dict(heads=64, dim=128, next_n=1, block_size=64, max_context_len=8192, clean=False, units=132)
    cfg = paged_ws_sm90_config(**kw, batch=1)
    assert cfg.constexprs["SPLIT_INSIDE"] and cfg.constexprs["MATH_WG"] == 1
    assert not paged_ws_sm90_config(**kw, batch=1, override={"MATH_WG": 2, "SUBS": 2}).constexprs["SPLIT_INSIDE"]
    assert not paged_ws_sm90_config(**kw, batch=4096, override={"MATH_WG": 1, "SUBS": 2}).constexprs["SPLIT_INSIDE"]  # large
    read = with_schedule(cfg, False).constexprs
    assert not read["SELF_SCHEDULE"] and not read["SPLIT_INSIDE"] and with_schedule(cfg, True) is cfg
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    base = [sys.executable, "-m", "mqa_cli", "dump", "--target", "sm90", "--paged", "--batch", "1", "--context-len",
            "8192", "--next-n", "1", "--stage", "sass", "--kernel"]

    def sass(keys):
        r = subprocess.run(base + [f"paged_ws_sm90:{keys}"], capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        # addresses and encodings left out, and the key that names the build (the kernel's symbol carries it)
        return re.sub(r"/\*[0-9a-f]{4,}\*/|/\* 0x[0-9a-f]+ \*/|SPLIT_INSIDE_[01]", "", r.stdout)

    assert sass("SPLIT_INSIDE=1") != sass("SPLIT_INSIDE=0")
