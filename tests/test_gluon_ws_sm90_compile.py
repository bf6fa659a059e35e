"""Cross-compile the warp-specialised Gluon Hopper kernel for sm90 on the CPU (no GPU) and inspect what comes out.

The compile runs in a subprocess without TRITON_INTERPRET: the test suite runs the interpreter,
and a process that imported triton in interpreter mode cannot compile.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

triton = pytest.importorskip("triton")

SCRIPT = textwrap.dedent(r'''
    import json, os, re, subprocess, sys, tempfile
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon._runtime import GluonASTSource
    from mqa_kernels import prefill_gluon_ws_sm90 as mod
    from mqa_kernels.config_gluon_ws_sm90 import gluon_ws_sm90_config

    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    results = []
    for heads, clean in ((64, True), (32, False)):
        cfg = gluon_ws_sm90_config(heads=heads, dim=128, S=4096, N=4096, clean=clean, units=132)
        c = cfg.constexprs
        bqh = c["BLOCK_Q"] * heads
        ql = gl.NVMMASharedLayout.get_default_for([bqh, c["D"]], gl.float8e4nv)
        kl = gl.NVMMASharedLayout.get_default_for([c["BLOCK_KV"], c["D"]], gl.float8e4nv)
        sig = {"q_desc": f"tensordesc<fp8e4nv[{bqh}, {c['D']}],{ql!r}>",
               "kv_desc": f"tensordesc<fp8e4nv[{c['BLOCK_KV']}, {c['D']}],{kl!r}>",
               "kv_scale_ptr": "*fp32", "w_ptr": "*fp32", "ks_ptr": "*i32", "ke_ptr": "*i32", "out_ptr": "*fp32",
               "S": "i32", "N": "i32", "stride_w_s": "i32", "stride_out_s": "i32", "n_items": "i32"}
        sig.update({k: "constexpr" for k in mod.CONFIG_KEYS})
        src = GluonASTSource(mod.mqa_logits_gluon_ws_sm90, sig, dict(c))
        # ptxas warnings (C7514: wgmma serialised; C7508: setmaxnreg ignored) go to stderr in verbose mode.
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(cfg.options))
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(k.asm["cubin"])
            path = f.name
        sass = subprocess.run([cuobjdump, "--dump-sass", path], capture_output=True, text=True, check=True).stdout
        usage = subprocess.run([cuobjdump, "--dump-resource-usage", path], capture_output=True, text=True,
                               check=True).stdout
        ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
        with tempfile.NamedTemporaryFile(suffix=".ptx", delete=False, mode="w") as f:
            f.write(k.asm["ptx"])
            ptx_path = f.name
        warn = subprocess.run([ptxas, "-arch=sm_90a", "-v", ptx_path, "-o", os.devnull],
                              capture_output=True, text=True).stderr
        os.unlink(path)
        os.unlink(ptx_path)
        m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", usage)
        results.append({
            "name": k.metadata.name, "expected_name": cfg.name,
            "ptx_has_name": cfg.name in k.asm["ptx"],
            "qgmma_e4m3": len(re.findall(r"QGMMA\.\S*E4M3\.E4M3", sass)),
            "ldl_stl": len(re.findall(r"\b(LDL|STL)\b", sass)),
            "regs": int(m.group(1)), "stack": int(m.group(2)), "local": int(m.group(4)),
            "shared": k.metadata.shared,
            "depbar": sass.count("WARPGROUP.DEPBAR"),
            "setmaxnreg": sorted(set(int(v) for v in re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)",
                                                                  k.asm["ptx"]))),
            "usetmaxreg": sass.count("USETMAXREG"),
            "c7514": "C7514" in warn, "c7508": "C7508" in warn, "ptxas_warnings": warn[-2000:],
        })
    print("RESULT" + json.dumps(results))
''')


@pytest.fixture(scope="module")
def compiled():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT"):])


def test_compiles_with_config_name(compiled):
    for r in compiled:
        assert r["name"] == r["expected_name"]
        assert r["ptx_has_name"], r


def test_qgmma_e4m3_in_both_math_warpgroups(compiled):
    # m64n256k32 x 4 k-steps (D = 128) per math warpgroup, two warpgroups
    for r in compiled:
        assert r["qgmma_e4m3"] >= 8, r


def test_no_spills(compiled):
    for r in compiled:
        assert r["ldl_stl"] == 0 and r["stack"] == 0 and r["local"] == 0, r


def test_wgmma_not_serialised(compiled):
    # One wait per math warpgroup; a serialised pipeline (C7514) puts a DEPBAR after every k-step.
    for r in compiled:
        assert not r["c7514"], r["ptxas_warnings"]
        assert r["depbar"] <= 4, r


def test_register_reallocation(compiled):
    # setmaxnreg is honoured (no C7508) and the math warpgroups get the big share.
    for r in compiled:
        assert not r["c7508"], r["ptxas_warnings"]
        assert r["usetmaxreg"] > 0, r
        assert max(r["setmaxnreg"]) >= 240 and min(r["setmaxnreg"]) <= 24, r


def test_shared_memory_fits_one_program(compiled):
    for r in compiled:
        assert r["shared"] <= 227 * 1024, r
