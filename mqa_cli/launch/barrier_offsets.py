"""Where a compiled Gluon kernel keeps its kv ring's barriers, for the build that uses them in PTX.

A Gluon kernel's PTX_SLOTS build (decode, mqa_kernels.decode.paged_ws_sm90; prefill, mqa_kernels.prefill.gluon_ws_sm90) waits for a
ring slot and releases it by PTX at global_smem + FULL_AT (EMPTY_AT) + 8 * slot: triton puts a warpgroup barrier
before its own waits and arrives on one barrier array, and none before inline PTX. Triton's allocator picks the
offsets, and the PTX of a build names them in each barrier's init. So `resolve` compiles once with both at 0 (the
inline PTX allocates nothing, so the offsets stay), reads them, and checks them in the build that uses them. Cached
per compiled variant and target: a launch pays one extra compile, once, before its first.
"""
from __future__ import annotations

import re
from dataclasses import replace

from ..errors import UserError

_INIT = re.compile(r"mbarrier\.init\.shared(?:::cta)?\.b64\s+\[(%r\d+)(?:\+(\d+))?\],\s*(\d+);")
_MOV = re.compile(r"mov\.[bu]32\s+(%r\d+),\s*global_smem;")
_ADD = re.compile(r"add\.[su]32\s+(%r\d+),\s*(%r\d+),\s*(-?\d+);")

EMPTY_COUNT = 128  # PTX_SLOTS: every thread of each consuming warpgroup releases a slot


_DEF = re.compile(r"^\s*(?:@!?%p\d+\s+)?[a-z][\w.:]*\s+(%r\d+)[,;]", re.M)  # an instruction that writes a %r


def smem_offset(ptx: str, reg: str) -> int | None:
    """reg's value as global_smem + a constant, followed through mov/add-immediate definitions of registers written
    once in the whole PTX; None otherwise."""
    writes: dict = {}
    for m in _DEF.finditer(ptx):
        writes[m.group(1)] = writes.get(m.group(1), 0) + 1
    defs = {}
    for m in _MOV.finditer(ptx):
        defs.setdefault(m.group(1), ("base", None, 0))
    for m in _ADD.finditer(ptx):
        defs.setdefault(m.group(1), ("add", m.group(2), int(m.group(3))))
    total, seen = 0, set()
    while reg not in seen:
        seen.add(reg)
        d = defs.get(reg)
        if d is None or writes.get(reg) != 1:
            return None
        kind, src, imm = d
        if kind == "base":
            return total
        total, reg = total + imm, src
    return None


def ring_barriers(ptx: str) -> tuple[int, int] | None:
    """Offsets (full, empty) of the kv ring's first barriers: the first init whose count is a multiple of 128 (one
    or several warpgroups' threads) is its first empty barrier (no other barrier of the kernels counts threads),
    and the init just before it (count 1) its first full one (the ring initialises them slot by slot)."""
    inits = _INIT.findall(ptx)
    for i, (reg, plus, count) in enumerate(inits):
        if int(count) % EMPTY_COUNT == 0 and i > 0 and int(inits[i - 1][2]) == 1:
            at = [smem_offset(ptx, r) for r, _, _ in (inits[i - 1], inits[i])]
            if None in at:
                return None
            return at[0] + int(inits[i - 1][1] or 0), at[1] + int(plus or 0)
    return None


_RESOLVED: dict = {}  # JIT specialisation -> (FULL_AT, EMPTY_AT); starts over past MAX_RESOLVED keys
MAX_RESOLVED = 256
KEYS = ("FULL_AT", "EMPTY_AT")


def resolve(fn, la, gpu, compile_launch, specialization=None) -> None:
    """Set FULL_AT and EMPTY_AT in la.constexprs for a PTX_SLOTS launch, compiling for `gpu` as needed with
    compile_launch(fn, launch_args, gpu) -> compiled kernel (mqa_cli.launch.signature.compile_launch); other launches are
    left alone. Cached per JIT specialisation (`specialization(fn, la, gpu, leave_out)` -> str, default
    mqa_cli.launch.signature.specialization): argument alignment or a stride of 1 makes another binary, whose shared
    memory may be laid out otherwise."""
    c = la.constexprs
    if not c.get("PTX_SLOTS") or min(c.get(k, 0) for k in KEYS) >= 0:
        return
    if specialization is None:
        from .signature import specialization
    key = specialization(fn, la, gpu, KEYS)
    at = _RESOLVED.get(key)
    if at is None:
        def build(offsets):
            ptx = compile_launch(fn, replace(la, constexprs={**c, **dict(zip(KEYS, offsets))}), gpu).asm["ptx"]
            return ring_barriers(ptx)

        at = build((0, 0))
        if at is None:
            raise UserError(f"{fn.__name__}: the kv ring's barriers were not found in the PTX of its PTX_SLOTS build")
        if at != (0, 0) and build(at) != at:
            raise UserError(f"{fn.__name__}: the kv ring's barriers moved in its PTX_SLOTS build")
        if len(_RESOLVED) >= MAX_RESOLVED:
            _RESOLVED.clear()
        _RESOLVED[key] = at
    c.update(zip(KEYS, at))


def resolve_on_device(cfg, la, tensor) -> None:
    """resolve() for a launch on `tensor`'s GPU, where the plan decided so (config.schedule["slot_offsets"],
    mqa_cli.plan.build); a launch on "meta" tensors (the cross-target compile, which resolves for its own target) is
    left alone."""
    from ..plan.build import FIRST_BUILD

    if cfg.schedule.get("slot_offsets") != FIRST_BUILD or not tensor.is_cuda:
        return
    from triton.runtime import driver

    from .signature import compile_launch

    resolve(cfg.jitted(), la, driver.active.get_current_target(), compile_launch)
