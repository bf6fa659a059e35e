"""From command-line problem options to what commands need: a dispatch Shape (cheap) and tensors."""
from __future__ import annotations

from dataclasses import dataclass

from .dispatch import Shape
from .errors import UserError
from .paged_problem import PagedSpec, counts_from_ends, spec_counts
from .problem import Counts, ProblemSpec, counts, counts_from_windows


@dataclass
class Problem:
    """A problem as commands see it: a spec (flags) or a loaded file, what it costs, and the output asked for."""

    label: str
    shape: Shape
    counts: Counts
    spec: ProblemSpec | PagedSpec | None = None
    tensors: object = None  # Prefill or Paged, when loaded from a file
    max_seqlen_k: int = 0  # compressed logits columns (prefill), 0 = full rows

    def materialise(self, device):
        """The input tensors on `device` (random from the spec's seed, or the loaded ones)."""
        if self.tensors is not None:
            return self.tensors.to(device)
        if isinstance(self.spec, PagedSpec):
            from .paged_tensors import random_paged

            return random_paged(self.spec, device=device, fp8=self.shape.fp8)
        from .tensors import random_prefill

        return random_prefill(self.spec, device=device, fp8=self.shape.fp8)


def _output_flags(shape_kwargs: dict, max_seqlen_k: int, bf16: bool, kind: str) -> dict:
    if max_seqlen_k < 0:
        raise UserError(f"--max-seqlen-k must be >= 0, got {max_seqlen_k}")
    if max_seqlen_k and kind == "paged":
        raise UserError("--max-seqlen-k (compressed logits) is a prefill option; paged logits are [B*next_n, "
                        "max_context_len]")
    return {**shape_kwargs, "compressed": max_seqlen_k > 0, "bf16": bf16}


def from_spec(spec, fp8: str = "e4m3fn", max_seqlen_k: int = 0, bf16: bool = False) -> Problem:
    if isinstance(spec, PagedSpec):
        c = spec_counts(spec)
        extra = _output_flags({"batch": spec.batch, "next_n": spec.next_n, "block_size": spec.block_size},
                              max_seqlen_k, bf16, "paged")
        shape = Shape("paged", c.S, c.N, spec.heads, spec.dim, spec.clean_logits, fp8, **extra)
        return Problem(spec.label(), shape, c, spec=spec)
    extra = _output_flags({}, max_seqlen_k, bf16, "prefill")
    shape = Shape("prefill", spec.S, spec.N, spec.heads, spec.dim, spec.clean_logits, fp8, **extra)
    return Problem(spec.label(), shape, counts(spec), spec=spec, max_seqlen_k=max_seqlen_k)


def from_file(path: str, clean_logits: bool, max_seqlen_k: int = 0, bf16: bool = False) -> Problem:
    from .io import file_keys, load_prefill

    if "kv_cache" in file_keys(path):  # a paged problem (keys q, kv_cache, ..., block_table)
        from .paged_tensors import load_paged

        t = load_paged(path)
        c = counts_from_ends(t.row_ends().tolist(), t.next_n, t.heads, t.dim, int(t.max_context_len), clean_logits)
        label = (f"{path} (paged B {t.batch}, next_n {t.next_n}, max ctx {t.max_context_len}, bs {t.block_size}, "
                 f"H {t.heads}, D {t.dim})")
        extra = _output_flags({"batch": t.batch, "next_n": t.next_n, "block_size": t.block_size}, max_seqlen_k,
                              bf16, "paged")
        shape = Shape("paged", t.S, int(t.max_context_len), t.heads, t.dim, clean_logits, t.fp8, **extra)
        return Problem(label, shape, c, tensors=t)

    t = load_prefill(path)
    shape = Shape("prefill", t.S, t.N, t.heads, t.dim, clean_logits, t.fp8,
                  **_output_flags({}, max_seqlen_k, bf16, "prefill"))
    c = counts_from_windows(t.S, t.N, t.heads, t.dim, t.ks.numpy(), t.ke.numpy(), clean_logits)
    return Problem(f"{path} (S {t.S}, N {t.N}, H {t.heads}, D {t.dim})", shape, c, tensors=t,
                   max_seqlen_k=max_seqlen_k)


def from_options(opts, target_fp8: str = "e4m3fn") -> Problem:
    msk = getattr(opts, "max_seqlen_k", 0) or 0
    bf16 = getattr(opts, "logits_dtype", "fp32") == "bf16"
    if opts.input is not None:
        others = [k for k, v in vars(opts).items()
                  if v is not None and k not in ("input", "clean_logits", "paged", "max_seqlen_k", "logits_dtype")]
        if others:
            flags = ", ".join("--" + k.replace("_", "-") for k in others)
            raise UserError(f"--input takes the problem from the file; drop {flags}")
        return from_file(opts.input, opts.clean, msk, bf16)
    if getattr(opts, "paged", None):
        return from_spec(opts.paged_spec(), target_fp8, msk, bf16)
    return from_spec(opts.spec(), target_fp8, msk, bf16)
