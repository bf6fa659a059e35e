"""Gluon pieces the warp-specialised Hopper kernels share: runtime scalars in aggregates, the shared-memory ring with
its full / empty mbarrier pairs, a counter of its uses, and a consumer's wait for and release of a ring slot.

mbarrier phases: an mbarrier starts in phase 0; `mbarrier.wait(bar, parity)` returns once the phase of that parity
has completed, and on a fresh barrier parity 1 counts as completed (the "phase before 0"). So a consumer waiting for
the n-th fill of a slot waits parity n & 1, and a producer waiting for the slot's (n-1)-th release before its n-th
fill waits parity (n & 1) ^ 1 (its first wait passes at once).
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier
from triton.language.core import _aggregate as aggregate

# A runtime int argument, or a constexpr where the JIT specialised it (an int equal to 1, e.g. a unit stride).
Scalar = gl.tensor | gl.constexpr


@gluon.constexpr_function
def scalar(x):
    """x as an aggregate field of type Scalar: a tensor as it is, a specialised int as a constexpr."""
    return x if isinstance(x, gl.tensor) else gl.constexpr(x)


def by_position(cls):
    """An aggregate class given the constructor that takes its annotated fields in order (triton 3.8 writes one
    itself, 3.6 does not): a Gluon value (tensor, shared memory, descriptor, aggregate) as it is, anything else (a
    specialised int, a flag, a layout) as a constexpr. Apply it below @aggregate."""
    names = tuple(cls.__annotations__)

    def __init__(self, *values):
        assert len(values) == len(names), f"{cls.__name__} takes {len(names)} fields, got {len(values)}"
        for name, value in zip(names, values):
            setattr(self, name, value if isinstance(value, gl.base_value) else gl.constexpr(value))

    cls.__init__ = gluon.constexpr_function(__init__)
    return cls


@aggregate
class Ring:
    """Shared-memory slots and their full/empty mbarrier pairs (one barrier per slot each).

    full[s]: count 1 (the producer's expect-tx arrive; the TMA's bytes complete the phase).
    empty[s]: count = the consumers that release the slot. Use n of slot s: consumers wait full[s] with parity
    n & 1; the producer waits empty[s] with parity (n & 1) ^ 1 before refilling it.
    """

    smem: gl.shared_memory_descriptor
    full: gl.shared_memory_descriptor
    empty: gl.shared_memory_descriptor

    @gluon.constexpr_function
    def __init__(self, smem, full, empty):
        self.smem = smem
        self.full = full
        self.empty = empty


@gluon.jit
def ring(smem, empty_count: gl.constexpr, slots: gl.constexpr = 0):
    """A ring over the slots of `smem` (axis 0; or `slots` of them, each several buffers of smem) with its barriers
    initialised (full count 1, empty count empty_count)."""
    SLOTS: gl.constexpr = slots if slots else smem.type.shape[0]
    full = gl.allocate_shared_memory(gl.int64, [SLOTS, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [SLOTS, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(SLOTS):
        mbarrier.init(full.index(s), count=1)
        mbarrier.init(empty.index(s), count=empty_count)
    return Ring(smem, full, empty)


@gluon.jit
def slot_phase(n, SLOTS: gl.constexpr):
    """Use n of a ring of SLOTS slots taken in turn: its slot n % SLOTS and the fill parity (n // SLOTS) & 1 a
    consumer waits for (the producer waits for the release of the use before: parity ^ 1)."""
    return n % SLOTS, (n // SLOTS) & 1


@aggregate
@by_position
class Counter:
    """The uses of a ring of SLOTS slots taken in turn, counted: use n is slot n % SLOTS, fill parity
    (n // SLOTS) & 1 (slot_phase). One object carries the ring's position through a partition's loops."""

    n: gl.tensor
    SLOTS: gl.constexpr

    @gluon.jit
    def slot(self):
        """(slot, fill parity) of the current use."""
        return slot_phase(self.n, self.SLOTS)

    @gluon.jit
    def next(self):
        return Counter(self.n + 1, self.SLOTS)


@gluon.jit
def wait_slot(ring, st, ph, PTX: gl.constexpr, FULL_AT: gl.constexpr):
    """A math warpgroup's wait for fill parity ph of ring slot st: mbarrier.wait, or (PTX) a try_wait loop in PTX at
    the full barrier's shared-memory address global_smem + FULL_AT + 8 st (mqa_cli.launch.barrier_offsets finds
    FULL_AT), which triton does not see as a barrier op and so puts no warpgroup barrier before."""
    if PTX:
        gl.inline_asm_elementwise(
            "{ .reg .pred ok; .reg .b32 at; mov.b32 at, global_smem; add.s32 at, at, $1; wait_full: "
            "mbarrier.try_wait.parity.shared::cta.b64 ok, [at], $2; @!ok bra.uni wait_full; mov.b32 $0, 0; }",
            "=r,r,r", [st * 8 + FULL_AT, ph], dtype=gl.int32, is_pure=False, pack=1)
    else:
        mbarrier.wait(ring.full.index(st), ph)


@gluon.jit
def release_slot(ring, st, PTX: gl.constexpr, EMPTY_AT: gl.constexpr):
    """A math warpgroup's release of ring slot st, after its wgmma wait and its reads of the slot: one elected thread
    arrives (triton puts a warpgroup barrier before it), or (PTX) every thread arrives in PTX at global_smem +
    EMPTY_AT + 8 st (the empty count is then 128 per consuming warpgroup)."""
    if PTX:
        gl.inline_asm_elementwise(
            "{ .reg .b32 at; mov.b32 at, global_smem; add.s32 at, at, $1; "
            "mbarrier.arrive.shared::cta.b64 _, [at]; mov.b32 $0, 0; }",
            "=r,r", [st * 8 + EMPTY_AT], dtype=gl.int32, is_pure=False, pack=1)
    else:
        mbarrier.arrive(ring.empty.index(st), count=1)

