"""The README's "Inside vLLM and SGLang" lines, run as written, then the stand-in called as each engine's wrapper
calls deep_gemm (wrappers written here from ../shared/context/engine-call-sites.md), judged against the float64
reference; forwarding of every other name to a real deep_gemm, and the one-line AttributeError without one; the
stand-in reaching worker processes (spawned, and started with the inherited environment).

Each check runs in a fresh interpreter: installing the stand-in changes sys.modules for the whole process."""
import os
import re
import subprocess
import sys
import textwrap

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme_blocks(lang: str) -> list[str]:
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    section = text.split("## Inside vLLM and SGLang", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", section, flags=re.S)


def run_python(script: str, tmp_path, env_extra=None, timeout=600) -> subprocess.CompletedProcess:
    path = tmp_path / "script.py"  # a file, so that spawned children can import the script's functions
    path.write_text(script)
    env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=ROOT)
    env.pop("TRITON_INTERPRET", None)
    if not torch.cuda.is_available():
        env["TRITON_INTERPRET"] = "1"
    env.update(env_extra or {})
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, cwd=str(tmp_path),
                          timeout=timeout)


def assert_ran(proc, marker: str):
    assert proc.returncode == 0 and marker in proc.stdout, (proc.returncode, proc.stdout[-3000:], proc.stderr[-4000:])


# The engines' wrappers, as engine-call-sites.md describes them (vLLM resolves deep_gemm lazily by name and passes
# positionals; SGLang imports it and calls the legacy names), then their calls on small problems.
ENGINES = '''
import importlib

import torch

from tests.reference64 import assert_logits, compress64
from tests.test_api_forms import DEVICE, paged_problem, prefill_problem


class VllmDeepGemm:
    """vLLM 0.33's wrapper module: deep_gemm imported on first use, positionals as vLLM passes them."""

    def __init__(self):
        self._dg = None

    def _lazy_init(self):
        if self._dg is None:
            self._dg = importlib.import_module("deep_gemm")
        return self._dg

    def fp8_fp4_mqa_logits(self, q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, max_seqlen_k):
        return self._lazy_init().fp8_fp4_mqa_logits(q, kv, weights, cu_seqlen_ks, cu_seqlen_ke, max_seqlen_k)

    def get_paged_mqa_logits_metadata(self, context_lens, block_size, num_sms):
        return self._lazy_init().get_paged_mqa_logits_metadata(context_lens, block_size, num_sms)

    def fp8_fp4_paged_mqa_logits(self, q, kv_cache, weights, context_lens, block_tables, schedule_metadata,
                                 max_model_len, indices=None):
        dg = self._lazy_init()
        if indices is None:
            return dg.fp8_fp4_paged_mqa_logits(q, kv_cache, weights, context_lens, block_tables, schedule_metadata,
                                               max_model_len)
        return dg.fp8_fp4_paged_mqa_logits(q, kv_cache, weights, context_lens, block_tables, schedule_metadata,
                                           max_model_len, indices=indices)

    def set_num_sms(self, n):
        self._lazy_init().set_num_sms(n)

    def get_num_sms(self):
        return self._lazy_init().get_num_sms()


def vllm_calls():
    vdg = VllmDeepGemm()
    vdg.set_num_sms(4)  # its micro-batching path
    # prefill: a chunk of rows, workspace slices of kv, six positionals, reads [0, ke - ks) of each row
    p = prefill_problem(S=16, N=40, seed=1)
    r0, r1 = 3, 14
    ks, ke = p.ks[r0:r1], p.ke[r0:r1]
    width = int((ke - ks).max())
    out = vdg.fp8_fp4_mqa_logits((p.q[r0:r1], None), (p.kv[:p.N], p.sc[:p.N]), p.w[r0:r1], ks, ke, width)
    assert tuple(out.shape) == (r1 - r0, width), out.shape
    ref, mag = compress64(p.ref[r0:r1], p.mag[r0:r1], ks.cpu(), ke.cpu(), width)
    assert_logits(out, ref, mag, clean=False)
    # decode: 2-D context lens with a padding row, the metadata copied into a fixed buffer's first rows
    d = paged_problem(B=3, T=2, H=16, D=128, bs=64, ctx=[[60, 61], [0, 0], [129, 130]], seed=2)
    n = vdg.get_num_sms()
    buf = torch.zeros(n + 1, 2, dtype=torch.int32, device=DEVICE)
    buf[: n + 1].copy_(vdg.get_paged_mqa_logits_metadata(d.ctx, 64, n))
    logits = vdg.fp8_fp4_paged_mqa_logits((d.q, None), d.cache, d.w, d.ctx, d.table, buf[: n + 1], d.max_context_len)
    assert_logits(logits, d.ref, d.mag, clean=False)
    vdg.set_num_sms(0)


def sglang_calls():
    import deep_gemm

    n = deep_gemm.get_num_sms()
    deep_gemm.set_num_sms(n)  # around the prefill under pipeline parallelism
    try:
        p = prefill_problem(S=12, N=40, seed=3)
        logits = deep_gemm.fp8_mqa_logits(p.q, (p.kv, p.sc), p.w, p.ks, p.ke, clean_logits=False)
        assert logits.shape[1] == p.N
        assert_logits(logits, p.ref, p.mag, clean=False)
        glm = deep_gemm.fp8_mqa_logits(p.q, (p.kv, p.sc), p.w, p.ks, p.ke, clean_logits=True)
        assert_logits(glm, p.ref, p.mag, clean=True)
    finally:
        deep_gemm.set_num_sms(n)
    d = paged_problem(B=4, T=1, ctx=[[30], [1], [0], [45]], seed=4)
    meta = deep_gemm.get_paged_mqa_logits_metadata(d.ctx, d.bs, deep_gemm.get_num_sms())
    logits = deep_gemm.fp8_paged_mqa_logits(d.q, d.cache, d.w, d.ctx, d.table, meta, d.max_context_len, False)
    assert_logits(logits, d.ref, d.mag, clean=False)
'''


def test_readme_python_lines_then_each_engines_wrapper(tmp_path):
    (block,) = readme_blocks("python")
    script = ENGINES + textwrap.dedent('''

        def probe():
            import deep_gemm
            return deep_gemm.__name__


        if __name__ == "__main__":
            import multiprocessing
            import subprocess
            import sys

            from mqa_cli.launch import interpreter
            interpreter.enable_if_no_gpu(note=False)
            exec(compile(README_LINES, "README.md", "exec"))
            import deep_gemm
            import mqa_cli
            assert deep_gemm.fp8_fp4_mqa_logits is mqa_cli.fp8_fp4_mqa_logits
            vllm_calls()
            sglang_calls()
            with multiprocessing.get_context("spawn").Pool(1) as pool:  # a spawned worker imports deep_gemm
                assert pool.apply(probe) == "mqa_cli.deep_gemm"
            child = subprocess.run([sys.executable, "-c", "import deep_gemm; print(deep_gemm.__name__)"],
                                   capture_output=True, text=True, check=True)  # a worker started by command
            assert child.stdout.strip() == "mqa_cli.deep_gemm", child.stdout
            print("ENGINES OK")
    ''').replace("README_LINES", repr(block))
    assert_ran(run_python(script, tmp_path), "ENGINES OK")


def test_readme_shell_lines(tmp_path):
    (block,) = [b for b in readme_blocks("bash") if "mqa_cli.deep_gemm" in b]  # the other is the plug-in's
    exports = [line for line in block.splitlines() if line.startswith("export ")]
    assert exports, block
    check = ("import deep_gemm, mqa_cli; assert deep_gemm.fp8_mqa_logits is mqa_cli.fp8_mqa_logits; "
             "assert deep_gemm.set_num_sms.__module__ == 'mqa_cli.deep_gemm'; print('SHELL OK', deep_gemm.__name__)")
    env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=ROOT,
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    proc = subprocess.run(["bash", "-c", "\n".join([*exports, f'python -c "{check}"'])], capture_output=True,
                          text=True, env=env, cwd=str(tmp_path), timeout=300)
    assert_ran(proc, "SHELL OK mqa_cli.deep_gemm")


FAKE_DEEP_GEMM = '''
calls = []


def fp8_gemm_nt(*args):
    return "the real GEMM"


def set_num_sms(n):
    calls.append(n)


def get_num_sms():
    return 999


def fp8_mqa_logits(*args, **kwargs):
    raise AssertionError("the real DeepGEMM's MQA logits must not be called")
'''


def test_other_names_go_to_the_real_deep_gemm(tmp_path):
    pkg = tmp_path / "site" / "deep_gemm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(FAKE_DEEP_GEMM)
    (pkg / "utils.py").write_text("def ceil_div(a, b):\n    return -(-a // b)\n")
    script = textwrap.dedent('''
        import mqa_cli.deep_gemm
        mqa_cli.deep_gemm.install()
        import deep_gemm
        import mqa_cli
        from deep_gemm.utils import ceil_div  # a submodule of the real package
        assert deep_gemm.fp8_gemm_nt() == "the real GEMM"
        assert ceil_div(7, 2) == 4
        assert deep_gemm.fp8_mqa_logits is mqa_cli.fp8_mqa_logits
        assert deep_gemm.get_num_sms() == mqa_cli.get_num_sms() != 999
        deep_gemm.set_num_sms(3)
        real = mqa_cli.deep_gemm._real_module
        assert real.calls == [3] and mqa_cli.get_num_sms() == 3, real.calls
        print("FORWARD OK")
    ''')
    site = str(tmp_path / "site")
    proc = run_python(script, tmp_path, env_extra={"PYTHONPATH": os.pathsep.join([ROOT, site])})
    assert_ran(proc, "FORWARD OK")


def test_without_deep_gemm_a_missing_name_says_so(tmp_path):
    script = textwrap.dedent('''
        import mqa_cli.deep_gemm
        mqa_cli.deep_gemm.install(child_processes=False)
        import deep_gemm
        try:
            deep_gemm.fp8_gemm_nt
        except AttributeError as e:
            msg = str(e)
        else:
            raise SystemExit("no AttributeError")
        assert "fp8_gemm_nt" in msg and "not installed" in msg and "\\n" not in msg, msg
        assert getattr(deep_gemm, "bf16_gemm_nt", None) is None  # vLLM's getattr(..., None) probes
        try:
            import deep_gemm.utils  # noqa: F401
        except ModuleNotFoundError:
            pass
        else:
            raise SystemExit("deep_gemm.utils imported from nowhere")
        assert callable(deep_gemm.fp8_fp4_paged_mqa_logits) and callable(deep_gemm.get_paged_mqa_logits_metadata)
        print("MISSING OK")
    ''')
    assert_ran(run_python(script, tmp_path), "MISSING OK")
