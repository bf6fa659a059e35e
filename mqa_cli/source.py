"""From command-line problem options to what commands need: a dispatch Shape (cheap) and tensors."""
from __future__ import annotations

from dataclasses import dataclass

from .dispatch import Shape
from .errors import UserError
from .problem import Counts, ProblemSpec, counts, counts_from_windows


@dataclass
class Problem:
    """A problem as commands see it: a spec (flags) or a loaded file, and what it costs."""

    label: str
    shape: Shape
    counts: Counts
    spec: ProblemSpec | None = None
    tensors: object = None  # Prefill, when loaded from a file

    def materialise(self, device):
        """The input tensors on `device` (random from the spec's seed, or the loaded ones)."""
        if self.tensors is not None:
            return self.tensors.to(device)
        if hasattr(self.spec, "materialise"):  # a PagedSpec
            return self.spec.materialise(device, self.shape.fp8)
        from .tensors import random_prefill

        return random_prefill(self.spec, device=device, fp8=self.shape.fp8)


def from_spec(spec: ProblemSpec, fp8: str = "e4m3fn") -> Problem:
    from .paged import PagedSpec, problem_from_spec

    if isinstance(spec, PagedSpec):
        return problem_from_spec(spec, fp8)
    shape = Shape("prefill", spec.S, spec.N, spec.heads, spec.dim, spec.clean_logits, fp8)
    return Problem(spec.label(), shape, counts(spec), spec=spec)


def from_file(path: str, clean_logits: bool) -> Problem:
    from .io import file_keys, load_prefill

    if "kv_cache" in file_keys(path):  # a paged problem (keys q, kv_cache, ..., block_table)
        from .paged import problem_from_file

        return problem_from_file(path, clean_logits)

    t = load_prefill(path)
    shape = Shape("prefill", t.S, t.N, t.heads, t.dim, clean_logits, t.fp8)
    c = counts_from_windows(t.S, t.N, t.heads, t.dim, t.ks.numpy(), t.ke.numpy(), clean_logits)
    return Problem(f"{path} (S {t.S}, N {t.N}, H {t.heads}, D {t.dim})", shape, c, tensors=t)


def from_options(opts, target_fp8: str = "e4m3fn") -> Problem:
    if opts.input is not None:
        others = [k for k, v in vars(opts).items() if v is not None and k not in ("input", "clean_logits", "paged")]
        if others:
            flags = ", ".join("--" + k.replace("_", "-") for k in others)
            raise UserError(f"--input takes the problem from the file; drop {flags}")
        return from_file(opts.input, opts.clean)
    if getattr(opts, "paged", None):
        return from_spec(opts.paged_spec(), target_fp8)
    return from_spec(opts.spec(), target_fp8)
