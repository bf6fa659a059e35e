"""vLLM's plug-in as vLLM loads it: the real vLLM (0.34.0, installed with --no-deps beside this library; CI, .ci/run)
calls `vllm.plugins.load_general_plugins()`, which loads every entry point of `vllm.general_plugins` from the
installed metadata, in a spawned process, with MQA_LOGITS_AS_DEEP_GEMM=1 and without.

What a CPU cannot give is simulated, and only that: the card (vLLM's platform, a CUDA GPU of a given compute
capability: the real query needs NVML) and, where asked, vLLM's bundled DeepGEMM (`vllm.third_party.deep_gemm`, the
real one needs libcuda: a module that loads, whose GEMM answers and whose MQA-logits names fail the check if called).

- unset (MQA_LOGITS_NATIVE_NEXT_N=1 alone): deep_gemm is not replaced (the stand-in is not even imported) and the
  plug-in prints nothing;
- set, with MQA_LOGITS_NATIVE_NEXT_N=1, on a simulated sm90 whose bundled DeepGEMM loads: one log line in vLLM's
  log; vLLM's deep_gemm is the stand-in; vLLM's gate takes next_n 1-8, in the DSA indexer too (imported before the
  plug-ins loaded), whose `_use_flattening` then runs next_n 3 and 6 natively; the schedule has a range per SM at
  next_n 4; vLLM's wrappers (vllm.utils.deep_gemm), called as its indexer calls them, match the float64 reference
  (tests/reference64.py) in fp32 and bf16, the paged logits at next_n 3 and 6 with q [B, next_n, H, D]; the GEMMs
  and set_num_sms reach the bundled copy, its logits never.

python .ci/plugin_check.py: prints "PLUGIN OK", or exits 1 with the reason. Run it from outside the source tree
(CI does) so that what it loads is what is installed. tests/test_vllm_plugin.py runs it, and the cases it leaves out
(sm100, a bundled copy that cannot load, another vLLM release, the variable at other values), with the same parts.
"""
import json
import os
import subprocess
import sys
import tempfile

ENV, NATIVE_ENV = "MQA_LOGITS_AS_DEEP_GEMM", "MQA_LOGITS_NATIVE_NEXT_N"
TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")

SIMULATED_CARD = '''
import vllm.platforms
from vllm.platforms import interface


class SimulatedGPU(interface.Platform):
    """vLLM's platform as on a CUDA GPU of compute capability CARD (vLLM reads it through NVML)."""
    _enum = interface.PlatformEnum.CUDA
    device_name = device_type = "cuda"

    @classmethod
    def get_device_capability(cls, device_id=0):
        return interface.DeviceCapability(CARD // 10, CARD % 10)

    @classmethod
    def support_deep_gemm(cls):  # vLLM's CUDA platform: Hopper (9.0) and the Blackwell families
        return cls.is_device_capability(90) or CARD // 10 in (10, 12)


vllm.platforms.current_platform = SimulatedGPU()
'''

BUNDLED_SOURCE = '''
calls = []


def fp8_gemm_nt(*args):
    return "the bundled GEMM"


def set_num_sms(n):
    calls.append(n)


def refuse(*args, **kwargs):
    raise AssertionError("the bundled DeepGEMM's MQA logits were called")


fp8_fp4_mqa_logits = fp8_fp4_paged_mqa_logits = get_paged_mqa_logits_metadata = get_num_sms = refuse
'''

SIMULATED_BUNDLED = '''
import importlib.util, pathlib, tempfile
import vllm.third_party
_src = pathlib.Path(tempfile.mkdtemp()) / "deep_gemm.py"
_src.write_text(BUNDLED_SOURCE)
_spec = importlib.util.spec_from_file_location("vllm.third_party.deep_gemm", _src)
bundled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bundled)
sys.modules[_spec.name] = vllm.third_party.deep_gemm = bundled
'''

# vLLM's log configuration (each vLLM process sets it up before it loads plug-ins), then vLLM's loader; then a
# second loader in the same process (the plug-in acts and speaks once)
LOAD = '''
from vllm.config.logging import LoggingConfig
from vllm.logger import configure_logging
configure_logging(LoggingConfig())
import vllm.plugins
vllm.plugins.load_general_plugins()
vllm.plugins.plugins_loaded = False
vllm.plugins.load_general_plugins()
'''

# what vLLM decides from DeepGEMM's presence and the card, as one JSON line
ANSWERS = '''
import vllm.utils.deep_gemm as vdg
from vllm.utils.import_utils import has_deep_gemm
_slots = getattr(vdg, "_paged_mqa_logits_schedule_slots", None)
_dg = vdg._import_deep_gemm()
print("ANSWERS " + json.dumps({
    "has_deep_gemm": has_deep_gemm(), "is_deep_gemm_supported": vdg.is_deep_gemm_supported(),
    "native next_n": [n for n in range(1, 9) if vdg.native_next_n_supported(n)],
    "schedule slots of 132 SMs at next_n 4": _slots(132, 4) if _slots else None,
    "vLLM's deep_gemm": getattr(_dg, "__name__", None)}))
'''

UNSET = '''
assert "mqa_cli.deep_gemm" not in sys.modules and "deep_gemm" not in sys.modules, sorted(sys.modules)
print("UNSET OK")
'''

# without a GPU the kernels run through the Triton interpreter, switched on before any kernel module is imported;
# then the DSA indexer, which imports native_next_n_supported by value, imported before the plug-ins load
INDEXER_FIRST = '''
from mqa_cli.launch import interpreter
interpreter.enable_if_no_gpu(note=False)
from types import SimpleNamespace
import vllm.v1.attention.backends.mla.indexer as indexer


def flattened(next_n):
    """vLLM's choice for a speculative decode of next_n rows per request (no adaptive verification)."""
    return indexer._use_flattening(SimpleNamespace(
        num_speculative_tokens=next_n - 1, speculative_config=SimpleNamespace(enable_adaptive_verification=False)))


before = {n: flattened(n) for n in (3, 6)}
'''

SET = '''
import torch
import mqa_cli
import mqa_cli.deep_gemm as standin
sys.path.insert(0, TESTS)
import reference64 as r64

assert sys.modules["deep_gemm"] is standin, sys.modules.get("deep_gemm")
assert before == {3: True, 6: True}, f"vLLM flattened {before} before the plug-in: not sm90's gate"
assert {n: flattened(n) for n in (3, 6)} == {3: False, 6: False}, "next_n 3 and 6 still flattened"
assert indexer.native_next_n_supported(3) and not indexer.native_next_n_supported(9)
dev = "cuda" if torch.cuda.is_available() else "cpu"
g = r64.gen(0)
H, D, BS, SMS = 16, 64, 64, 4

# prefill as vLLM 0.34's indexer calls it: rows of a chunk, its longest window, logits_dtype= always
S, N = 24, 150
q, (kv, sc), w = r64.fp8_q((S, H, D), g), r64.fp8_rows(N, D, g), torch.randn(S, H, generator=g)
ks = torch.randint(0, N // 2, (S,), generator=g, dtype=torch.int32)
ke = torch.clamp(ks + torch.randint(0, N // 2, (S,), generator=g, dtype=torch.int32), max=N)
full, mag = r64.prefill64(q, kv, sc, w, ks, ke)
a, b = 3, 19
width = int((ke[a:b] - ks[a:b]).max())
ref, rmag = r64.compress64(full[a:b], mag[a:b], ks[a:b], ke[a:b], width)
qd, kvd, scd, wd, ksd, ked = (x.to(dev) for x in (q, kv, sc, w, ks, ke))
for dt in (torch.float32, torch.bfloat16):
    out = vdg.fp8_fp4_mqa_logits((qd[a:b], None), (kvd, scd), wd[a:b], ksd[a:b], ked[a:b], width, logits_dtype=dt)
    r64.assert_logits(out[:, :width], ref, rmag, clean=False, dtype=dt, what=f"prefill {dt}: ")

# decode as vLLM 0.34's indexer calls it natively: ctx [B, next_n] from the sequence lengths (0 on a padding row),
# q [B, next_n, H, D], the metadata copied into a slice of its (num_sms + 1, 2) buffer
for next_n, dt in ((3, torch.float32), (6, torch.bfloat16)):
    seq = torch.tensor([70, 0, 130, 9], dtype=torch.int32)
    B, blocks = seq.numel(), 3
    ctx = (seq[:, None] - next_n + 1 + torch.arange(next_n, dtype=torch.int32)[None, :]).clamp_(min=0)
    nb = B * blocks + 2
    rows, scales = r64.fp8_rows(nb * BS, D, g)
    cache = r64.pack_blocks(rows.view(nb, BS, D), scales.view(nb, BS)).view(nb, BS, 1, D + 4)
    table = torch.randperm(nb, generator=g)[:B * blocks].view(B, blocks).to(torch.int32)
    qp, wp = r64.fp8_q((B * next_n, H, D), g), torch.randn(B * next_n, H, generator=g)
    max_len = blocks * BS
    ref, rmag = r64.paged64(qp.view(B, next_n, H, D), rows.view(nb, BS, D), scales.view(nb, BS), wp,
                            r64.paged_ends(ctx, next_n), table, max_len)
    ctxd = ctx.to(dev)
    meta = vdg.get_paged_mqa_logits_metadata(ctxd, BS, SMS)
    assert tuple(meta.shape) == (SMS + 1, 2), f"next_n {next_n}: schedule {tuple(meta.shape)}"
    buffer = torch.zeros(SMS + 1, 2, dtype=torch.int32, device=dev)
    sched = buffer[:meta.shape[0]]
    sched[:] = meta
    out = vdg.fp8_fp4_paged_mqa_logits((qp.to(dev).view(B, next_n, H, D), None), cache.to(dev), wp.to(dev), ctxd,
                                       table.to(dev), sched, max_model_len=max_len, logits_dtype=dt)
    r64.assert_logits(out, ref, rmag, clean=False, dtype=dt, what=f"paged next_n {next_n} {dt}: ")

# every other name goes to the bundled copy, set_num_sms to both
assert sys.modules["deep_gemm"].fp8_gemm_nt() == "the bundled GEMM"
vdg.set_num_sms(3)
assert vdg.get_num_sms() == 3 and bundled.calls == [3], bundled.calls
vdg.set_num_sms(0)
print("SET OK", mqa_cli.__file__)
'''


def program(*parts: str, card: int | None = None, bundled: bool = False) -> str:
    """A checked process's code: vLLM's card simulated as `card` (e.g. 90; None: vLLM's own platform) and its
    bundled DeepGEMM as one that loads (bundled), each before vLLM reads it; then the parts."""
    head = f"import json, sys\nCARD, TESTS, BUNDLED_SOURCE = {card!r}, {TESTS!r}, {BUNDLED_SOURCE!r}\n"
    return head + (SIMULATED_CARD if card else "") + (SIMULATED_BUNDLED if bundled else "") + "".join(parts)


def spawn(code: str, env_set: dict, cwd: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in (ENV, NATIVE_ENV)}
    env.update(env_set)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd, timeout=900)


def plugin_lines(proc: subprocess.CompletedProcess) -> list:
    """The plug-in's lines in vLLM's log (its format names the file)."""
    return [ln for ln in (proc.stdout + proc.stderr).splitlines() if "[vllm_plugin.py:" in ln]


def answers(proc: subprocess.CompletedProcess) -> dict:
    return json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("ANSWERS "))[8:])


def fail(why: str, proc: subprocess.CompletedProcess) -> None:
    sys.exit(f"plug-in check: {why}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}")


def main() -> None:
    try:
        import vllm  # noqa: F401
    except ImportError as e:
        sys.exit(f"plug-in check: vLLM does not import here ({e}); .ci/run installs the wheel with --no-deps")
    cwd = tempfile.mkdtemp(prefix="mqa-plugin-")  # no source tree in the children's working directory
    unset = spawn(program(LOAD, UNSET), {NATIVE_ENV: "1"}, cwd)
    if unset.returncode != 0 or "UNSET OK" not in unset.stdout or plugin_lines(unset) or "mqa" in unset.stderr:
        fail("without the variable the plug-in must change nothing and print nothing", unset)
    on = spawn(program(INDEXER_FIRST, LOAD, ANSWERS, SET, card=90, bundled=True), {ENV: "1", NATIVE_ENV: "1"}, cwd)
    if on.returncode != 0 or "SET OK" not in on.stdout:
        fail("on sm90 the stand-in must serve vLLM's wrappers right and run next_n 3 and 6 natively", on)
    got = answers(on)
    want = {"has_deep_gemm": True, "native next_n": list(range(1, 9)), "schedule slots of 132 SMs at next_n 4": 132,
            "vLLM's deep_gemm": "mqa_cli.deep_gemm"}
    if {k: got[k] for k in want} != want:
        fail(f"vLLM's answers {got}, expected {want}", on)
    lines = plugin_lines(on)
    if len(lines) != 1 or not all(x in lines[0] for x in ("INFO", "sm90", "fp8_fp4_paged_mqa_logits",
                                                          "every other name", "next_n 1-8 native",
                                                          "vllm.v1.attention.backends.mla.indexer")):
        fail(f"one INFO line naming what it serves, forwards and changes expected, got {lines}", on)
    print(lines[0])
    print(on.stdout.splitlines()[-1])
    print("PLUGIN OK")


if __name__ == "__main__":
    main()
