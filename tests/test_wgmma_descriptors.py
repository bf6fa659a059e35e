"""The descriptor pass (mqa_kernels.common.wgmma_descriptors): what it rewrites, that the rewrite keeps every value,
what it leaves alone, that it is scoped to this project's compiles, and that the version fact it runs by matches
the PTX of the installed triton."""
import json
import os
import random
import re
import subprocess
import sys

import pytest

from mqa_kernels.common import versions, wgmma_descriptors as wd

HIGH = 0x4000004000000000  # the high word triton 3.9 ORs in (128-byte swizzle, stride 1024 bytes)

CHAIN = """\
	bfe.u32 	%r10, %r9, 4, 15;
	cvt.u64.u32 	%rd20, %r10;
	or.b64 	%rd21, %rd20, {high};
	add.s32 	%r11, %r10, 2;
	add.s32 	%r12, %r10, 6;
	cvt.u64.u32 	%rd22, %r12;
	or.b64 	%rd23, %rd22, {high};
	cvt.u64.u32 	%rd24, %r11;
	or.b64 	%rd25, %rd24, {high};
"""
OUTS = ("%rd21", "%rd25", "%rd23")  # the descriptors of k-steps 0, 1, 3


def run(ptx: str, r9: int) -> dict:
    """The chain's registers after it runs with %r9 = r9: the few PTX instructions it is made of, evaluated."""
    regs = {"%r9": r9}
    val = lambda x: regs[x] if x.startswith("%") else int(x)  # noqa: E731
    for line in ptx.splitlines():
        m = re.match(r"\s*([a-z.0-9]+)\s+(%rd?\d+),\s*(.*);", line)
        op, dst, args = m.group(1), m.group(2), [a.strip() for a in m.group(3).split(",")]
        a = [val(x) for x in args]
        if op == "bfe.u32":
            regs[dst] = (a[0] >> a[1]) & ((1 << a[2]) - 1)
        elif op == "add.s32":
            regs[dst] = (a[0] + a[1]) & 0xFFFFFFFF
        elif op == "cvt.u64.u32":
            regs[dst] = a[0] & 0xFFFFFFFF
        elif op == "or.b64":
            regs[dst] = a[0] | a[1]
        elif op == "add.s64":
            regs[dst] = (a[0] + a[1]) & (2 ** 64 - 1)
        else:
            raise AssertionError(op)
    return regs


def test_the_chain_becomes_64_bit_adds_from_its_base_with_the_same_values():
    ptx = CHAIN.format(high=HIGH)
    out, n = wd.rewrite(ptx)
    assert n == 2, out
    assert f"add.s64 \t%rd23, %rd22, {HIGH + 6};" in out and f"add.s64 \t%rd25, %rd24, {HIGH + 2};" in out
    assert "cvt.u64.u32 \t%rd22, %r10;" in out and f"or.b64 \t%rd21, %rd20, {HIGH};" in out  # k 0 kept
    g = random.Random(0)
    for r9 in [0, 2 ** 32 - 1, 0x3FFF0] + [g.randrange(2 ** 32) for _ in range(200)]:
        before, after = run(ptx, r9), run(out, r9)
        assert [before[r] for r in OUTS] == [after[r] for r in OUTS], hex(r9)
    assert wd.rewrite(out) == (out, 0)  # nothing left to rewrite


@pytest.mark.parametrize("old,new,left", [
    ("bfe.u32 \t%r10, %r9, 4, 15;", "bfe.u32 \t%r10, %r9, 4, 30;", ("%rd23", "%rd25")),  # a base that may carry
    ("bfe.u32 \t%r10, %r9, 4, 15;", "and.b32 \t%r10, %r9, 65535;", ("%rd23", "%rd25")),  # a base not a bit field
    (f"or.b64 \t%rd23, %rd22, {HIGH};", f"or.b64 \t%rd23, %rd22, {HIGH + 1};", ("%rd23",)),  # a low word in the constant
    ("add.s32 \t%r12, %r10, 6;", "add.s32 \t%r12, %r10, 9000;", ("%rd23",)),  # an offset past the field's reach
    ("\tcvt.u64.u32 \t%rd24, %r11;\n", "\tcvt.u64.u32 \t%rd24, %r11;\n\tmov.b64 \t%rd30, %rd24;\n", ("%rd25",)),  # read twice
    ("\tadd.s32 \t%r12, %r10, 6;\n", "\tadd.s32 \t%r12, %r10, 6;\n\tadd.s32 \t%r12, %r12, 1;\n", ("%rd23",)),  # written twice
    ("\tadd.s32 \t%r12, %r10, 6;\n", "\tadd.s32 \t%r12, %r10, 6;\n\tmov.b64 \t{%r12, %r13}, %rd9;\n", ("%rd23",)),  # in a list
])
def test_what_is_not_the_chain_is_left_as_it_is(old, new, left):
    ptx = CHAIN.format(high=HIGH)
    assert old in ptx
    out, n = wd.rewrite(ptx.replace(old, new))
    rewritten = {m.group(1) for m in re.finditer(r"add\.s64 \t(%rd\d+)", out)}
    assert rewritten == {"%rd23", "%rd25"} - set(left) and n == 2 - len(left), out


def test_scoped_installs_the_hook_only_inside_and_keeps_another_tools_hook():
    pytest.importorskip("triton")
    from triton import knobs

    calls = []

    def theirs(*args):
        calls.append(len(args))
        if not args:
            return "theirs", "h"
        args[1]["marker"] = True

    saved = knobs.runtime.add_stages_inspection_hook
    knobs.runtime.add_stages_inspection_hook = theirs
    try:
        with wd.scoped("paged_mqa_logits_ws_sm90", enabled=True) as hook:
            assert knobs.runtime.add_stages_inspection_hook is hook
            key, digest = hook()
            assert key.startswith("theirs") and "mqa_wgmma_descriptors" in key and digest != "h"
            ptx = CHAIN.format(high=HIGH)
            stages = {"ptx": lambda src, md: ptx}
            hook(None, stages, None, None, 90)
            assert stages["marker"] and calls == [0, 5]
            assert stages["ptx"](None, {"name": "paged_mqa_logits_ws_sm90_NEXT_N_1"}) != ptx and hook.rewritten == 2
            assert stages["ptx"](None, {"name": "someone_elses_kernel"}) == ptx  # only the kernel named
        assert knobs.runtime.add_stages_inspection_hook is theirs
        with wd.scoped("x", enabled=False) as none:
            assert none is None and knobs.runtime.add_stages_inspection_hook is theirs
    finally:
        knobs.runtime.add_stages_inspection_hook = saved


PROBE = """
import json
from unittest import mock
from mqa_cli.inspect import asm, codegen
from mqa_kernels.common import wgmma_descriptors as wd

case = next(c for c in codegen.cases() if c.label == "paged_ws_sm90 H64 D128 next_n 1 small")
with mock.patch.object(wd, "active", lambda version=None: False):
    raw = codegen._compile(case)
built = codegen._compile(case)
loop = lambda art: asm.summarize(art)["tensor_loops"][0]["instructions"]
print(json.dumps({"raw": wd.rewrite(raw.stages["ptx"])[1], "built": wd.rewrite(built.stages["ptx"])[1],
                  "loop_raw": loop(raw), "loop_built": loop(built)}))
"""


@pytest.mark.versions
@pytest.mark.skipif(not versions.holds("gluon_hopper"), reason="no Gluon on this triton")
def test_the_fact_matches_this_triton_s_ptx_and_the_pass_shortens_the_loop():
    """Compiled for sm90 without the pass, decode next_n 1's PTX has descriptors in 32-bit pieces exactly where fact
    descriptors_32bit holds; with it (where it holds) none are left and the tensor-core loop is shorter."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # (a compiling process)
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert (out["raw"] > 0) == versions.holds("descriptors_32bit"), out
    if versions.holds("descriptors_32bit"):
        assert out["built"] == 0 and out["loop_built"] < out["loop_raw"], out
    else:
        assert out["loop_built"] == out["loop_raw"], out


@pytest.mark.parametrize("next_n,on", [(1, True), (2, True), (3, True), (4, True), (5, False), (6, False), (7, False),
                                        (8, False)])
def test_the_decode_config_turns_the_pass_off_for_a_block_in_4_or_more_parts(next_n, on):
    """Where a cache block runs in 4 or more parts the pass would hold every part's q descriptors in registers (3.9:
    next_n 5 small given 0 -> 197 spill instructions, next_n 8 small given 0 -> 172); the config says so, and
    `choice` reads it for every size class."""
    from mqa_kernels.decode.paged_ws_sm90.config import paged_ws_sm90_config

    for batch, ctx in ((1, 8192), (64, 65536)):
        # next_n 5-8 in parts of MMA_N 64 (3.8 / 3.9's tables; 3.6's tuned.py takes 128, where the pass never runs)
        cfg = paged_ws_sm90_config(heads=64, dim=128, next_n=next_n, block_size=64, batch=batch, max_context_len=ctx,
                                   clean=False, units=132, override={"MMA_N": 64} if next_n >= 5 else None)
        assert cfg.schedule["descriptor_pass"] is on, (next_n, batch, cfg.name)
        assert wd.choice(cfg) is (None if on else False)


def test_explain_says_what_the_pass_does_on_each_release():
    """`explain` prints what the pass does for the chosen build on the installed triton: nothing where the fact does
    not hold (the config's key only allows it), off where the config turns it off, on otherwise."""
    from mqa_kernels.decode.paged_ws_sm90.config import paged_ws_sm90_config

    def cfg(next_n):
        return paged_ws_sm90_config(heads=64, dim=128, next_n=next_n, block_size=64, batch=1, max_context_len=8192,
                                    clean=False, units=132, override={"MMA_N": 64} if next_n >= 5 else None)

    two, six = cfg(2), cfg(6)
    assert wd.state(two, "3.9.0").startswith("on:") and wd.state(six, "3.9.0").startswith("off ")
    for v in ("3.6.0", "3.8.0"):
        assert wd.state(two, v).startswith("not needed") and wd.state(six, v).startswith("not needed")
