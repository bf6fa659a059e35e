"""Cross-compile the warp-specialised Gluon Hopper kernel for sm90 on the CPU (no GPU) and check what came out.

The kernel is signed the way dump signs it: its config (mqa_kernels.prefill.gluon_ws_sm90.config) and the TMA
launcher's LaunchArgs (mqa_cli.launch.gluon_ws_sm90.gluon_ws_sm90_args) on "meta" tensors in the forms engines pass (q and kv row
slices, strided kv scales / ks / ke, a padded weights row). For every clean / compressed / bf16 variant:
the symbol carries the config keys, the math is fp8 wgmma, nothing spills to local memory, setmaxnreg is
honoured, and the IR forms row x stride products in 64 bits (output rows, weights rows, strided ks/ke/scales).

Compiles run in child processes (tests/sm90_builds.py).
"""
import itertools
import re
from importlib.metadata import version
from pathlib import Path

import pytest

from mqa_cli.inspect.sass_loops import tile_loops
from mqa_kernels.common import versions

from . import sm90_builds
from .conftest import HEAVY, some_heavy

TRITON = version("triton")
pytestmark = [pytest.mark.versions, pytest.mark.skipif(
    not versions.holds("gluon_hopper"),
    reason=f"the gluon_ws_sm90 kernel compiles on triton {versions.FACTS['gluon_hopper'].required()} (installed: "
           f"triton {TRITON})")]

VARIANTS = list(itertools.product((True, False), repeat=3))  # (clean, compressed, bf16)
EVERYDAY = {(True, False, False), (False, True, True)}  # the heavy run compiles the other six too
S, N, H, MAX_SEQLEN_K = 4096, 4096, 64, 1000

class _Builds(dict):
    """{variant: its build (tests/sm90_builds.py)}: variants compiled on first use, each in a child process."""

    def __init__(self, root: Path):
        super().__init__()
        self.root = root

    def start(self, variants):
        folders = {v: self.root / "".join(str(int(x)) for x in v) for v in variants}
        procs = {v: sm90_builds.start("prefill", folders[v], clean=v[0], compressed=v[1], bf16=v[2], S=S, N=N, H=H,
                                      max_seqlen_k=MAX_SEQLEN_K) for v in variants}
        for v, proc in procs.items():
            (self[v],) = sm90_builds.finish(proc, folders[v])

    def __missing__(self, v):
        self.start([v])
        return self[v]


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    b = _Builds(tmp_path_factory.mktemp("gluon_ws"))
    b.start(sorted(EVERYDAY))  # in parallel subprocesses
    return b


def _ids(v):
    return "clean{}-compressed{}-bf16{}".format(*map(int, v))


VARIANT_PARAMS = some_heavy([(v,) for v in VARIANTS], keep={i for i, v in enumerate(VARIANTS) if v in EVERYDAY}, ids=_ids)


# ---------------------------------------------------------------------------------------------- IR helpers

_DEF = re.compile(r"^\s*(%[\w.#]+) = (\S+) (.*)$")


def _arg_names(ttgir: str, arg: str) -> set:
    """The SSA names the runtime argument `arg` has: its own in the kernel (and the default partition), and
    the block argument each warp-specialize partition receives it as."""
    names = {f"%{arg}"}
    ws = re.search(r"ttg\.warp_specialize\(([^)]*)\)", ttgir)
    if ws is None:
        return names
    captures = [x.strip() for x in ws.group(1).split(",")]
    if f"%{arg}" not in captures:
        return names
    k = captures.index(f"%{arg}")
    for line in ttgir.splitlines():
        head = re.match(r"\s*partition\d+\((.*)\)\s*num_warps", line)
        if head:
            params = re.findall(r"(%[\w.]+): ", head.group(1))
            names.add(params[k])
    return names


def row_products(ttgir: str, arg: str) -> dict:
    """Multiplies by the runtime int `arg` in the TTGIR: scalar i32 ones (a row x stride that can wrap),
    i32 tensor ones (small in-block offsets), and i64 ones (by its sign extension, scalar or splat)."""
    narrow, wide = _arg_names(ttgir, arg), set()
    found = {"i32_scalar": 0, "i32_tensor": 0, "i64": 0}
    for line in ttgir.splitlines():
        m = _DEF.match(line)
        if not m:
            continue
        result, op, rest = m.groups()
        operands = set(re.findall(r"%[\w.#]+", rest.split(" : ")[0]))
        ty = rest.rsplit(" : ", 1)[-1].split(" loc(")[0].strip()
        if op == "arith.extsi" and operands & narrow and ty.startswith("i32 to i64"):
            wide.add(result)
        elif op in ("tt.splat", "tt.broadcast", "ttg.convert_layout"):
            if operands & narrow:
                narrow.add(result)
            if operands & wide:
                wide.add(result)
        elif op == "arith.muli":
            if operands & wide:
                found["i64"] += 1
            elif operands & narrow:
                found["i32_scalar" if ty == "i32" else "i32_tensor"] += 1
    return found


# ---------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("variant", VARIANT_PARAMS)
def test_named_after_config(builds, variant):
    r = builds[variant]
    clean, compressed, bf16 = map(int, variant)
    assert f"_CLEAN_{clean}_COMPRESSED_{compressed}_BF16_{bf16}_" in r["name"], r["name"]
    assert r["name"].startswith(f"mqa_logits_gluon_ws_sm90_H_{H}_D_128_BLOCK_Q_4_BLOCK_KV_64_STAGES_"), r["name"]
    # the H 64 layout the sweep chose; compressed: the wgmma turns (PINGPONG 2, config.py's rule)
    assert r["name"].endswith(f"_Q_GROUPS_2_KV_GROUPS_1_Q_IN_LANES_1_TMA_STORE_0_CHAINS_1_TILE_PTR_{1 - compressed}"
                              f"_PTX_SLOTS_0_PINGPONG_{2 * compressed}"), r["name"]


@pytest.mark.parametrize("variant", VARIANT_PARAMS)
def test_compressed_builds_take_turns_at_the_tensor_cores(builds, variant):
    """PINGPONG 2 in the compressed form: each math warpgroup waits at its named barrier (14 or 15, in a register,
    256 threads: its own and the other's arriving) before its wgmma and lets the other go after it (warpgroup 1 also
    once before its first tile); the full form has no 256-thread barrier."""
    ptx = builds[variant]["ptx"]
    waits = re.findall(r"\{ bar\.sync %r\d+, 256;", ptx)
    passes = re.findall(r"\{ bar\.arrive %r\d+, 256;", ptx)
    if variant[1]:
        assert (len(waits), len(passes)) == (2, 3), (waits, passes)
    else:
        assert not waits and not passes and not re.search(r"bar\.\w+\s+\S+,\s*256;", ptx)


def test_turns_rule():
    """Config.py's rule: the turns with compressed logits at two math warpgroups, H >= 64 and D >= 128; the override
    key sets them either way where two math warpgroups run, and refuses them at three."""
    from mqa_kernels.prefill.gluon_ws_sm90.config import gluon_ws_sm90_config as cfg

    kw = dict(S=8192, N=8192, clean=False, units=132)
    pp = lambda **k: cfg(**{**kw, **k}).constexprs["PINGPONG"]  # noqa: E731
    assert pp(heads=64, dim=128, compressed=True) == 2 and pp(heads=128, dim=128, compressed=True) == 2
    assert pp(heads=64, dim=128) == 0 and pp(heads=64, dim=64, compressed=True) == 0
    assert pp(heads=32, dim=128, compressed=True) == 0
    assert pp(heads=64, dim=128, compressed=True, override={"PINGPONG": 0}) == 0
    assert pp(heads=32, dim=128, override={"PINGPONG": 2}) == 2
    with pytest.raises(ValueError, match="PINGPONG"):
        pp(heads=8, dim=64, override={"PINGPONG": 2})  # the table's (1, 3) layout
    with pytest.raises(ValueError, match="PINGPONG"):
        pp(heads=64, dim=128, override={"PINGPONG": 1})


@pytest.mark.parametrize("variant", VARIANT_PARAMS)
def test_wgmma_and_no_spills(builds, variant):
    r = builds[variant]
    sass, ptx = r["sass"], r["ptx"]
    assert len(re.findall(r"QGMMA\.64x256x32\.F32\.E4M3\.E4M3", sass)) >= 8, "4 k-steps in each math warpgroup"
    assert "wgmma.mma_async" in ptx
    assert not re.search(r"\b(LDL|STL)\b", sass) and "ld.local" not in ptx and "st.local" not in ptx
    usage = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", r["usage"])
    assert usage and int(usage.group(2)) == 0 and int(usage.group(4)) == 0, r["usage"]
    assert "C7514" not in r["ptxas"], r["ptxas"][-2000:]  # wgmma not serialised
    assert sass.count("WARPGROUP.DEPBAR") <= 4, "one wait per math warpgroup"
    # one query row per lane (Q_IN_LANES): the head sum is in-thread, so the only shuffles left are the few
    # reductions over a work item's rows (ks / ke); query-major columns needed 2 per partial sum (56 and up)
    assert sass.count("SHFL.BFLY") <= 40, sass.count("SHFL.BFLY")
    # setmaxnreg honoured: 240 for the math warpgroups, 24 for the producer / filler warps.
    assert "C7508" not in r["ptxas"] and "USETMAXREG" in sass, r["ptxas"][-2000:]
    regs = {int(x) for x in re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)", ptx)}
    assert max(regs) >= 240 and min(regs) <= 24, regs
    assert r["shared"] <= 227 * 1024


@pytest.mark.parametrize("variant", VARIANT_PARAMS)
def test_row_offsets_are_64_bit(builds, variant):
    r = builds[variant]
    ttgir = r["ttgir"]
    clean = variant[0]
    out = row_products(ttgir, "stride_out_s")
    # Each math warpgroup forms its block's row base in 64 bits (the filler warp each row's, with CLEAN);
    # only the small in-block offsets (< BLOCK_Q rows) stay int32 tensors.
    assert out["i32_scalar"] == 0 and out["i64"] >= (3 if clean else 2), out
    w = row_products(ttgir, "stride_w_s")
    assert w["i32_scalar"] == 0 and w["i32_tensor"] == 0 and w["i64"] >= 2, w
    for arg in ("stride_ks", "stride_ke", "stride_scale"):
        assert r["args"][arg] == "i32", (arg, r["args"][arg])  # strided in this build: a runtime argument
        found = row_products(ttgir, arg)
        assert found["i32_scalar"] == 0 and found["i64"] >= 1, (arg, found)


# ---------------------------------------------------------------------------------------------- launcher


def _meta_prefill(q, kv, S, N, H=64):
    import torch

    from mqa_cli.problem.tensors import Prefill

    m = dict(device="meta")
    return Prefill(q, kv, torch.empty(N, **m), torch.empty(S, H, **m), torch.empty(S, dtype=torch.int32, **m),
                   torch.empty(S, dtype=torch.int32, **m))


def test_gluon_ws_sm90_args_reads_engine_forms_in_place():
    """q / kv row slices and a row-padded kv go to the TMA as they are. The q descriptor is the [H/2, S, 2, D]
    view (head pair, row, head parity, dim) that puts one query row in each lane of a quad (Q_IN_LANES), so a
    head slice of q is read in place too; a q whose heads are not D apart is copied. With the query-major order
    (q_in_lanes=False) q is the [S*H, D] row view and a head slice is copied."""
    import torch

    from mqa_cli.launch.common import alloc_logits
    from mqa_cli.launch.gluon_ws_sm90 import gluon_ws_sm90_args
    from mqa_kernels.prefill.gluon_ws_sm90.config import gluon_ws_sm90_config

    f8, m = torch.float8_e4m3fn, dict(device="meta")
    S, N = 100, 300
    cfg = gluon_ws_sm90_config(heads=64, dim=128, S=S, N=N, clean=True, units=132)
    q = torch.empty(S + 7, 64, 128, dtype=f8, **m)[7:]
    kv = torch.empty(N + 5, 256, dtype=f8, **m)[5:, :128]  # row slice of a row-padded buffer
    t = _meta_prefill(q, kv, S, N)
    a = gluon_ws_sm90_args(t, cfg, alloc_logits(S, N, "meta"))
    assert cfg.constexprs["Q_IN_LANES"] and cfg.constexprs["BLOCK_Q"] == 4
    assert a.args[0].base is q and a.args[1].base is kv
    assert a.args[0].shape == [32, S, 2, 128] and a.args[0].strides == [256, 64 * 128, 128, 1]
    assert a.args[0].block_shape == [32, 4, 2, 128]
    assert a.args[1].strides == [256, 1]
    assert a.args[7:] == [S, N, 0, 1, 64, 1, 1, alloc_logits(S, N, "meta").stride(0), cfg.schedule["items"], 1, None]
    assert a.grid == cfg.grid
    heads = torch.empty(S, 128, 128, dtype=f8, **m)[:, :64]  # rows are not [H, D] blocks at stride H*D
    b = gluon_ws_sm90_args(_meta_prefill(heads, kv, S, N), cfg, alloc_logits(S, N, "meta"))
    assert b.args[0].base is heads and b.args[0].strides == [256, 128 * 128, 128, 1]
    padded = torch.empty(S, 64, 256, dtype=f8, **m)[:, :, :128]  # heads 256 bytes apart: no [H/2, S, 2, D] view
    c = gluon_ws_sm90_args(_meta_prefill(padded, kv, S, N), cfg, alloc_logits(S, N, "meta"))
    assert c.args[0].base is not padded and c.args[0].base.is_contiguous()
    qmajor = gluon_ws_sm90_config(heads=64, dim=128, S=S, N=N, clean=True, units=132, q_in_lanes=False)
    d = gluon_ws_sm90_args(t, qmajor, alloc_logits(S, N, "meta"))
    assert d.args[0].base is q and d.args[0].shape == [S * 64, 128] and d.args[0].block_shape == [256, 128]
    e = gluon_ws_sm90_args(_meta_prefill(heads, kv, S, N), qmajor, alloc_logits(S, N, "meta"))
    assert e.args[0].base is not heads and e.args[0].base.is_contiguous()


def test_tma_store_descriptor_follows_each_calls_logits():
    """With tma_store the logits get a descriptor ([S, N] at their row stride, block [BLOCK_Q, 64]); the fast path's
    rebuild puts a later call's logits under it; a row stride TMA cannot describe is refused in one line."""
    import torch

    from mqa_cli.errors import UserError
    from mqa_cli.launch.common import alloc_logits
    from mqa_cli.launch.gluon_ws_sm90 import gluon_ws_sm90_args
    from mqa_kernels.prefill.gluon_ws_sm90.config import gluon_ws_sm90_config

    f8, m = torch.float8_e4m3fn, dict(device="meta")
    S, N = 300, 1000
    t = _meta_prefill(torch.empty(S, 8, 128, dtype=f8, **m), torch.empty(N, 128, dtype=f8, **m), S, N, H=8)
    cfg = gluon_ws_sm90_config(heads=8, dim=128, S=S, N=N, clean=True, units=132, tma_store=True)
    assert cfg.constexprs["TMA_STORE"] and cfg.constexprs["BLOCK_Q"] == 16
    out = alloc_logits(S, N, "meta")
    a = gluon_ws_sm90_args(t, cfg, out)
    d = a.args[-1]
    assert d.base is out and d.shape == [S, N] and d.strides == [out.stride(0), 1] and d.block_shape == [16, 64]
    out2 = alloc_logits(S, N, "meta")
    again = a.rebuild((t.q, t.kv, t.kv_scales, t.weights, t.ks, t.ke), out2)
    assert again[-1].base is out2 and again[-1].shape == [S, N] and again[6] is out2
    with pytest.raises(UserError, match="TMA"):
        gluon_ws_sm90_args(t, cfg, torch.empty(S, 1027, **m)[:, :N])  # row stride 1027 x 4 bytes
    assert not gluon_ws_sm90_config(heads=8, dim=128, S=S, N=N, clean=True, compressed=True,
                                    tma_store=True).constexprs["TMA_STORE"]  # compressed rows: no tile to store
    plain = gluon_ws_sm90_config(heads=8, dim=128, S=S, N=N, clean=True, units=132)
    assert not plain.constexprs["TMA_STORE"] and gluon_ws_sm90_args(t, plain, out).args[-1] is None


def test_gluon_ws_sm90_args_resolve_the_ring_offsets_of_a_ptx_slots_launch(monkeypatch):
    """A PTX_SLOTS launch of the prefill kernel gets its ring barriers' offsets from the launcher's hook (on a GPU: a
    first build, mqa_cli.launch.barrier_offsets), before the launch compiles; other launches are left alone."""
    import torch

    from mqa_cli.launch import barrier_offsets
    from mqa_cli.launch.common import alloc_logits
    from mqa_cli.launch.gluon_ws_sm90 import gluon_ws_sm90_args
    from mqa_kernels.prefill.gluon_ws_sm90.config import gluon_ws_sm90_config

    seen = []

    def fake_resolve(cfg, la, tensor):
        seen.append(cfg.name)
        if la.constexprs.get("PTX_SLOTS"):
            la.constexprs.update(FULL_AT=4096, EMPTY_AT=4128)

    monkeypatch.setattr(barrier_offsets, "resolve_on_device", fake_resolve)
    f8, m = torch.float8_e4m3fn, dict(device="meta")
    S, N = 300, 1000
    t = _meta_prefill(torch.empty(S, 64, 64, dtype=f8, **m), torch.empty(N, 64, dtype=f8, **m), S, N, H=64)
    out = alloc_logits(S, N, "meta")
    ptx = gluon_ws_sm90_config(heads=64, dim=64, S=S, N=N, clean=True, units=132, override={"PTX_SLOTS": 1})
    plain = gluon_ws_sm90_config(heads=64, dim=64, S=S, N=N, clean=True, units=132, override={"PTX_SLOTS": 0})
    a, b = gluon_ws_sm90_args(t, ptx, out), gluon_ws_sm90_args(t, plain, out)
    assert seen == [ptx.name, plain.name]
    assert (a.constexprs["FULL_AT"], a.constexprs["EMPTY_AT"]) == (4096, 4128)
    assert (b.constexprs["FULL_AT"], b.constexprs["EMPTY_AT"]) == (-1, -1) and not b.constexprs["PTX_SLOTS"]
    assert ptx.constexprs["FULL_AT"] == -1  # the config itself keeps the placeholders


def test_gluon_ws_sm90_args_refuses_what_the_kernel_cannot_write():
    import torch

    from mqa_cli.errors import UserError
    from mqa_cli.launch.common import alloc_logits
    from mqa_cli.launch.gluon_ws_sm90 import gluon_ws_sm90_args
    from mqa_kernels.prefill.gluon_ws_sm90.config import gluon_ws_sm90_config

    f8, m = torch.float8_e4m3fn, dict(device="meta")
    S, N = 64, 200
    t = _meta_prefill(torch.empty(S, 64, 128, dtype=f8, **m), torch.empty(N, 128, dtype=f8, **m), S, N)
    bf16 = gluon_ws_sm90_config(heads=64, dim=128, S=S, N=N, clean=True, bf16=True, units=132)
    with pytest.raises(UserError, match="bfloat16"):
        gluon_ws_sm90_args(t, bf16, alloc_logits(S, N, "meta"))  # fp32 buffer for a bf16 kernel
    full = gluon_ws_sm90_config(heads=64, dim=128, S=S, N=N, clean=True, units=132)
    with pytest.raises(UserError, match="whole kv tiles"):
        gluon_ws_sm90_args(t, full, torch.empty(S, N, **m))  # row stride 200 < 256
    comp = gluon_ws_sm90_config(heads=64, dim=128, S=S, N=N, clean=True, compressed=True, units=132)
    gluon_ws_sm90_args(t, comp, torch.empty(S, 100, **m), 100)  # compressed: any row stride that holds the columns
    with pytest.raises(UserError, match="columns"):
        gluon_ws_sm90_args(t, comp, torch.empty(S, 100, **m), 120)
    # a query block's rows (BLOCK_Q 4 here) are addressed by int32 offsets from a 64-bit base: a view whose row
    # stride would take them past 2^31 elements is refused; one just under it runs
    assert full.constexprs["BLOCK_Q"] == 4
    gluon_ws_sm90_args(t, full, torch.empty(S, 2 ** 31 // 3 - 256, **m)[:, :N])
    with pytest.raises(UserError, match="2\\^31"):
        gluon_ws_sm90_args(t, full, torch.empty(S, 2 ** 31 // 3 + 64, **m)[:, :N])


def test_config_schedule():
    from mqa_kernels.prefill.gluon_ws_sm90 import config

    c = config.gluon_ws_sm90_config(heads=64, dim=128, S=4096, N=4096, clean=False, compressed=True, bf16=True,
                                    units=132)
    assert c.variant == "gluon_ws_sm90" and c.launcher == "gluon_ws_sm90" and c.keys == config.KEYS
    assert c.schedule["items"] == 512 and c.schedule["args"] == {"n_items": 512, "kv_splits": 1} and c.grid == (132,)
    split = config.gluon_ws_sm90_config(heads=8, dim=128, S=8192, N=8192, clean=True, units=132, n=256, splits=3)
    assert split.constexprs["BLOCK_Q"] == 32 and split.schedule["args"] == {"n_items": 128 * 3, "kv_splits": 3}
    small = config.gluon_ws_sm90_config(heads=64, dim=128, S=9, N=10, clean=True, units=132)
    assert small.grid == (2,) and small.schedule["items"] == 2  # (no triton or torch: test_structure.py's)


HEAD_LAYOUTS = [  # (H, D, wgmma N): BLOCK_Q = N / H query rows per math warpgroup
    (128, 128, 256),  # BLOCK_Q 2: query-major columns
    (8, 64, 128),  # BLOCK_Q 16: four query rows per lane of a quad
    (16, 256, 128),  # BLOCK_Q 8, 8 k-steps
    (8, 128, 256),  # BLOCK_Q 32
]


@pytest.mark.parametrize("H_,D_,n", some_heavy(HEAD_LAYOUTS, keep={1}, ids=[f"H{h}-D{d}-N{n}" for h, d, n in HEAD_LAYOUTS]))
def test_head_count_layouts_compile_without_spills(tmp_path, H_, D_, n):
    """The layouts the head-count sweep tries (and dispatch gives a shape once the sweep measured it ahead): each
    compiles for sm90 with its config's name, fp8 wgmma of N = BLOCK_Q * H, no local memory. Where BLOCK_Q is a
    multiple of 4 the query rows are spread over the lanes of a quad: the head sum needs no shuffle and each logit
    is stored once (two warpgroups x 2 kv rows x BLOCK_Q / 4 rows a thread = BLOCK_Q stores in the code)."""
    (res,) = sm90_builds.build("prefill", tmp_path, clean=1, compressed=0, bf16=0, S=2048, N=2048, H=H_, groups="2x1",
                               D=D_, n=n)
    sass = res["sass"]
    block_q, lanes = n // H_, (n // H_) % 4 == 0
    assert f"_H_{H_}_D_{D_}_BLOCK_Q_{block_q}_" in res["name"], res["name"]
    assert res["name"].endswith(f"_Q_IN_LANES_{int(lanes)}_TMA_STORE_0_CHAINS_1_TILE_PTR_{int(block_q <= 16)}_PTX_SLOTS_0_PINGPONG_0"), res["name"]
    assert len(re.findall(rf"QGMMA\.64x{n}x32\.F32\.E4M3\.E4M3", sass)) >= 2 * D_ // 32
    loops = tile_loops(sass)
    in_loop = [op for body in loops for op in body if re.match(r"(LDL|STL)\b", op)]
    assert loops and bool(in_loop) == (block_q == 32 and versions.holds("gluon_block_q_32_spills")), \
        f"{len(in_loop)} spill instructions in the tile loop"
    if block_q < 32:  # (32 rows of per-row state beside a 64 x 256 accumulator: a few per-item spills, none per tile)
        assert not re.search(r"\b(LDL|STL)\b", sass) and "LOCAL:0" in res["usage"], res["usage"]
    assert "C7514" not in res["ptxas"], res["ptxas"][-2000:]
    if lanes:
        assert not [op for body in loops for op in body if "SHFL" in op], "a shuffle in the tile loop"
        assert len(re.findall(r"STG\.E ", sass)) == block_q, len(re.findall(r"STG\.E ", sass))


@HEAVY
@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
def test_logits_through_shared_memory_by_tma(tmp_path, bf16):
    """tma_store (a sweep option): each warpgroup's logits tile goes to one of its two shared buffers and out by one
    TMA store; the tile loop has no global store of its own, the copy is issued by one elected thread after the
    warpgroup's own named barrier (128 threads, never the CTA's), and a buffer is reused only once at most one copy
    (the other buffer's) is still reading shared memory."""
    (res,) = sm90_builds.build("prefill", tmp_path, clean=1, compressed=0, bf16=bf16, S=2048, N=2048, H=8,
                               groups="2x1", D=128, n=128, tma_store=True)
    sass, ptx = res["sass"], res["ptx"]
    assert res["name"].endswith("_Q_IN_LANES_1_TMA_STORE_1_CHAINS_1_TILE_PTR_0_PTX_SLOTS_0_PINGPONG_0"), res["name"]
    assert sass.count("UTMASTG.2D") == 2, "one TMA store site per math warpgroup"
    loops = tile_loops(sass)
    assert loops and not [op for body in loops for op in body if re.match(r"STG\.E", op) or re.match(r"(LDL|STL)\b", op)]
    assert "LOCAL:0" in res["usage"], res["usage"]
    for m in re.finditer(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta", ptx):
        before = ptx[max(0, m.start() - 600):m.start()]
        assert re.search(r"bar\.sync\s+[1-9]\d*,\s*128;|bar\.sync\s+0,\s*128;", before), before[-300:]
        assert "elect.sync" in before
    assert ptx.count("cp.async.bulk.wait_group.read \t1;") >= 2 and "cp.async.bulk.wait_group.read \t0;" in ptx


@HEAVY
def test_head_sum_in_independent_chains(tmp_path):
    """chains 4 (a sweep option): each logit's in-thread head sum is 4 independent FMA chains of H / 4, then 3 adds,
    instead of one chain of H dependent FMAs (H 64: 64 x 4 cycles of latency per logit); still no shuffle and no
    spill in the tile loop."""
    (res,) = sm90_builds.build("prefill", tmp_path, clean=1, compressed=0, bf16=0, S=2048, N=2048, H=64,
                               groups="2x1", D=64, n=256, chains=4)
    sass = res["sass"]
    assert res["name"].endswith("_Q_IN_LANES_1_TMA_STORE_0_CHAINS_4_TILE_PTR_1_PTX_SLOTS_0_PINGPONG_0"), res["name"]
    loops = tile_loops(sass)
    ops = [op for body in loops for op in body]
    assert loops and not [op for op in ops if "SHFL" in op or re.match(r"(LDL|STL)\b", op)]
    # 2 logits a thread x 3 adds joining the chains, in each math warpgroup's loop
    assert all(sum(op.startswith("FADD") for op in body) >= 6 for body in loops), [sum(op.startswith("FADD") for op in b) for b in loops]


@HEAVY
@pytest.mark.parametrize("variant", [(True, False, False), (False, True, True)], ids=_ids)
def test_three_warpgroups_sharing_query_rows(tmp_path, variant):
    """groups (1, 3): three math warpgroups share a 2-row query block (wgmma N 128) and split each 192-row kv tile
    into their 64-row blocks (three TMA loads a ring stage); 160 registers each, and nothing spills."""
    (res,) = sm90_builds.build("prefill", tmp_path, clean=variant[0], compressed=variant[1], bf16=variant[2], S=S, N=N,
                               H=H, max_seqlen_k=MAX_SEQLEN_K, groups="1x3")
    sass = res["sass"]
    assert res["name"].endswith("_Q_GROUPS_1_KV_GROUPS_3_Q_IN_LANES_0_TMA_STORE_0_CHAINS_1_TILE_PTR_0_PTX_SLOTS_0_PINGPONG_0"), res["name"]
    assert "_BLOCK_Q_2_" in res["name"], res["name"]
    assert len(re.findall(r"QGMMA\.64x128x32\.F32\.E4M3\.E4M3", sass)) >= 12, "4 k-steps in each of 3 warpgroups"
    assert len(re.findall(r"UTMALDG", sass)) >= 2, "q and kv blocks by TMA"
    assert not re.search(r"\b(LDL|STL)\b", sass)
    usage = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", res["usage"])
    assert usage and int(usage.group(2)) == 0 and int(usage.group(4)) == 0, res["usage"]
    assert "C7514" not in res["ptxas"], res["ptxas"][-2000:]

