"""vLLM's plug-in as vLLM loads it, from the installed metadata of the Python that runs this (the wheel in a fresh
venv in CI, the editable install under pytest): every entry point of the group `vllm.general_plugins` loaded and
called, as vllm.plugins.load_general_plugins does, in a spawned process, with MQA_LOGITS_AS_DEEP_GEMM=1 and without.

- set: `import deep_gemm` gets the stand-in, one log line names what it serves, a second load changes nothing, and
  vLLM 0.34's calls through it match a float64 reference in fp32 and bf16 (the prefill with `logits_dtype=` on row
  slices of row slices and with the dtype by position; the paged call with `logits_dtype=` and the dtype eighth);
- unset: deep_gemm is not replaced (the stand-in is not even imported) and nothing is printed, at any log level.

python .ci/plugin_check.py: prints "PLUGIN OK", or exits 1 with the reason. Run it from outside the source tree
(CI does) so that what it loads is what is installed.
"""
import os
import subprocess
import sys
import tempfile

ENV = "MQA_LOGITS_AS_DEEP_GEMM"

# vLLM's loader: each entry point of the group loaded, then called; here twice, as a second loader would
LOADER = '''
import logging
import sys
logging.basicConfig(level=logging.DEBUG, stream=sys.stdout, format="LOG %(levelname)s %(name)s: %(message)s")
from importlib.metadata import entry_points
plugins = {ep.name: ep.load() for ep in entry_points(group="vllm.general_plugins")}
assert "mqa_logits" in plugins, f"no mqa_logits among the installed vllm.general_plugins: {sorted(plugins)}"
for _ in range(2):
    for func in plugins.values():
        func()
'''

UNSET = LOADER + '''
assert "mqa_cli.deep_gemm" not in sys.modules and "deep_gemm" not in sys.modules, sorted(sys.modules)
try:
    import deep_gemm
except ModuleNotFoundError:
    pass
else:
    assert deep_gemm.__name__ != "mqa_cli.deep_gemm", "deep_gemm replaced without the variable"
print("UNSET OK")
'''

SET = LOADER + '''
import deep_gemm
import mqa_cli
import mqa_cli.deep_gemm as standin
import torch
from mqa_cli.launch import interpreter

assert deep_gemm is standin and deep_gemm.fp8_fp4_mqa_logits is mqa_cli.fp8_fp4_mqa_logits, deep_gemm
interpreter.enable_if_no_gpu(note=False)
dev = "cuda" if torch.cuda.is_available() else "cpu"
g = torch.Generator().manual_seed(0)
TOL = {torch.float32: 1e-3, torch.bfloat16: 1e-2}


def fp8(*shape):
    return (torch.randn(*shape, generator=g) * 0.5).to(torch.float8_e4m3fn)


def check(out, ref, dtype, what):
    """out's columns [0, n) of each row, n the live entries of ref's row (NaN past them), against ref."""
    assert out.dtype == dtype and out.stride(0) * out.element_size() % 16 == 0, (what, out.dtype, out.stride())
    live = ~torch.isnan(ref)
    got = out.double().cpu()[:, :ref.shape[1]][live]
    err = ((got - ref[live]).abs().max() / ref[live].abs().max()).item()
    assert err < TOL[dtype], f"{what} {dtype}: relative error {err:.2e}"


# prefill: rows of a chunk split again against one kv, max_seqlen_k the chunk's; read as columns [0, ke - ks)
S, N, H, D = 24, 64, 16, 64
q, kv, w = fp8(S, H, D), fp8(N, D), torch.randn(S, H, generator=g)
sc = torch.rand(N, generator=g) + 0.5
ks = torch.randint(0, N // 2, (S,), generator=g, dtype=torch.int32)
ke = torch.clamp(ks + torch.randint(0, N // 2, (S,), generator=g, dtype=torch.int32), max=N)
full = (torch.einsum("shd,nd->shn", q.double(), kv.double()).clamp_min(0) * w.double()[:, :, None]).sum(1)
full = full * sc.double()[None, :]
c0, c1, a, b = 2, 21, 5, 16  # chunk rows [c0, c1), its sub-split [a, b)
width = int((ke[c0:c1] - ks[c0:c1]).max())
ref = torch.full((b - a, width), float("nan"), dtype=torch.float64)
for i in range(b - a):
    r = c0 + a + i
    ref[i, :int(ke[r] - ks[r])] = full[r, int(ks[r]):int(ke[r])]
qd, kvd, scd, wd, ksd, ked = (x.to(dev) for x in (q, kv, sc, w, ks, ke))
args = ((qd[c0:c1][a:b], None), (kvd, scd), wd[c0:c1][a:b], ksd[c0:c1][a:b], ked[c0:c1][a:b], width)
for dtype in TOL:
    check(deep_gemm.fp8_fp4_mqa_logits(*args, logits_dtype=dtype), ref, dtype, "prefill logits_dtype=")
    check(deep_gemm.fp8_fp4_mqa_logits(*args, dtype, None), ref, dtype, "prefill, dtype seventh")

# paged decode: 2-D context lengths (a padding row of zeros), DeepGEMM's cache layout, a shuffled block table
B, T, bs, blocks = 3, 2, 64, 3
ctx = torch.tensor([[70, 71], [0, 0], [129, 130]], dtype=torch.int32)
nb = B * blocks + 2
kvb, scb = fp8(nb, bs, D), torch.rand(nb, bs, generator=g) + 0.5
cache = torch.cat([kvb.view(torch.uint8).reshape(nb, bs * D), scb.view(torch.uint8).reshape(nb, bs * 4)], 1)
cache = cache.view(nb, bs, 1, D + 4)
table = torch.randperm(nb, generator=g)[:B * blocks].reshape(B, blocks).to(torch.int32)
qp, wp = fp8(B, T, H, D), torch.randn(B * T, H, generator=g)
max_len = blocks * bs
ref = torch.full((B * T, max_len), float("nan"), dtype=torch.float64)
for s in range(B):
    toks, scales = kvb[table[s].long()].reshape(-1, D).double(), scb[table[s].long()].reshape(-1).double()
    for t in range(T):
        n = int(ctx[s, t])
        logits = torch.einsum("hd,nd->hn", qp[s, t].double(), toks[:n]).clamp_min(0) * wp[s * T + t].double()[:, None]
        ref[s * T + t, :n] = logits.sum(0) * scales[:n]
ctxd, tabled = ctx.to(dev), table.to(dev)
meta = deep_gemm.get_paged_mqa_logits_metadata(ctxd, bs, deep_gemm.get_num_sms())
head = ((qp.to(dev), None), cache.to(dev), wp.to(dev), ctxd, tabled, meta, max_len)
for dtype in TOL:
    check(deep_gemm.fp8_fp4_paged_mqa_logits(*head, logits_dtype=dtype), ref, dtype, "paged logits_dtype=")
    check(deep_gemm.fp8_fp4_paged_mqa_logits(*head, dtype), ref, dtype, "paged, dtype eighth")
print("SET OK", mqa_cli.__file__)
'''


def spawn(code: str, value: str | None, cwd: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if value is not None:
        env[ENV] = value
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd, timeout=900)


def fail(why: str, proc: subprocess.CompletedProcess) -> None:
    sys.exit(f"plug-in check: {why}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}")


def main() -> None:
    cwd = tempfile.mkdtemp(prefix="mqa-plugin-")  # no source tree in the children's working directory
    unset = spawn(UNSET, None, cwd)
    if unset.returncode != 0 or unset.stdout != "UNSET OK\n" or unset.stderr:
        fail("without the variable the plug-in must change nothing and print nothing", unset)
    on = spawn(SET, "1", cwd)
    if on.returncode != 0 or "SET OK" not in on.stdout:
        fail("with the variable set, deep_gemm must be the stand-in and vLLM 0.34's calls right", on)
    lines = [ln for ln in on.stdout.splitlines() if ln.startswith("LOG INFO vllm.plugins.mqa_logits:")]
    if len(lines) != 1 or "fp8_fp4_paged_mqa_logits" not in lines[0] or "every other name" not in lines[0]:
        fail(f"one log line naming what it serves and forwards expected, got {len(lines)}", on)
    print(lines[0])
    print(on.stdout.splitlines()[-1])
    print("PLUGIN OK")


if __name__ == "__main__":
    main()
