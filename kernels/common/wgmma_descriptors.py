"""Triton 3.9's wgmma descriptors rebuilt as 3.8 built them, in the PTX of this project's Gluon kernels only.

Why: from 3.9 triton builds the descriptor of each k-step of a wgmma chain from 32-bit pieces: the start-address
field plus the k offset in 32 bits, then widened and OR'd with the constant high word:

    bfe.u32 %rB, %rAddr, 4, 15;     add.s32 %rA, %rB, 2;     cvt.u64.u32 %rdX, %rA;     or.b64 %rdY, %rdX, C;

ptxas then rebuilds a uniform-register quad for every wgmma (about 3 UMOV a k-step in the tensor-core loops:
decode next_n 1 loops 127 -> 135 instructions, docs/CODEGEN.md). Triton 3.8 wrote the same value as one 64-bit add
from the chain's base, `add.s64 %rdY, cvt(%rB), C + 2`, which ptxas keeps in place. `rewrite` turns the first form
into the second. It is exact: %rB is a bit field of at most 18 bits, so %rB + K never carries out of 32 bits and
the OR with a constant whose low word is zero is an add.

Scope: `scoped(kernel)` installs the pass as triton's stages-inspection hook only while this project compiles one
of its kernels (mqa_cli.launch.common.run_kernel, mqa_cli.launch.signature.compile_with_signature), chained after a
hook another tool set, and restores that hook after; it acts only on the kernel named, so a kernel another thread
compiles meanwhile is left as it is. Where triton enters the hook in its cache keys (3.8 on), the rewritten
binary is cached apart from triton's own. Installed only where the version fact `descriptors_32bit` holds
(kernels/common/versions.py; tests/test_wgmma_descriptors.py checks it against the PTX of the installed triton), and
not for a config that says `descriptor_pass: False` in its schedule: the decode kernel's builds whose cache block
runs in 4 or more parts (next_n 5-8 at H 64). There the 64-bit form lets ptxas hold every part's q descriptors in
registers through the block loop, and those builds already run at 128 or 168 registers a thread: on 3.9 next_n 5
small went from 0 to 197 spill instructions with the pass, next_n 8 small from 0 to 172 (docs/CODEGEN.md).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import re
import threading
from pathlib import Path

_REG = r"%r\d+"
_RD = r"%rd\d+"
# the instructions the chain is made of, each on its own line as triton's PTX prints them
_BFE = re.compile(rf"^\s*bfe\.u32\s+({_REG}),\s*{_REG},\s*(\d+),\s*(\d+);", re.M)
_ADD = re.compile(rf"^\s*add\.s32\s+({_REG}),\s*({_REG}),\s*(\d+);", re.M)
_CVT = re.compile(rf"^(\s*)cvt\.u64\.u32\s+({_RD}),\s*({_REG});", re.M)
_OR = re.compile(rf"^(\s*)or\.b64\s+({_RD}),\s*({_RD}),\s*(\d+);", re.M)
# an instruction's destination: one register, or a brace list (a vector load or unpack, a wgmma's accumulators)
_WRITE = re.compile(r"^\s*(?:@!?%p\d+\s+)?[a-z][\w.:]*\s+(%rd?\d+|\{[^}]*\})\s*[,;]", re.M)

FIELD_BITS = 18  # a base wider than this is not rewritten (the descriptor's address field is 14 bits)
MAX_OFFSET = 1 << 13  # nor an offset larger than this: (2^18 + 2^13) stays far below 2^32

_LOCK = threading.Lock()


def rewrite(ptx: str) -> tuple[str, int]:
    """(PTX with every 32-bit-piece descriptor that matches the chain above rebuilt as one 64-bit add, how many)."""
    writes: dict = {}
    for m in _WRITE.finditer(ptx):
        for reg in re.findall(r"%rd?\d+", m.group(1)):
            writes[reg] = writes.get(reg, 0) + 1
    uses: dict = {}
    for m in re.finditer(r"%rd\d+\b", ptx):
        uses[m.group(0)] = uses.get(m.group(0), 0) + 1
    once = lambda r: writes.get(r) == 1  # noqa: E731  a register written once in the whole kernel: one value
    narrow = {m.group(1) for m in _BFE.finditer(ptx) if once(m.group(1)) and int(m.group(3)) <= FIELD_BITS}
    adds = {m.group(1): (m.group(2), int(m.group(3))) for m in _ADD.finditer(ptx)
            if once(m.group(1)) and m.group(2) in narrow and int(m.group(3)) < MAX_OFFSET}
    cvts = {m.group(2): m for m in _CVT.finditer(ptx) if once(m.group(2)) and m.group(3) in adds}
    edits = []  # (start, end, text)
    for m in _OR.finditer(ptx):
        indent, dst, src, const = m.group(1), m.group(2), m.group(3), int(m.group(4))
        cvt = cvts.get(src)
        # src read only here (its one write and this read), and the constant's low word empty
        if cvt is None or uses.get(src) != 2 or not once(dst) or const & 0xFFFFFFFF or const >= 1 << 64:
            continue
        base, k = adds[cvt.group(3)]
        edits.append((cvt.start(), cvt.end(), f"{cvt.group(1)}cvt.u64.u32 \t{src}, {base};"))
        edits.append((m.start(), m.end(), f"{indent}add.s64 \t{dst}, {src}, {const + k};"))
    out, last = [], 0
    for start, end, text in sorted(edits):
        out.append(ptx[last:start])
        out.append(text)
        last = end
    out.append(ptx[last:])
    return "".join(out), len(edits) // 2


@functools.lru_cache(maxsize=1)
def _key() -> str:
    """What the pass contributes to triton's cache key: this file's text, so that an edit recompiles."""
    return "mqa_wgmma_descriptors:" + hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


class _Hook:
    """triton's stages-inspection hook: called with no arguments for its cache key, and with the backend's stages to
    change them (the PTX stage of `kernel` rewritten), after the hook it replaces."""

    def __init__(self, kernel: str, previous):
        self.kernel, self.previous = kernel, previous
        self.rewritten = 0

    def __call__(self, *args):
        if not args:
            key, digest = self.previous() if self.previous is not None else ("", "")
            mine = _key()
            return key + mine, hashlib.sha256((str(digest) + mine).encode()).hexdigest()
        if self.previous is not None:
            self.previous(*args)
        stages = args[1]
        make_ptx = stages.get("ptx")
        if make_ptx is None:
            return
        hook = self

        def ptx_stage(src, metadata):
            ptx = make_ptx(src, metadata)
            if str(metadata.get("name", "")).startswith(hook.kernel):
                ptx, n = rewrite(ptx)
                hook.rewritten += n
            return ptx

        stages["ptx"] = ptx_stage


def choice(cfg) -> bool | None:
    """`scoped`'s `enabled` for a KernelConfig: False where its config turns the pass off (schedule key
    "descriptor_pass", e.g. the decode kernel's builds in 4 or more parts), else None (the version fact)."""
    return False if cfg.schedule.get("descriptor_pass") is False else None


def state(cfg, version: str | None = None) -> str:
    """What the pass does for a config compiled on the installed triton, in words (`explain` prints it): the
    config's "descriptor_pass" only allows it; it runs where the version fact holds as well."""
    from importlib.metadata import version as installed

    v = version or installed("triton")
    if not active(v):
        return f"not needed: triton {v} builds each wgmma descriptor as one 64-bit value"
    if choice(cfg) is False:
        return f"off for this build (its config turns it off); triton {v} builds 32-bit descriptor pieces"
    return f"on: triton {v} builds 32-bit descriptor pieces (fact descriptors_32bit), rebuilt as 64-bit adds"


@functools.lru_cache(maxsize=8)
def active(version: str | None = None) -> bool:
    """Whether the pass runs on the installed triton (the version fact `descriptors_32bit`; looked up once)."""
    from .versions import holds

    return holds("descriptors_32bit", version)


@contextlib.contextmanager
def scoped(kernel: str, enabled: bool | None = None):
    """While the block compiles kernels, rewrite the descriptors of those named `kernel...`; yields the hook (its
    `rewritten` counts the descriptors rebuilt) or None where the pass does not run."""
    if not (active() if enabled is None else enabled):
        yield None
        return
    from triton import knobs

    with _LOCK:
        previous = knobs.runtime.add_stages_inspection_hook
        hook = _Hook(kernel, previous)
        knobs.runtime.add_stages_inspection_hook = hook
        try:
            yield hook
        finally:
            knobs.runtime.add_stages_inspection_hook = previous
