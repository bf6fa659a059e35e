"""Cross-target compile: the plan's kernel for any GPU target, without that GPU (and without running it).

    artifact = compile_config(plan.target, plan.config, plan.shape, plan.chosen.row.name)  # triton.compile, cached
    folder, files = write_dump(artifact, "dumps")  # every stage + manifest.json in dumps/<target>/<cfg.dump_name>/

The signature is built the way the JIT builds it at launch (mqa_cli.launch.signature): from the LaunchArgs that
mqa_cli.launch.common computes (the one source of the argument order) on "meta"-device tensors of the problem's shape, so
nothing is allocated.

Trap: a process whose kernels were decorated with TRITON_INTERPRET=1 cannot compile them (they
are InterpretedFunctions). `prepare()` turns the interpreter off before any kernel module is
imported and refuses in one line when it is too late.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from mqa_kernels.common import versions

from ..errors import UserError
from ..launch import barrier_offsets
from ..launch.signature import Signature, build_signature, compile_launch, compile_with_signature  # noqa: F401

# Stages written to the dump folder, per backend, in pipeline order ("sass" is disassembled from the cubin).
STAGES = {"cuda": ("ttir", "ttgir", "llir", "ptx", "cubin", "sass"),
          "hip": ("ttir", "ttgir", "llir", "amdgcn", "hsaco")}
TEXT_STAGES = ("ttir", "ttgir", "llir", "ptx", "sass", "amdgcn")
EXTENSIONS = {"llir": "ll"}  # a stage's file extension where it is not the stage's name


def prepare() -> None:
    """Make this process able to compile: interpreter off, or a one-line refusal if triton already interprets."""
    if "triton" not in sys.modules:
        os.environ["TRITON_INTERPRET"] = "0"
        return
    from triton import knobs

    if knobs.runtime.interpret or os.environ.get("TRITON_INTERPRET") == "1":
        raise UserError("this process runs the Triton interpreter (TRITON_INTERPRET=1), which compiles nothing; "
                        "run `mqa-logits dump --target ...` in a fresh process")


def cache_dir() -> str:
    """Where Triton caches compiled kernels (TRITON_CACHE_DIR, default ~/.triton/cache)."""
    prepare()
    from triton import knobs

    return knobs.cache.dir


# ---------------------------------------------------------------------------------------------- meta tensors


def meta_prefill(shape):
    """A Prefill of the problem's sizes on the meta device (shapes and strides, no memory)."""
    import torch

    from ..problem.tensors import FP8_DTYPES, Prefill

    S, N, H, D = shape.S, shape.N, shape.heads, shape.dim
    fp8 = FP8_DTYPES[shape.fp8]
    meta = dict(device="meta")
    return Prefill(torch.empty(S, H, D, dtype=fp8, **meta), torch.empty(N, D, dtype=fp8, **meta),
                   torch.empty(N, dtype=torch.float32, **meta), torch.empty(S, H, dtype=torch.float32, **meta),
                   torch.empty(S, dtype=torch.int32, **meta), torch.empty(S, dtype=torch.int32, **meta))


# ---------------------------------------------------------------------------------------------- compile


@dataclass
class Artifact:
    """One compiled kernel: its stages (text or bytes), metadata, and where it came from."""

    target: object  # mqa_cli.plan.targets.Target
    cfg: object  # KernelConfig
    kernel: str  # dispatch row name
    stages: dict  # stage -> str | bytes
    metadata: dict
    signature: Signature | None
    compile_options: dict
    cache_hit: bool | None
    seconds: float
    problem: str = ""
    n_regs: int | None = None  # after load on a GPU
    n_spills: int | None = None

    @property
    def backend(self) -> str:
        return self.target.backend

    @property
    def name(self) -> str:
        return self.metadata.get("name", self.cfg.name)


def kernel_fn(cfg):
    """The jitted entry kernel (JITFunction or GluonJITFunction) named by the config."""
    prepare()
    from triton.runtime.jit import JITFunction

    fn = cfg.jitted()
    if not isinstance(fn, JITFunction):
        raise UserError(f"{cfg.kernel} is a {type(fn).__name__}, not a compilable JIT function "
                        "(was triton imported with TRITON_INTERPRET=1?)")
    return fn


def _listen():
    """Record whether triton.compile hit its cache (Triton's compilation listener)."""
    from triton import knobs

    seen = {}

    def listener(*, src, metadata, metadata_group, times, cache_hit):
        seen["cache_hit"] = cache_hit

    previous = knobs.compilation.listener
    knobs.compilation.listener = listener
    return seen, lambda: setattr(knobs.compilation, "listener", previous)


def run_tool(tool: str, *args, data: bytes, suffix: str) -> str:
    """Run a binary tool (cuobjdump, nvdisasm) on `data` written to a temporary file."""
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=suffix) as f:
        f.write(data)
        f.flush()
        try:
            return subprocess.run([tool, *args, f.name], check=True, capture_output=True, text=True).stdout
        except FileNotFoundError:
            raise UserError(f"{tool} not found (it ships in the triton wheel under triton/backends/nvidia/bin)") from None
        except subprocess.CalledProcessError as e:
            raise UserError(f"{Path(tool).name} {' '.join(args)} failed: {e.stderr.strip().splitlines()[-1:]}") from None


def _stages_of(compiled, backend: str) -> dict:
    asm = compiled.asm
    stages = {s: asm[s] for s in STAGES[backend] if s != "sass" and s in asm}
    if backend == "cuda" and "cubin" in stages:
        from triton import knobs

        stages["sass"] = run_tool(knobs.nvidia.cuobjdump.path, "-sass", data=stages["cubin"], suffix=".cubin")
    return stages


def _metadata(compiled) -> dict:
    md = compiled.metadata._asdict()
    t = md.get("target")
    if t is not None and not isinstance(t, dict):
        md["target"] = {"backend": t.backend, "arch": t.arch, "warp_size": t.warp_size}
    return md


def compile_config(target, cfg, shape, kernel: str = "", problem: str = "") -> Artifact:
    """Compile `cfg`'s kernel for `target` (any GPU target; no GPU needed) on a problem of `shape`."""
    if not target.is_gpu:
        raise UserError("target cpu runs the Triton interpreter: nothing is compiled there; "
                        "pick --target sm90, sm100, gfx942 or gfx950")
    prepare()
    from ..launch import common as launch, families as launchers
    from ..problem.paged_tensors import meta_paged

    build_args = launchers.args_builder(cfg)
    fn = kernel_fn(cfg)
    t = meta_paged(shape) if shape.kind == "paged" else meta_prefill(shape)
    max_seqlen_k = shape.N if shape.compressed else 0  # dump signs a compressed kernel at full width
    import torch

    out = launch.alloc_logits(t.S, max_seqlen_k or t.N, "meta", torch.bfloat16 if shape.bf16 else torch.float32)
    if shape.kind == "paged":  # the schedule metadata: [programs + 1, 2] int32
        extra = torch.empty(cfg.schedule["programs"] + 1, 2, dtype=torch.int32, device="meta")
    else:
        extra = max_seqlen_k
    la = build_args(t, cfg, out, extra)
    gpu = target.gpu_target()
    try:
        # PTX_SLOTS: its ring barriers' offsets, from builds compiled as this one is
        barrier_offsets.resolve(fn, la, gpu, compile_launch)
        seen, restore = _listen()
        t0 = time.perf_counter()
        try:
            compiled, sig = compile_with_signature(fn, la, gpu)
        finally:
            restore()
    except UserError:
        raise
    except Exception as e:  # a compile error is reported in one line (the CLI shows no tracebacks)
        lines = [ln for ln in str(e).strip().splitlines() if ln.strip(" ^~\t")]  # not the caret line
        raise UserError(f"compiling {cfg.name} for {target.name} failed: {type(e).__name__}: "
                        f"{lines[-1] if lines else ''}") from None
    seconds = time.perf_counter() - t0
    options = dict(la.options)
    return Artifact(target, cfg, kernel, _stages_of(compiled, target.backend), _metadata(compiled), sig, options,
                    seen.get("cache_hit"), seconds, problem)


def from_compiled(compiled, target, cfg, kernel: str = "", problem: str = "") -> Artifact:
    """An Artifact from a CompiledKernel that ran (mqa-logits run --dump-asm): its own asm, and after
    load the register and spill counts the driver reports."""
    n_regs = n_spills = None
    try:
        compiled._init_handles()
        n_regs, n_spills = compiled.n_regs, compiled.n_spills
    except Exception as e:  # not loadable here: keep the asm, say why the load-time counts are missing
        print(f"note: could not load {compiled.name} for register counts: {e}", file=sys.stderr)
    return Artifact(target, cfg, kernel, _stages_of(compiled, target.backend), _metadata(compiled), None,
                    dict(cfg.options), True, 0.0, problem, n_regs, n_spills)


# ---------------------------------------------------------------------------------------------- writing


def dump_folder_for(dump_dir, target_name: str, cfg) -> Path:
    """dump_dir/<target>/<kernel name>_w<warps>_s<stages>: the target level keeps sm90 and gfx950 builds of
    one config (same name) apart."""
    return Path(dump_dir) / target_name / cfg.dump_name


def check_folder(folder: Path, force: bool) -> None:
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder} exists and is not a folder")
    if folder.is_dir() and any(folder.iterdir()) and not force:
        raise UserError(f"{folder} exists and is not empty (--force to overwrite)")


def manifest(art: Artifact, files: list, summary: dict | None) -> dict:
    md = {k: v for k, v in art.metadata.items() if k != "extern_libs"}
    return {
        "target": art.target.name,
        "gpu_target": md.get("target"),
        "triton_version": versions.installed(),
        "kernel": art.kernel,
        "kernel_name": art.name,
        "dump_name": art.cfg.dump_name,
        "problem": art.problem,
        "config": art.cfg.as_dict(),
        "compile_options": art.compile_options,
        "hash": md.get("hash"),
        "signature": art.signature.signature if art.signature else None,
        "specialization": {"constexprs": art.signature.constexprs,
                           "attrs": {str(k[0]): v for k, v in art.signature.attrs.items()}} if art.signature else None,
        "grid": list(art.signature.grid) if art.signature else None,
        "metadata": md,
        "cache_dir": cache_dir(),
        "files": files,
        "summary": summary,
    }


def write_dump(art: Artifact, dump_dir, force: bool = False, summary: dict | None = None) -> tuple[Path, list]:
    """Write every stage and manifest.json to dump_dir/<target>/<cfg.dump_name>/ (refusing a non-empty folder
    without force): the folder and the names of the files written."""
    folder = dump_folder_for(dump_dir, art.target.name, art.cfg)
    check_folder(folder, force)
    if folder.is_dir() and force:
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for stage in STAGES[art.backend]:
        if stage not in art.stages:
            continue
        data = art.stages[stage]
        path = folder / f"{art.cfg.name}.{EXTENSIONS.get(stage, stage)}"
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)
        files.append(path.name)
    files.append("manifest.json")
    (folder / "manifest.json").write_text(json.dumps(manifest(art, files, summary), indent=2, default=str) + "\n")
    return folder, files


def launched_kernel(cfg):
    """The CompiledKernel this process launched for `cfg` (the JIT's device cache), or a one-line error."""
    import torch

    fn = cfg.jitted()
    caches = getattr(fn, "device_caches", None)
    if caches is None:
        raise UserError(f"{cfg.kernel} ran in the Triton interpreter: nothing was compiled to dump")
    device = torch.cuda.current_device()
    kernel_cache = caches[device][0] if device in caches else {}
    warps, stages = cfg.options.get("num_warps", 4), cfg.options.get("num_stages")
    named = [k for k in kernel_cache.values() if getattr(k, "name", None) == cfg.name]
    found = [k for k in named if k.metadata.num_warps == warps and (stages is None or k.metadata.num_stages == stages)]
    if not found and len(named) == 1:  # warp-specialised Gluon: metadata counts the worker warps too
        found = named
    if not found:
        raise UserError(f"no compiled {cfg.name} (w{warps}, s{stages}) in {cfg.kernel}'s cache on device {device}")
    return found[-1]
