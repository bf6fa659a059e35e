"""triton's compiled CUDA launcher, called without its Python wrapper: the fast path's last host µs a call.

Why: on a repeated decode call most of the host time goes to triton's per-call wrapper, not to the launch
(H200 host, 2026-12-01: 17 µs of a 37 µs call). The wrapper (CudaLauncher.__call__ and the closure that expands
TMA descriptor arguments) loops over every argument in Python and encodes every descriptor again on every call.
What it does is fixed by the compiled kernel, except the descriptors' encodings; and a descriptor object passed
again (the kv cache's, which mqa_cli.launch.paged_ws_sm90 keeps per cache) encodes to the same bytes.

`unwrap` finds the C launcher and the descriptor positions inside the wrapper, in either of the two forms triton
has built it in (found by what the launcher object holds, not by version string: versions.py names them
launcher_3_6 and launcher_3_8):
- 3.6: `launch(grid x/y/z, stream, function, cooperative, pdl, global scratch, profile scratch, kernel metadata,
  launch metadata, enter hook, exit hook, *kernel args)`, the wrapper's closure holding the descriptors' positions
  (`tensordesc_indices`) and metadata;
- 3.8 and 3.9: `launch(grid x/y/z, stream, function, cooperative, pdl, kernel metadata, launch metadata, enter hook,
  exit hook, global scratch, profile scratch, arg annotations, kernel signature, kernel args)`, each descriptor
  expanded in place in the one tuple; the closure holds the descriptor paths (`relevant_paths`) and metadata, and
  the CudaLauncher the annotations and signature.
`Direct` calls the launcher with the arguments laid out as the wrapper lays them out. A descriptor's encoding (triton's make_tensordesc_arg) reads
only its base address, shape, strides and padding, the rest coming from the compiled kernel; so a descriptor equal
in those four to the one at its position in the call before reuses that encoding (an engine's next decode step
passes the same cache, and often q at the same address). Whatever is not as expected (another triton, scratch
memory, a launcher without the wrapper's closure) gives None, and the caller keeps triton's own path.
"""
from __future__ import annotations

BASE_ARGS = 13  # the wrapper's fixed leading arguments in triton 3.6 (_BASE_ARGS_FORMAT_LEN)
FREEVARS_3_6 = {"launcher", "tensordesc_indices", "tensordesc_meta"}
FREEVARS_3_8 = {"launcher", "make_tensordesc_arg", "relevant_paths", "signature", "tensordesc_meta"}


class Direct:
    """The compiled C launcher with the wrapper's fixed arguments, and the last encoding of each descriptor (by
    what the encoding reads of it). `form` is "3.6" or "3.8" (the launcher's argument layout, module docstring)."""

    __slots__ = ("launcher", "coop", "pdl", "descs", "encode", "last", "form", "annotations", "kernel_signature")

    def _kernel_args(self, args: tuple) -> list:
        """The kernel's arguments with each descriptor replaced by its encoding (kept from the call before where
        what the encoding reads is the same)."""
        out = []
        start = 0
        last = self.last
        for k, (pos, meta) in enumerate(self.descs):
            out.extend(args[start:pos])
            desc = args[pos]
            if meta is None:  # the frontend's decomposition, which carries the base tensor itself: never kept
                out.extend(self.encode(desc, meta))
            else:
                key = (desc.base.data_ptr(), tuple(desc.shape), tuple(desc.strides), desc.padding)
                hit = last[k]
                if hit[0] != key:
                    hit = last[k] = (key, self.encode(desc, meta))
                out.extend(hit[1])
            start = pos + 1
        out.extend(args[start:])
        return out

    def __call__(self, gx: int, gy: int, gz: int, stream: int, function, packed, args: tuple) -> None:
        """Launch on `stream` with the kernel's full argument tuple (runtime arguments, then constexprs)."""
        kernel_args = self._kernel_args(args) if self.descs else args
        if self.form == "3.6":
            self.launcher(gx, gy, gz, stream, function, self.coop, self.pdl, None, None, packed, None, None, None,
                          *kernel_args)
        else:
            self.launcher(gx, gy, gz, stream, function, self.coop, self.pdl, packed, None, None, None, None, None,
                          self.annotations, self.kernel_signature, kernel_args)  # (a list where descriptors
            # were expanded, the argument tuple itself where none: as the wrapper and CudaLauncher pass them)


def unwrap(compiled) -> Direct | None:
    """A Direct for this compiled kernel, or None where its launcher is neither form of CudaLauncher as known."""
    run = getattr(compiled, "run", None)
    if type(run).__name__ != "CudaLauncher" or getattr(run, "num_ctas", 1) != 1:
        return None
    if getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1):
        return None  # the wrapper allocates scratch per launch
    if getattr(run, "gsan_enabled", False):
        return None  # the sanitizer appends arguments of its own
    try:
        from triton.backends.nvidia import driver
    except ImportError:
        return None
    form = launcher_form(run, driver)
    if form is None:
        return None
    wrapped = run.launch
    code, cells = getattr(wrapped, "__code__", None), getattr(wrapped, "__closure__", None)
    if code is None:  # no descriptor argument: the C launcher itself
        launcher, descs = wrapped, []
    else:
        freevars = FREEVARS_3_6 if form == "3.6" else FREEVARS_3_8
        if cells is None or set(code.co_freevars) != freevars:
            return None
        free = dict(zip(code.co_freevars, (c.cell_contents for c in cells)))
        launcher, metas = free["launcher"], free["tensordesc_meta"]
        if form == "3.6":
            positions = sorted(free["tensordesc_indices"])
        else:
            paths = free["relevant_paths"]
            if any(sub for sub in paths.values()):  # a descriptor inside a tuple argument: not laid out here
                return None
            positions = sorted(paths)
        if metas is None:
            metas = [None] * len(positions)
        if len(metas) != len(positions):
            return None
        descs = list(zip(positions, metas))  # the wrapper takes the metadata in order of position
    d = Direct()
    d.form = form
    d.launcher, d.coop, d.pdl = launcher, run.launch_cooperative_grid, run.launch_pdl
    d.descs = descs
    d.encode = driver.make_tensordesc_arg if form == "3.6" else (lambda desc, meta: driver.make_tensordesc_arg(
        desc, meta, None))
    d.annotations, d.kernel_signature = getattr(run, "arg_annotations", None), getattr(run, "kernel_signature", None)
    d.last = [(None, None)] * len(descs)
    return d


def launcher_form(run, driver) -> str | None:
    """'3.6' or '3.8': the argument layout of this CudaLauncher's C launch, by what it holds (3.8 and 3.9 keep the
    kernel's annotations and signature beside the launch; 3.6 has a fixed-length base-argument format), or None."""
    if hasattr(run, "arg_annotations") and hasattr(run, "kernel_signature"):
        return "3.8"
    if getattr(driver, "_BASE_ARGS_FORMAT_LEN", None) == BASE_ARGS:
        return "3.6"
    return None
