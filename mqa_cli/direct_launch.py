"""triton 3.6's compiled CUDA launcher, called without its Python wrapper: the fast path's last host µs a call.

Why: on a repeated decode call most of the host time goes to triton's per-call wrapper, not to the launch
(H200 host, 2026-12-01: 17 µs of a 37 µs call). The wrapper (CudaLauncher.__call__ and the closure that expands
TMA descriptor arguments) loops over every argument in Python and encodes every descriptor again on every call.
What it does is fixed by the compiled kernel, except the descriptors' encodings; and a descriptor object passed
again (the kv cache's, which mqa_cli.launch_paged_ws keeps per cache) encodes to the same bytes.

`unwrap` finds the C launcher and the descriptor positions inside the wrapper. `Direct` calls the launcher with
the arguments laid out as the wrapper lays them out. A descriptor's encoding (triton's make_tensordesc_arg) reads
only its base address, shape, strides and padding, the rest coming from the compiled kernel; so a descriptor equal
in those four to the one at its position in the call before reuses that encoding (an engine's next decode step
passes the same cache, and often q at the same address). Whatever is not as expected (another triton, scratch
memory, a launcher without the wrapper's closure) gives None, and the caller keeps triton's own path.
"""
from __future__ import annotations

BASE_ARGS = 13  # the wrapper's fixed leading arguments in triton 3.6 (_BASE_ARGS_FORMAT_LEN)


class Direct:
    """The compiled C launcher with the wrapper's fixed arguments, and the last encoding of each descriptor (by
    what the encoding reads of it)."""

    __slots__ = ("launcher", "coop", "pdl", "descs", "encode", "last")

    def __call__(self, gx: int, gy: int, gz: int, stream: int, function, packed, args: tuple) -> None:
        """Launch on `stream` with the kernel's full argument tuple (runtime arguments, then constexprs)."""
        final = [gx, gy, gz, stream, function, self.coop, self.pdl, None, None, packed, None, None, None]
        start = 0
        last = self.last
        for k, (pos, meta) in enumerate(self.descs):
            final.extend(args[start:pos])
            desc = args[pos]
            if meta is None:  # the frontend's decomposition, which carries the base tensor itself: never kept
                final.extend(self.encode(desc, meta))
            else:
                key = (desc.base.data_ptr(), tuple(desc.shape), tuple(desc.strides), desc.padding)
                hit = last[k]
                if hit[0] != key:
                    hit = last[k] = (key, self.encode(desc, meta))
                final.extend(hit[1])
            start = pos + 1
        final.extend(args[start:])
        self.launcher(*final)


def unwrap(compiled) -> Direct | None:
    """A Direct for this compiled kernel, or None where its launcher is not triton 3.6's CudaLauncher as known."""
    run = getattr(compiled, "run", None)
    if type(run).__name__ != "CudaLauncher" or getattr(run, "num_ctas", 1) != 1:
        return None
    if getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1):
        return None  # the wrapper allocates scratch per launch
    try:
        from triton.backends.nvidia import driver
    except ImportError:
        return None
    if getattr(driver, "_BASE_ARGS_FORMAT_LEN", None) != BASE_ARGS:
        return None
    wrapped = run.launch
    code, cells = getattr(wrapped, "__code__", None), getattr(wrapped, "__closure__", None)
    if code is None:  # no descriptor argument: the C launcher itself
        launcher, descs = wrapped, []
    else:
        if cells is None or set(code.co_freevars) != {"launcher", "tensordesc_indices", "tensordesc_meta"}:
            return None
        free = dict(zip(code.co_freevars, (c.cell_contents for c in cells)))
        launcher, positions, metas = free["launcher"], sorted(free["tensordesc_indices"]), free["tensordesc_meta"]
        if len(metas) != len(positions):
            return None
        descs = list(zip(positions, metas))  # the wrapper takes the metadata in order of position
    d = Direct()
    d.launcher, d.coop, d.pdl = launcher, run.launch_cooperative_grid, run.launch_pdl
    d.descs, d.encode = descs, driver.make_tensordesc_arg
    d.last = [(None, None)] * len(descs)
    return d
