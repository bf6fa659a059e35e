"""Cross-compile the Gluon Hopper kernels for sm90 on the CPU (no GPU), through the same path as
`mqa-logits dump` (dispatch plan -> LaunchArgs on meta tensors -> GluonASTSource), and check the
machine code: fp8 wgmma, no spills, the pipeline not serialised, register reallocation honoured.

Compiles run in a subprocess without TRITON_INTERPRET: the suite runs the interpreter, and a process
that imported triton in interpreter mode cannot compile.
"""
import json
import os
import subprocess
import sys
import textwrap

from importlib.metadata import version

import pytest

# The Gluon kernels are written against triton 3.6's Gluon API (their dispatch rows require it).
pytestmark = pytest.mark.skipif(not version("triton").startswith("3.6."), reason="Gluon kernels target triton 3.6")

SCRIPT = textwrap.dedent(r'''
    import json, os, re, subprocess, sys, tempfile
    from mqa_cli import compile as comp, dispatch, targets
    from mqa_cli.dispatch import Shape

    kernel = sys.argv[1]
    comp.prepare()
    import triton
    bin_dir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    results = []
    for heads, clean in ((64, True), (32, False)):
        shape = Shape("prefill", 4096, 4096, heads, 128, clean)
        plan = dispatch.plan(shape, targets.get_target("sm90"), kernel=kernel, force=True)
        art = comp.compile_plan(plan)
        sass, ptx = art.stages["sass"], art.stages["ptx"]
        with tempfile.TemporaryDirectory() as d:
            cubin, ptx_path = os.path.join(d, "k.cubin"), os.path.join(d, "k.ptx")
            open(cubin, "wb").write(art.stages["cubin"])
            open(ptx_path, "w").write(ptx)
            usage = subprocess.run([os.path.join(bin_dir, "cuobjdump"), "--dump-resource-usage", cubin],
                                   capture_output=True, text=True, check=True).stdout
            # ptxas warnings (C7514: wgmma serialised; C7508: setmaxnreg ignored) come in verbose mode.
            warn = subprocess.run([os.path.join(bin_dir, "ptxas"), "-arch=sm_90a", "-v", ptx_path, "-o", os.devnull],
                                  capture_output=True, text=True).stderr
        m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", usage)
        results.append({
            "heads": heads, "name": art.name, "expected_name": plan.config.name, "ptx_has_name": plan.config.name in ptx,
            "qgmma_e4m3": len(re.findall(r"QGMMA\.\S*E4M3\.E4M3", sass)),
            "ldl_stl": len(re.findall(r"\b(LDL|STL)\b", sass)),
            "regs": int(m.group(1)), "stack": int(m.group(2)), "local": int(m.group(4)),
            "shared": art.metadata["shared"], "depbar": sass.count("WARPGROUP.DEPBAR"),
            "setmaxnreg": sorted(set(int(v) for v in re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)", ptx))),
            "usetmaxreg": sass.count("USETMAXREG"),
            "c7514": "C7514" in warn, "c7508": "C7508" in warn, "ptxas_warnings": warn[-2000:],
        })
    print("RESULT" + json.dumps(results))
''')


def _compile(kernel: str) -> list:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, kernel], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))
    return json.loads(line[len("RESULT"):])


@pytest.fixture(scope="module")
def two_acc():
    return _compile("gluon_sm90")


@pytest.fixture(scope="module")
def ws():
    return _compile("gluon_ws_sm90")


@pytest.mark.parametrize("which", ["two_acc", "ws"])
def test_named_after_config_and_free_of_spills(which, request):
    for r in request.getfixturevalue(which):
        assert r["name"] == r["expected_name"] and r["ptx_has_name"], r
        assert r["ldl_stl"] == 0 and r["stack"] == 0 and r["local"] == 0, r
        assert r["regs"] <= 255 and not r["c7514"], r["ptxas_warnings"]


def test_two_accumulator_kernel(two_acc):
    for r in two_acc:
        assert r["qgmma_e4m3"] >= 4, r  # m64n128k32 x 4 k-steps (D = 128)
        # Serialised pipelines put a DEPBAR after each k-step of every MMA (dozens); one per wait is a handful.
        assert r["depbar"] <= 8, r
        assert r["shared"] <= 112 * 1024, r  # two programs per SM


def test_warp_specialised_kernel(ws):
    for r in ws:
        assert r["qgmma_e4m3"] >= 8, r  # 4 k-steps in each of the two math warpgroups
        assert r["depbar"] <= 4, r  # one wait per math warpgroup
        assert not r["c7508"] and r["usetmaxreg"] > 0, r["ptxas_warnings"]  # setmaxnreg honoured
        assert max(r["setmaxnreg"]) >= 240 and min(r["setmaxnreg"]) <= 24, r
        assert r["shared"] <= 227 * 1024, r
