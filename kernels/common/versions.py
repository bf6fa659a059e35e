"""What each triton release means for this project, as data: the one set of version facts that dispatch, explain
and the tests read (nothing here imports triton, so explain stays fast).

The kernels find the same things by feature at import (mqa_kernels.common.gluon_compat for the Gluon names,
mqa_cli.launch.direct for the launcher); tests/test_versions.py checks on the installed triton that the facts and
the features agree, so a fact cannot drift from the release it describes. A release outside every fact's list is
one nobody has compiled the kernels on: dispatch rules the rows that need the fact out, and explain says which fact.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Fact:
    name: str
    releases: tuple  # (major, minor) releases where it holds (checked on each: compile, SASS, tests)
    says: str

    def holds(self, version: str | None) -> bool:
        return version is not None and release(version) in self.releases

    def required(self) -> str:
        """'triton 3.6, 3.8 or 3.9 (fact gluon_hopper)': the condition explain prints."""
        names = [f"{a}.{b}" for a, b in self.releases]
        listed = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
        return f"{listed} (fact {self.name})"


FACTS = {f.name: f for f in (
    Fact("triton_kernels", ((3, 6), (3, 8), (3, 9)),
         "the Triton kernels (every variant not written in Gluon) compile for sm90 and the AMD targets and run in the "
         "interpreter; their head sums are explicit FMA chains, so their tensor-core loops are as short on each"),
    Fact("gluon_hopper", ((3, 6), (3, 8), (3, 9)),
         "the Gluon Hopper kernels (every variant written in Gluon) compile: warp_specialize, wgmma, mbarrier and TMA "
         "as these releases spell them (mqa_kernels.common.gluon_compat bridges the renames)"),
    Fact("gluon_names_3_6", ((3, 6),),
         "Gluon spells the warpgroup barrier gl.thread_barrier and the TMA copies tma.async_copy_global_to_shared / "
         "async_copy_shared_to_global"),
    Fact("gluon_names_3_8", ((3, 8), (3, 9)),
         "Gluon spells them gl.barrier and tma.async_load / async_store (3.8 keeps the old TMA names as aliases, "
         "3.9 only as functions that raise)"),
    Fact("tree_reduce", ((3, 8), (3, 9)),
         "reductions add a thread's values as a tree, not in order: a plain gl.sum / tl.sum of products would lose "
         "its FMAs, so the head sums are FMA chains written out (mqa_kernels.common.epilogue.fma_chain, and "
         "mqa_kernels.common.gluon_heads.fma_chain for the Gluon kernels)"),
    Fact("in_order_reduce", ((3, 6),),
         "reductions add a thread's values in order, so a plain gl.sum of products is already one FMA chain: the "
         "Gluon kernels' head sums are written so here (mqa_kernels.common.gluon_heads: the written-out chains "
         "measured 4-18 % slower on the H200 on 3.6)"),
    Fact("launcher_3_6", ((3, 6),),
         "the CUDA launcher is a CudaLauncher whose compiled C launch takes the grid, stream, function, launch "
         "flags, metadata, hooks and the kernel arguments (mqa_cli.launch.direct calls it directly)"),
    Fact("launcher_3_8", ((3, 8), (3, 9)),
         "the CUDA launcher is rewritten: a CudaLauncher whose launch takes the grid, stream, function, launch "
         "flags and the kernel arguments packed by their signature (mqa_cli.launch.direct calls it directly)"),
    Fact("interpreter_needs_numpy_below_2_4", ((3, 6),),
         "the interpreter converts 1-element arrays with int(), an error from numpy 2.4 on: run it with numpy < 2.4 "
         "(3.8 and 3.9 squeeze first and take any numpy)"),
    Fact("gluon_block_q_32_spills", ((3, 8), (3, 9)),
         "the Gluon prefill kernel's BLOCK_Q 32 layout (H 8 at wgmma N 256: a sweep candidate, in no table) spills "
         "inside its tile loop (32 rows of per-row state beside a 64 x 256 accumulator; on 3.6 only per item)"),
    Fact("gluon_bindings_leak_at_exit", ((3, 9),),
         "a process that compiled a Gluon TMA kernel ends in nanobind leak warnings (GluonOpBuilder's TMA copy methods "
         "keep an ir.attribute as a default argument): the CLI ends such a process without the interpreter's "
         "teardown (mqa_cli.cli._leave)"),
    Fact("fp_fusion_default_warns", ((3, 9),),
         "every compile that leaves enable_fp_fusion unset warns that its default turns off in 3.10 (every config "
         "here sets it: mqa_kernels.common.config.FP_FUSION)"),
)}


def release(version: str) -> tuple:
    """'3.8.0' / '3.9.0+git1234' -> (3, 8)."""
    out = []
    for part in version.split(".")[:2]:
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        out.append(int(digits) if digits else 0)
    return tuple(out)


def installed() -> str | None:
    """The version of the triton this process runs: the one reader every module uses. The imported module's own
    version once triton is imported (a release unpacked ahead of another on PYTHONPATH is the one that runs), else
    the installed distribution's, read without importing triton (dispatch and explain stay cheap)."""
    v = getattr(sys.modules.get("triton"), "__version__", None)
    return v if isinstance(v, str) else _distribution()


def installed_release() -> tuple | None:
    """(major, minor) of installed(), or None."""
    v = installed()
    return None if v is None else release(v)


@lru_cache(maxsize=1)
def _distribution() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("triton")
    except PackageNotFoundError:
        return None


def holds(name: str, version: str | None = None) -> bool:
    """Whether fact `name` holds for `version` (default: the installed triton)."""
    return FACTS[name].holds(installed() if version is None else version)


def facts_of(version: str) -> list[str]:
    """The names of the facts that hold for `version`."""
    return [f.name for f in FACTS.values() if f.holds(version)]
