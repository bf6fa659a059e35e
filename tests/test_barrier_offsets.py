"""mqa_cli.launch.barrier_offsets: the kv ring's barrier offsets read from a build's PTX, and the resolve step that a
PTX_SLOTS launch takes before its compile (the real kernel's offsets: tests/test_paged_ws.py cross-compiles it)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from mqa_cli.errors import UserError
from mqa_cli.launch import barrier_offsets
from mqa_cli.launch.common import LaunchArgs


def ptx_with_ring(full: int, empty: int, slots: int = 2, q_at: int = 64, count: int = 128) -> str:
    """PTX as triton writes a ring's inits: q's pair (counts 1 and 3) first, then kv's full/empty slot by slot."""
    lines = ["\tmov.b32 \t%r10, global_smem;", f"\tadd.s32 \t%r11, %r10, {q_at};",
             f"\tadd.s32 \t%r12, %r10, {q_at + 8};",
             "\t@%p1 mbarrier.init.shared::cta.b64 [%r11], 1;", "\t@%p1 mbarrier.init.shared::cta.b64 [%r12], 3;"]
    reg = 20
    for s in range(slots):
        lines += [f"\tadd.s32 \t%r{reg}, %r10, {full + 8 * s};", f"\tadd.s32 \t%r{reg + 1}, %r{reg}, {empty - full};",
                  f"\t@%p1 mbarrier.init.shared::cta.b64 [%r{reg}], 1;",
                  f"\t@%p1 mbarrier.init.shared::cta.b64 [%r{reg + 1}], {count};"]
        reg += 2
    return "\n".join(lines) + "\n"


def test_ring_barriers_follows_the_address_chain_to_global_smem():
    assert barrier_offsets.ring_barriers(ptx_with_ring(50384, 50416)) == (50384, 50416)
    assert barrier_offsets.ring_barriers(ptx_with_ring(0, 16)) == (0, 16)
    # the prefill kernel's ring: released by every thread of two or three warpgroups
    assert barrier_offsets.ring_barriers(ptx_with_ring(2048, 2080, count=256)) == (2048, 2080)
    assert barrier_offsets.ring_barriers(ptx_with_ring(2048, 2080, count=384)) == (2048, 2080)


def test_ring_barriers_refuses_what_it_cannot_follow():
    assert barrier_offsets.ring_barriers(ptx_with_ring(100, 132).replace("128;", "1;")) is None  # no empty count
    assert barrier_offsets.ring_barriers(ptx_with_ring(100, 132, count=192)) is None  # not whole warpgroups
    # a register written twice is not a constant offset
    twice = ptx_with_ring(100, 132).replace("\t@%p1 mbarrier.init.shared::cta.b64 [%r20], 1;",
                                           "\tmov.b32 \t%r20, %r5;\n\t@%p1 mbarrier.init.shared::cta.b64 [%r20], 1;")
    assert barrier_offsets.ring_barriers(twice) is None
    assert barrier_offsets.ring_barriers(ptx_with_ring(100, 132).replace("global_smem", "other_smem")) is None


def _launch(ptx_slots: bool, aligned: bool = True) -> LaunchArgs:
    c = {"PTX_SLOTS": ptx_slots, "FULL_AT": -1, "EMPTY_AT": -1, "STAGES": 4}
    return LaunchArgs((1,), ["aligned" if aligned else "unaligned"], c, {"num_warps": 4})


def _spec(fn, la, gpu, leave_out):
    """A stand-in for the JIT's specialisation: the constexprs (offsets left out) and the arguments."""
    return repr((sorted((k, v) for k, v in la.constexprs.items() if k not in leave_out), la.args))


def test_resolve_compiles_reads_and_checks_the_offsets(monkeypatch):
    calls = []

    def fake_compile(fn, la, gpu):
        calls.append((la.constexprs["FULL_AT"], la.constexprs["EMPTY_AT"]))
        return SimpleNamespace(asm={"ptx": ptx_with_ring(4096, 4128)})

    monkeypatch.setattr(barrier_offsets, "_RESOLVED", {})
    fn, gpu = SimpleNamespace(__name__="k"), SimpleNamespace(backend="cuda", arch=90)
    la = _launch(True)
    barrier_offsets.resolve(fn, la, gpu, fake_compile, _spec)
    assert (la.constexprs["FULL_AT"], la.constexprs["EMPTY_AT"]) == (4096, 4128)
    assert calls == [(0, 0), (4096, 4128)]  # the placeholder build, then the build that uses them, checked
    again = _launch(True)
    barrier_offsets.resolve(fn, again, gpu, fake_compile, _spec)  # the same variant: cached, no compile
    assert len(calls) == 2 and again.constexprs["FULL_AT"] == 4096
    plain = _launch(False)
    barrier_offsets.resolve(fn, plain, gpu, fake_compile, _spec)  # triton's own slot ops: nothing to resolve
    assert plain.constexprs["FULL_AT"] == -1 and len(calls) == 2
    other = _launch(True, aligned=False)  # another JIT specialisation: another binary, resolved on its own
    barrier_offsets.resolve(fn, other, gpu, fake_compile, _spec)
    assert len(calls) == 4 and other.constexprs["EMPTY_AT"] == 4128


def test_resolve_refuses_offsets_that_move_or_are_missing(monkeypatch):
    fn, gpu = SimpleNamespace(__name__="k"), SimpleNamespace(backend="cuda", arch=90)
    monkeypatch.setattr(barrier_offsets, "_RESOLVED", {})
    builds = iter([ptx_with_ring(4096, 4128), ptx_with_ring(8192, 8224)])
    with pytest.raises(UserError, match="moved"):
        barrier_offsets.resolve(fn, _launch(True), gpu, lambda fn, la, gpu: SimpleNamespace(asm={"ptx": next(builds)}),
                                _spec)
    with pytest.raises(UserError, match="not found"):
        barrier_offsets.resolve(fn, _launch(True), gpu, lambda fn, la, gpu: SimpleNamespace(asm={"ptx": "ret;"}),
                                _spec)
