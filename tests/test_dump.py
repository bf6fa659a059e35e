"""`mqa-logits dump` on a CPU machine: cross-compiles for sm90, sm100, gfx942 and gfx950.

Every compile runs the CLI in a subprocess without TRITON_INTERPRET (this test process runs the
interpreter, and a process that imported triton in interpreter mode cannot compile), against a
private Triton cache so the first dump really compiles and the second can be seen to hit the cache.
The kernel compiles the same for any S / N, so the problem is small; --seq 4096 selects the
specialised rows where they exist (h64d128 on sm90 and gfx950), the portable one elsewhere.
"""
import json
import re
import struct
from pathlib import Path

import pytest

from mqa_cli.inspect.asm import elf_symbols
from mqa_cli.inspect.sass_loops import tile_loops

from .cli_batch import run_many
from .conftest import HEAVY, assert_one_line_error, cli, some_heavy

pytest.importorskip("triton")

PROBLEM = ("--heads", "64", "--dim", "128", "--seq", "4096")
TARGETS = ("sm90", "sm100", "gfx942", "gfx950")
EXPECTED = {"cuda": {"ttir", "ttgir", "ll", "ptx", "cubin", "sass"}, "hip": {"ttir", "ttgir", "ll", "amdgcn", "hsaco"}}
BACKEND = {"sm90": "cuda", "sm100": "cuda", "gfx942": "hip", "gfx950": "hip"}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return {"TRITON_CACHE_DIR": str(tmp_path_factory.mktemp("triton_cache"))}


@pytest.fixture(scope="module")
def dump_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("dumps")


def dump(*args, env, dump_dir):
    return cli("dump", *PROBLEM, "--dump-dir", dump_dir, *args, env_extra=env)


class _Dumps(dict):
    """target -> (JSON result, folder) of one dump each, made at first use (sm100's only in the heavy run)."""

    def __init__(self, env, dump_dir):
        super().__init__()
        self.env, self.dump_dir = env, dump_dir

    def __missing__(self, target):
        proc = dump("--target", target, "--json", env=self.env, dump_dir=self.dump_dir)
        assert proc.returncode == 0, proc.stderr[-3000:]
        d = json.loads(proc.stdout)
        self[target] = (d, Path(d["dump_dir"]))
        return self[target]


@pytest.fixture(scope="module")
def dumps(env, dump_dir):
    return _Dumps(env, dump_dir)


# every run: sm90 (the CUDA stages) and both AMD targets; sm100 in the heavy run
DUMPED = [pytest.param("sm100", marks=HEAVY) if t == "sm100" else t for t in TARGETS]


def _file(folder: Path, ext: str) -> Path:
    (path,) = folder.glob(f"*.{ext}")
    return path


@pytest.mark.parametrize("target", DUMPED)
def test_every_stage_and_manifest(dumps, target):
    d, folder = dumps[target]
    assert folder.parent.name == target
    assert folder.name == d["summary"]["config"]  # <kernel name>_w<warps>_s<stages>
    exts = {p.suffix[1:] for p in folder.iterdir() if p.name != "manifest.json"}
    expected = EXPECTED[BACKEND[target]]
    if "gluon" in d["summary"]["kernel_name"]:  # Gluon kernels start at ttgir: there is no ttir stage
        expected = expected - {"ttir"}
    assert exts == expected
    assert all(p.stat().st_size > 0 for p in folder.iterdir())
    m = json.loads((folder / "manifest.json").read_text())
    assert m["target"] == target and m["gpu_target"]["backend"] == BACKEND[target]
    assert m["triton_version"] and m["hash"] == d["summary"]["hash"]
    assert m["kernel_name"] == d["summary"]["kernel_name"] and m["config"]["name"] == m["kernel_name"]
    if "gluon" in m["kernel_name"]:  # warp-specialised: worker partitions add warps to the default ones
        assert d["summary"]["resources"]["warps"] > m["compile_options"]["num_warps"]
    else:
        assert m["compile_options"]["num_warps"] == d["summary"]["resources"]["warps"]
    assert sorted(m["files"]) == sorted(p.name for p in folder.iterdir())


def test_sm90_sass_has_e4m3_qgmma(dumps):
    d, folder = dumps["sm90"]
    sass = _file(folder, "sass").read_text()
    assert re.search(r"QGMMA\.\d+x\d+x\d+\.F32\.E4M3\.E4M3", sass)
    tc = d["summary"]["instructions"]["tensor core"]
    assert any(op.startswith("QGMMA") and op.endswith("E4M3.E4M3") for op in tc), tc
    # the summary's tensor-core loops are the SASS file's: each one's length, and a wgmma in each
    loops = d["summary"]["tensor_loops"]
    assert loops and [lp["instructions"] for lp in loops] == [len(b) for b in tile_loops(sass)]
    assert all(lp["mix"].get("QGMMA", 0) > 0 and sum(lp["mix"].values()) == lp["instructions"] for lp in loops)


def test_gfx950_amdgcn_has_fp8_mfma(dumps):
    d, folder = dumps["gfx950"]
    text = _file(folder, "amdgcn").read_text()
    fp8 = [ln for ln in text.splitlines() if re.match(r"\s+v_mfma_\w*(fp8|f8f6f4)", ln)]
    assert fp8
    # f8f6f4 operands default to fp8 e4m3 (cbsz / blgp 0)
    assert not any(re.search(r"(cbsz|blgp):[1-9]", ln) for ln in fp8)
    tc = d["summary"]["instructions"]["tensor core"]
    assert any("fp8" in op or "e4m3×e4m3" in op for op in tc), tc


def test_gfx942_uses_fnuz_mfma(dumps):
    d, _ = dumps["gfx942"]
    assert any("fp8" in op for op in d["summary"]["instructions"]["tensor core"])
    m = json.loads((dumps["gfx942"][1] / "manifest.json").read_text())
    assert m["signature"]["q_ptr"] == "*fp8e4b8"


def _nv_info_regcount(cubin: bytes, name: str) -> int:
    """EIATTR_REGCOUNT (0x2f) for the kernel's symbol, read from the cubin's .nv.info section."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    strs = secs[shstrndx][4]
    sname = lambda off, base=strs: cubin[base + off:cubin.index(b"\0", base + off)].decode()
    symtab = next(s for s in secs if s[1] == 2)
    sym_index = next(j for j in range(symtab[5] // 24)
                     if sname(struct.unpack_from("<I", cubin, symtab[4] + j * 24)[0], secs[symtab[6]][4]) == name)
    info = next(s for s in secs if sname(s[0]) == ".nv.info")
    p, end = info[4], info[4] + info[5]
    while p < end:
        fmt, attr = cubin[p], cubin[p + 1]
        size = struct.unpack_from("<H", cubin, p + 2)[0] if fmt == 4 else (2 if fmt == 3 else 0)
        if fmt == 4 and attr == 0x2F:
            sym, regs = struct.unpack_from("<II", cubin, p + 4)
            if sym == sym_index:
                return regs
        p += 4 + size if fmt == 4 else (4 if fmt == 3 else 2)
    raise AssertionError("no EIATTR_REGCOUNT")


def _msgpack_uint_after(data: bytes, key: bytes) -> int:
    i = data.index(bytes([0xA0 | len(key)]) + key) + 1 + len(key)
    b = data[i]
    if b < 0x80:
        return b
    return {0xCC: lambda: data[i + 1], 0xCD: lambda: struct.unpack_from(">H", data, i + 1)[0]}[b]()


@pytest.mark.parametrize("target", ("sm90", pytest.param("sm100", marks=HEAVY)))
def test_cuda_registers_match_the_cubin(dumps, target):
    d, folder = dumps[target]
    regs = d["summary"]["resources"]["registers"]
    assert _nv_info_regcount(_file(folder, "cubin").read_bytes(), d["summary"]["kernel_name"]) == regs
    assert 16 <= regs <= 255


@pytest.mark.parametrize("target", ("gfx942", "gfx950"))
def test_amd_registers_match_the_metadata(dumps, target):
    d, folder = dumps[target]
    r = d["summary"]["resources"]
    text = _file(folder, "amdgcn").read_text()
    assert int(re.search(r"\.vgpr_count:\s+(\d+)", text).group(1)) == r["vgprs"]
    assert int(re.search(r"\.sgpr_count:\s+(\d+)", text).group(1)) == r["sgprs"]
    hsaco = _file(folder, "hsaco").read_bytes()  # the binary's own metadata note (msgpack)
    assert _msgpack_uint_after(hsaco, b".vgpr_count") == r["vgprs"]
    # The AMD rows' kernel (heads_on_m) at 2 waves per SIMD, with no scratch; on gfx950 its tile loop has no barrier
    # and at most 213 instructions (docs/CODEGEN.md, AMD section).
    assert r["occupancy_waves_per_simd"] >= 2 and r["vgpr_spills"] == 0 and r["scratch_bytes"] == 0
    if target == "gfx950":
        (loop,) = d["summary"]["cost_model"]["loops"]
        assert loop["barriers"] == 0 and loop["instructions"] <= 213


@pytest.mark.parametrize("target", DUMPED)
def test_config_name_in_asm_and_symbol_table(dumps, target):
    d, folder = dumps[target]
    name = d["summary"]["kernel_name"]
    assert re.fullmatch(r"mqa_logits_\w+_H_64_D_128_BLOCK_Q_\d+_BLOCK_KV_\d+\w*_CLEAN_1\w*", name), name
    text_ext, bin_ext = ("ptx", "cubin") if BACKEND[target] == "cuda" else ("amdgcn", "hsaco")
    assert name in _file(folder, text_ext).read_text()
    assert name in elf_symbols(_file(folder, bin_ext).read_bytes())


@HEAVY
def test_two_configs_two_names(env, dump_dir):
    proc = cli("dump", "--seq", "64", "--target", "sm90", "--json", "--diff", "tiled",
               "tiled:BLOCK_KV=128,num_warps=8", env_extra=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    d = json.loads(proc.stdout)
    a, b = d["a"], d["b"]
    assert "_BLOCK_KV_64_" in a["kernel_name"] and "_BLOCK_KV_128_" in b["kernel_name"]
    assert a["kernel_name"] != b["kernel_name"] and a["config"].endswith("_w4_s3") and b["config"].endswith("_w8_s3")
    assert (a["resources"]["warps"], b["resources"]["warps"]) == (4, 8)
    text = cli("dump", "--seq", "64", "--target", "sm90", "--diff", "tiled", "tiled:num_warps=8", env_extra=env)
    assert text.returncode == 0 and "registers / thread" in text.stdout and "Δ" in text.stdout


def test_second_dump_hits_the_cache(dumps, env, dump_dir):
    d, folder = dumps["gfx950"]
    assert d["cache_hit"] is False
    cache = Path(env["TRITON_CACHE_DIR"])
    before = sorted(p.relative_to(cache) for p in cache.rglob("*"))
    proc = dump("--target", "gfx950", "--json", "--force", env=env, dump_dir=dump_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = json.loads(proc.stdout)
    assert again["cache_hit"] is True and again["cache_dir"] == str(cache)
    assert again["summary"]["hash"] == d["summary"]["hash"]
    assert sorted(p.relative_to(cache) for p in cache.rglob("*")) == before  # nothing new compiled
    assert str(cache) in proc.stderr


def test_nonempty_folder_needs_force(dumps, env, dump_dir):
    _, folder = dumps["sm90"]
    stamp = (folder / "manifest.json").stat().st_mtime_ns
    proc = dump("--target", "sm90", env=env, dump_dir=dump_dir)
    assert_one_line_error(proc, contains="--force")
    assert (folder / "manifest.json").stat().st_mtime_ns == stamp
    proc = dump("--target", "sm90", "--force", env=env, dump_dir=dump_dir)
    assert proc.returncode == 0, proc.stderr
    assert "registers / thread" in proc.stdout and "QGMMA" in proc.stdout and "cache hit" in proc.stdout


@pytest.mark.parametrize("target,stage,marker", some_heavy([("sm90", "ptx", ".target sm_90a"), ("sm90", "sass", "QGMMA"),
                                                             ("gfx950", "amdgcn", "v_mfma"), ("gfx942", "ttgir", "#ttg")],
                                                            keep={1}))
def test_stage_to_stdout_only(env, tmp_path, target, stage, marker):
    proc = cli("dump", *PROBLEM, "--target", target, "--stage", stage, "--dump-dir", tmp_path / "d", env_extra=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert marker in proc.stdout and "registers" not in proc.stdout
    assert not (tmp_path / "d").exists()


BAD = [
    (("--target", "sm91"), "unknown target"),
    (("--target", "cpu"), "nothing is compiled"),
    (("--target", "sm90", "--kernel", "nope"), "unknown kernel"),
    (("--target", "sm90", "--kernel", "tiled:NOPE=1"), "unknown config key"),
    (("--target", "gfx950", "--stage", "sass"), "no sass stage"),
    (("--target", "gfx942", "--stage", "sass"), "no sass stage"),
    (("--target", "sm90", "--stage", "amdgcn"), "no amdgcn stage"),
    (("--target", "sm100", "--stage", "cubin"), "unknown stage"),
]


@pytest.fixture(scope="module")
def bad_runs(env, tmp_path_factory):
    """Every bad dump in one child (tests/cli_batch.py), each with its own empty dump folder."""
    root = tmp_path_factory.mktemp("bad")
    folders = {i: root / str(i) for i in range(len(BAD))}
    for f in folders.values():
        f.mkdir()
    got = run_many({i: ["dump", *PROBLEM, "--dump-dir", folders[i], *args] for i, (args, _) in enumerate(BAD)},
                   env_extra=env)
    return got, folders


@pytest.mark.parametrize("i", range(len(BAD)), ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line(bad_runs, i):
    got, folders = bad_runs
    assert_one_line_error(got[i], contains=BAD[i][1])
    assert not any(folders[i].iterdir())


def test_run_dump_asm_without_a_gpu(env, tmp_path):
    """The headline usage line works on a CPU machine: the run goes through the interpreter and the same
    dispatch row is compiled for sm90 (the default target; --target picks another) and summarised."""
    proc = cli("run", "--seq", "16", "--heads", "16", "--dim", "64", "--dump-asm", "--dump-dir", tmp_path,
               env_extra={**env, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "compiled for sm90" in proc.stdout and "QGMMA" in proc.stdout
    folders = list((tmp_path / "sm90").iterdir())
    assert len(folders) == 1 and (folders[0] / "manifest.json").exists()
    assert folders[0].name.startswith("mqa_logits_tiled_H_16_D_64")


@HEAVY
def test_run_dump_asm_for_another_target(env, tmp_path):
    proc = cli("run", "--seq", "16", "--heads", "16", "--dim", "64", "--dump-asm", "--target", "gfx950",
               "--dump-dir", tmp_path, env_extra={**env, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "compiled for gfx950" in proc.stdout and (tmp_path / "gfx950").is_dir()


def test_dump_ignores_an_inherited_interpreter_switch(env, tmp_path):
    proc = cli("dump", *PROBLEM, "--target", "sm100", "--stage", "ttir", env_extra={**env, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "tt.dot" in proc.stdout


@pytest.mark.parametrize("kernel, entry, marks", [
    (None, "paged_mqa_logits_ws_sm90_NEXT_N_2_H_64_D_128_BS_64_NP_2", ("cp.async.bulk.tensor.2d", "wgmma.mma_async",
                                                                       "setmaxnreg")),
    pytest.param("paged", "paged_mqa_logits_NEXT_N_2_H_64_D_128_BS_64", ("cp.async",), marks=HEAVY),
])
def test_paged_kernels_dump_for_sm90(env, tmp_path, kernel, entry, marks):
    """Both paged decode rows cross-compile (meta-device paged tensors), with the config name in the PTX: the
    dispatched Gluon kernel streams cache blocks by TMA into wgmma; the portable one gathers by cp.async."""
    forced = ("--kernel", kernel) if kernel else ()
    r = cli("dump", "--paged", "--batch", "8", "--context-len", "4096", "--next-n", "2", "--target", "sm90",
            *forced, "--stage", "ptx", "--dump-dir", tmp_path, env_extra=env)
    assert r.returncode == 0, r.stderr
    assert f".entry {entry}" in r.stdout
    for mark in marks:
        assert mark in r.stdout, mark


@HEAVY
def test_four_math_warpgroups_have_a_producer_warp_each_cross_compiles(env, tmp_path):
    """The decode table's four math warpgroups (next_n 2 at B 128 C 64K) take LOADERS = 4 producer warps: one TMA
    issue loop per producer warp, none of them spilling."""
    r = cli("dump", "--paged", "--batch", "128", "--context-len", "65536", "--next-n", "2", "--no-clean-logits",
            "--target", "sm90", "--json", "--dump-dir", tmp_path, "--force", env_extra=env)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert "_MATH_WG_4_" in out["summary"]["kernel_name"] and "_LOADERS_4_" in out["summary"]["kernel_name"]
    sass = next(Path(out["dump_dir"]).glob("*.sass")).read_text()
    ins = [(int(a, 16), op) for a, op in re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
    back = [(int(m.group(1), 16), a) for a, op in ins if (m := re.search(r"\bBRA\b.*?0x([0-9a-f]+)", op))
            and int(m.group(1), 16) <= a]
    inner = [(lo, hi) for lo, hi in back if not any(lo <= l2 and h2 <= hi and (l2, h2) != (lo, hi) for l2, h2 in back)]
    issue = [[op for a, op in ins if lo <= a <= hi] for lo, hi in inner]
    issue = [b for b in issue if any("UTMALDG" in op for op in b)]
    assert len(issue) == 4, len(issue)  # each producer warp's own block loop
    assert not [op for b in issue for op in b if "STL" in op or "LDL" in op]


@HEAVY
def test_small_head_counts_store_through_a_tile_pointer(env, tmp_path):
    """H 8 D 128 (the Gluon table's two warpgroups, 16 query rows each): a logit's address is the tile's base
    pointer plus an offset held for the work item, two instructions a store, so the tile loop stays at its
    measured length (251 sm90 instructions; 261 when each address was an int32 sum and its 64-bit extension).
    Each instruction of the loop costs the tensor cores about a cycle."""
    def loops(*kernel):
        r = cli("dump", "--seq", "8192", "--heads", "8", "--dim", "128", "--target", "sm90", "--json",
                *kernel, "--dump-dir", tmp_path / str(len(kernel)), env_extra=env)
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout)["summary"]["tensor_loops"]

    tile, held = loops(), loops("--kernel", "gluon_ws_sm90:TILE_PTR=0")  # the table's config; the A/B's other side
    lengths, before = [lp["instructions"] for lp in tile], [lp["instructions"] for lp in held]
    assert len(tile) == 2 and max(lengths) <= 255, lengths
    assert min(before) >= max(lengths) + 6, (before, lengths)
    # fewer than two LEA a store (the int32-sum form took a LEA pair a store, after its add)
    assert all(lp["mix"].get("LEA", 0) < 2 * lp["mix"].get("STG", 0) for lp in tile), [lp["mix"] for lp in tile]
    assert all(lp["mix"].get("LEA", 0) >= 2 * lp["mix"].get("STG", 0) for lp in held), [lp["mix"] for lp in held]


@HEAVY
@pytest.mark.parametrize("heads,groups", [(8, "2x1"), (128, "1x3")])
def test_prefill_ring_slots_in_ptx_leave_no_warpgroup_barrier_in_the_tile_loop(env, tmp_path, heads, groups):
    """PTX_SLOTS (an override key of the Gluon prefill kernel): each thread waits for its kv tile and releases it by
    PTX at the ring barriers' offsets, which the compile reads from a first build and checks in the second; the
    empty barrier counts every thread of the consuming warpgroups. The tile loops lose triton's 128-thread barriers
    (BAR.SYNC: two a tile on triton 3.6, one on 3.8 and 3.9) and keep their wgmma."""
    q_groups, kv_groups = groups.split("x")
    override = f"gluon_ws_sm90:Q_GROUPS={q_groups},KV_GROUPS={kv_groups}"

    def dumped(extra):
        folder = tmp_path / extra[-1:]
        r = cli("dump", "--seq", "4096", "--heads", str(heads), "--dim", "128", "--target", "sm90", "--json",
                "--kernel", override + extra, "--force", "--dump-dir", folder, env_extra=env)
        assert r.returncode == 0, r.stderr[-3000:]
        d = json.loads(r.stdout)
        return d["summary"], Path(d["dump_dir"])

    (ptx_sum, folder), (own_sum, _) = dumped(",PTX_SLOTS=1"), dumped(",PTX_SLOTS=0")
    warpgroups = int(q_groups) * int(kv_groups)
    assert ptx_sum["kernel_name"].endswith("_PTX_SLOTS_1_PINGPONG_0") and own_sum["kernel_name"].endswith("_PTX_SLOTS_0_PINGPONG_0")
    ptx_loops, own_loops = ptx_sum["tensor_loops"], own_sum["tensor_loops"]
    assert len(ptx_loops) == len(own_loops) == warpgroups
    assert all(lp["mix"].get("BAR", 0) >= 1 for lp in own_loops), [lp["mix"] for lp in own_loops]
    assert all(lp["mix"].get("BAR", 0) == 0 and lp["mix"].get("QGMMA", 0) > 0 for lp in ptx_loops), \
        [lp["mix"] for lp in ptx_loops]
    ptx = _file(folder, "ptx").read_text()
    assert re.search(rf"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], {128 * warpgroups};", ptx)
    assert ptx.count("mbarrier.try_wait.parity.shared::cta.b64 ok, [at]") == warpgroups  # a wait per warpgroup


@pytest.mark.parametrize("kernel", some_heavy(["tiled", "h64d128_sm90"], keep={0}))
def test_row_offsets_are_64_bit_in_the_ir(env, kernel):
    """Offsets past 2^31 elements: the compiled IR forms each block's row base (output rows, q rows, kv rows)
    as an i64 product of the row and its stride, added to the pointer as i64."""
    import re

    r = cli("dump", "--seq", "1024", "--heads", "64", "--dim", "128", "--target", "sm90", "--kernel", kernel,
            "--force", "--stage", "ttir", env_extra=env)
    assert r.returncode == 0, r.stderr[-2000:]
    ir = r.stdout
    for ptr, stride in (("out_ptr", "stride_out_s"), ("q_ptr", "stride_q_s"), ("kv_ptr", "stride_kv_n")):
        wide = re.findall(rf"(%\S+) = arith\.extsi %{stride} : i32 to i64", ir)
        assert wide, f"{stride} is never widened to i64"
        products = [m for w in wide for m in re.findall(rf"(%\S+) = arith\.muli %\S+, {re.escape(w)} : i64", ir)]
        assert products, f"no i64 product with {stride}"
        assert any(re.search(rf"tt\.addptr %{ptr}, {re.escape(p)} : !tt\.ptr<[^>]+>, i64", ir) for p in products), \
            f"{ptr} is not offset by an i64 row base"
