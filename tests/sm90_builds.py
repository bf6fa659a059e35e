"""Kernels cross-compiled for sm90 on the CPU, for the tests that read what came out (test_gluon_ws_compile.py,
test_paged_ws.py, test_paged_schedule.py, test_topk.py).

A build runs in a child process (`python -m tests.sm90_builds KIND FOLDER KWARGS`): the suite runs the interpreter,
and a process that imported triton in interpreter mode cannot compile. Each kind signs its kernel(s) on "meta"
tensors the way its launcher does and compiles through mqa_cli's compile_launch; every kernel's ttgir, ptx, sass,
cuobjdump's resource usage and ptxas's verbose warnings (C7514: wgmma serialised; C7508: setmaxnreg ignored) come
back beside its symbol and its config's name.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGES = ("ttgir", "ptx", "sass")


def start(kind: str, folder, cache=None, **kw) -> subprocess.Popen:
    """One build's child, started (several run side by side); `cache`: a private TRITON_CACHE_DIR."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if cache:
        env["TRITON_CACHE_DIR"] = str(cache)
    return subprocess.Popen([sys.executable, "-m", "tests.sm90_builds", kind, str(folder), json.dumps(kw)], cwd=ROOT,
                            env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(proc: subprocess.Popen, folder) -> list:
    """Each kernel's result (its stages' text included), once the child is done; its symbol is its config's name."""
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-4000:]
    got = []
    for sub in sorted(Path(folder).glob("[0-9]*"), key=lambda p: int(p.name)):
        r = json.loads((sub / "result.json").read_text())
        assert r["name"] == r["expected"], r
        got.append({**r, **{s: (sub / s).read_text() for s in STAGES}})
    return got


def build(kind: str, folder, cache=None, **kw) -> list:
    return finish(start(kind, folder, cache, **kw), folder)


# ---------------------------------------------------------------------------------------------- the child's side

def meta_paged(B=8, T=2, H=64, D=128, L=8192, extra=0):
    """Paged tensors on the meta device (no memory): a cache whose block stride is D + 4 bytes per token plus extra."""
    import torch

    from mqa_cli.problem.paged_tensors import Paged

    m = dict(device="meta")
    nb = B * L // 64
    blocks = torch.empty(nb, 64 * (D + 4) + extra, dtype=torch.uint8, **m)
    cache = blocks[:, : 64 * (D + 4)].view(nb, 64, 1, D + 4)
    return Paged(torch.empty(B, T, H, D, dtype=torch.float8_e4m3fn, **m), cache, torch.empty(B * T, H, **m),
                 torch.empty(B, T, dtype=torch.int32, **m), torch.empty(B, L // 64, dtype=torch.int32, **m), L)


def prefill(clean, compressed, bf16, S, N, H, max_seqlen_k=0, D=128, groups=None, n=None, tma_store=False,
            chains=None):
    """The Gluon prefill kernel in the forms engines pass: row slices of bigger q / kv, [N, 1]-style and [S, 2]-style
    strided views, a padded weights row."""
    import torch

    from mqa_cli.launch.common import alloc_logits
    from mqa_cli.launch.gluon_ws_sm90 import gluon_ws_sm90_args
    from mqa_cli.problem.tensors import Prefill
    from mqa_kernels.prefill.gluon_ws_sm90.config import gluon_ws_sm90_config

    f8, meta = torch.float8_e4m3fn, dict(device="meta")
    t = Prefill(torch.empty(S + 3, H, D, dtype=f8, **meta)[3:], torch.empty(N + 64, D, dtype=f8, **meta)[64:],
                torch.empty(N, 2, **meta)[:, 0], torch.empty(S, H + 8, **meta)[:, :H],
                torch.empty(S, 2, dtype=torch.int32, **meta)[:, 0], torch.empty(S, 2, dtype=torch.int32, **meta)[:, 1])
    cfg = gluon_ws_sm90_config(heads=H, dim=D, S=S, N=N, clean=clean, compressed=compressed, bf16=bf16, units=132,
                               groups=tuple(int(x) for x in groups.split("x")) if groups else None, n=n,
                               tma_store=tma_store, chains=chains)
    cols = max_seqlen_k if compressed else N
    la = gluon_ws_sm90_args(t, cfg, alloc_logits(S, cols, "meta", torch.bfloat16 if bf16 else torch.float32),
                            max_seqlen_k if compressed else 0)
    return [(cfg, la, {})]


def paged_ws(T, H, D, clean, bf16, given, pipe, wg, lanes, mma, ahead, ptx):
    """The Gluon decode kernel with the given sweep keys, its schedule computed or given (a metadata buffer)."""
    import torch

    from mqa_cli.launch.common import alloc_logits
    from mqa_cli.launch.paged_ws_sm90 import paged_ws_sm90_args
    from mqa_cli.plan.build import with_schedule
    from mqa_kernels.decode.paged_ws_sm90.config import paged_ws_sm90_config

    t = meta_paged(B=4, T=T, H=H, D=D)
    ov = {"PIPE": bool(pipe)} if wg == 1 else {"MATH_WG": wg, "SUBS": 1, "STAGES": 6 if T <= 4 else 4}
    ov["Q_IN_LANES"] = lanes == 1
    ov["MMA_N"] = mma  # a block's draft rows in parts of mma / H rows, one wgmma each (0: one wgmma)
    ov["AHEAD"] = bool(ahead)  # parts: the next part's wgmma before a part's epilogue, or one part at a time
    ov["PTX_SLOTS"] = bool(ptx)  # ring slots waited for and released in PTX at the barriers' resolved offsets
    cfg = with_schedule(paged_ws_sm90_config(heads=H, dim=D, next_n=T, block_size=64, batch=4, max_context_len=8192,
                                             clean=bool(clean), bf16=bool(bf16), units=132, override=ov), not given)
    meta = torch.empty(133, 2, dtype=torch.int32, device="meta") if given else None
    out = alloc_logits(t.S, 8192, "meta", torch.bfloat16 if bf16 else torch.float32)
    return [(cfg, paged_ws_sm90_args(t, cfg, out, meta), {"lanes": cfg.constexprs["Q_IN_LANES"]})]


def paged_schedule(cases):
    """The decode split's kernel for each (batch, next_n, programs), on a row slice of a wider context_lens."""
    import torch

    from mqa_cli.launch.common import LaunchArgs
    from mqa_kernels.decode.paged_schedule.config import paged_schedule_config

    got = []
    for B, next_n, P in cases:
        cfg = paged_schedule_config(batch=B, programs=P, backend="cuda")
        ctx = torch.empty(B, 4, dtype=torch.int32, device="meta")[:, :next_n]
        out = torch.empty(P + 1, 2, dtype=torch.int32, device="meta")
        la = LaunchArgs(cfg.grid, [ctx, out, B, next_n, ctx.stride(0), ctx.stride(1), 64, P], dict(cfg.constexprs),
                        dict(cfg.options))
        got.append((cfg, la, {"grid": list(cfg.grid)}))
    return got


def topk(cases):
    """The selection's kernel for each (rows, cols), by its rules' configs (not the last sweep's table); the paged
    ones over a decode step's context_lens."""
    import torch

    from mqa_cli.api.topk import select_args
    from mqa_kernels.topk import tuned
    from mqa_kernels.topk.config import topk_config

    tuned.CUDA_TUNED = {}
    meta, got = dict(device="meta"), []
    for rows, cols, paged in cases:
        cfg = topk_config(rows=rows, cols=cols, topk=2048, backend="cuda", units=132, paged=paged, values=False)
        logits = torch.empty(rows, cols + 128, **meta)[:, :cols]
        i32 = lambda *s: torch.empty(*s, dtype=torch.int32, **meta)  # noqa: E731
        la = select_args(cfg, logits, i32(rows), i32(rows), i32(rows, 2048), None,
                         paged=(i32(rows), 1, cols) if paged else None,
                         scratch=i32(max(1, cfg.schedule["scratch_elems"])), arrive=i32(rows))
        got.append((cfg, la, {"kernel": cfg.kernel}))
    return got


def _write(k, cfg, sig, folder: Path, extra: dict) -> None:
    import triton

    from mqa_cli.launch import barrier_offsets

    bin_dir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    folder.mkdir(parents=True, exist_ok=True)
    for stage in ("ttgir", "ptx"):
        (folder / stage).write_text(k.asm[stage])
    cubin = folder / "cubin"
    cubin.write_bytes(k.asm["cubin"])
    run = lambda *a: subprocess.run(a, capture_output=True, text=True)  # noqa: E731
    (folder / "sass").write_text(run(os.path.join(bin_dir, "cuobjdump"), "-sass", cubin).stdout)
    ptx = k.asm["ptx"]
    warn = run(os.path.join(bin_dir, "ptxas"), "-arch=sm_90a", "-v", folder / "ptx", "-o", os.devnull)
    (folder / "result.json").write_text(json.dumps({
        "name": k.metadata.name, "expected": cfg.name, "shared": k.metadata.shared, "args": sig.signature,
        "usage": run(os.path.join(bin_dir, "cuobjdump"), "--dump-resource-usage", cubin).stdout, "ptxas": warn.stderr,
        "inits": barrier_offsets.ring_barriers(ptx) if "mbarrier" in ptx else [],
        "maps": re.findall(r"\.param \.align 64 \.b8 (\w+)\[128\]", ptx),
        "prefetched": re.findall(r"prefetch\.param\.tensormap \[(\w+)\]", ptx), **extra}))


def main(kind: str, folder: str, kw: str) -> None:
    from mqa_cli.inspect import compile as comp

    comp.prepare()
    from triton.backends.compiler import GPUTarget

    from mqa_cli.launch import barrier_offsets

    gpu = GPUTarget("cuda", 90, 128)
    for i, (cfg, la, extra) in enumerate(globals()[kind](**json.loads(kw))):
        fn = cfg.jitted()
        barrier_offsets.resolve(fn, la, gpu, comp.compile_launch)  # PTX_SLOTS: FULL_AT / EMPTY_AT from a first build
        k, sig = comp.compile_with_signature(fn, la, gpu)
        offsets = [la.constexprs[key] for key in ("FULL_AT", "EMPTY_AT") if key in la.constexprs]
        _write(k, cfg, sig, Path(folder) / str(i), {**extra, "offsets": offsets})


if __name__ == "__main__":
    main(*sys.argv[1:])
