"""From command-line problem options to what commands need: a dispatch Shape (cheap) and tensors.

Before a command allocates, `Problem.check_fits` compares what the problem takes (inputs, the logits buffer, the
reference of a check, in bytes, computed from sizes alone) with the device's memory or `--max-bytes`, and refuses
in one line (exit 2) what would not fit."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import UserError
from .paged import memory as paged_memory
from .paged import PagedSpec, counts_from_ends, spec_counts
from .prefill import Counts, ProblemSpec, check_memory, counts, counts_from_windows, row_bytes
from .prefill import memory as prefill_memory
from .shape import Shape


@dataclass
class Problem:
    """A problem as commands see it: a spec (flags) or a loaded file, what it costs, and the output asked for."""

    label: str
    shape: Shape
    counts: Counts
    spec: ProblemSpec | PagedSpec | None = None
    tensors: object = None  # Prefill or Paged, when loaded from a file
    max_seqlen_k: int = 0  # compressed logits columns (prefill), 0 = full rows
    max_bytes: int | None = None  # --max-bytes: the memory a command may use (default: the device's)

    def memory(self, reference_size: int = 0, logits_bytes: int | None = None) -> dict:
        """Bytes the problem takes on its device: inputs, logits buffer (or logits_bytes in its place: what a
        command holds instead, the bounded top-k plan), and with reference_size (4 or 8) the reference a check
        computes."""
        esize = 2 if self.shape.bf16 else 4
        if self.tensors is not None:
            ins = sum(x.numel() * x.element_size() for x in self.tensors.as_dict().values())
            cols = self.max_seqlen_k or self.shape.N
            need = {"inputs": ins, "logits": self.shape.S * row_bytes(cols, esize),
                    "reference": self.shape.S * self.shape.N * reference_size}
            need["total"] = sum(need.values())
        elif isinstance(self.spec, PagedSpec):
            need = paged_memory(self.spec, logits_size=esize, reference_size=reference_size)
        else:
            need = prefill_memory(self.spec, cols=self.max_seqlen_k or None, logits_size=esize,
                                  reference_size=reference_size)
        if logits_bytes is not None:
            need = {**need, "logits": logits_bytes}
            need["total"] = sum(v for k, v in need.items() if k != "total")
        return need

    def check_fits(self, device, reference_size: int = 0, logits_bytes: int | None = None) -> None:
        """Refuse (one line, exit 2) a problem that would not fit `device`'s memory (or --max-bytes)."""
        from .tensors import memory_of

        if self.max_bytes is not None:
            limit, where = self.max_bytes, "--max-bytes"
        else:
            limit, where = memory_of(device), f"{device} memory"
        check_memory(self.memory(reference_size, logits_bytes), limit, where)

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


def from_spec(spec, fp8: str = "e4m3fn", max_seqlen_k: int = 0, bf16: bool = False,
              max_bytes: int | None = None) -> Problem:
    if isinstance(spec, PagedSpec):
        c = spec_counts(spec)
        extra = _output_flags({"batch": spec.batch, "next_n": spec.next_n, "block_size": spec.block_size},
                              max_seqlen_k, bf16, "paged")
        shape = Shape("paged", c.S, c.N, spec.heads, spec.dim, spec.clean_logits, fp8, **extra)
        return Problem(spec.label(), shape, c, spec=spec, max_bytes=max_bytes)
    extra = _output_flags({}, max_seqlen_k, bf16, "prefill")
    shape = Shape("prefill", spec.S, spec.N, spec.heads, spec.dim, spec.clean_logits, fp8, **extra)
    return Problem(spec.label(), shape, counts(spec), spec=spec, max_seqlen_k=max_seqlen_k, max_bytes=max_bytes)


def from_file(path: str, clean_logits: bool, max_seqlen_k: int = 0, bf16: bool = False,
              max_bytes: int | None = None) -> Problem:
    from .io import file_keys, load_prefill

    if "kv_cache" in file_keys(path):  # a paged problem (keys q, kv_cache, ..., block_table)
        from .paged_tensors import load_paged

        t = load_paged(path, max_bytes)
        c = counts_from_ends(t.row_ends().tolist(), t.next_n, t.heads, t.dim, int(t.max_context_len), clean_logits)
        label = (f"{path} (paged B {t.batch}, next_n {t.next_n}, max ctx {t.max_context_len}, bs {t.block_size}, "
                 f"H {t.heads}, D {t.dim})")
        extra = _output_flags({"batch": t.batch, "next_n": t.next_n, "block_size": t.block_size}, max_seqlen_k,
                              bf16, "paged")
        shape = Shape("paged", t.S, int(t.max_context_len), t.heads, t.dim, clean_logits, t.fp8, **extra)
        return Problem(label, shape, c, tensors=t, max_bytes=max_bytes)

    t = load_prefill(path, max_bytes)
    shape = Shape("prefill", t.S, t.N, t.heads, t.dim, clean_logits, t.fp8,
                  **_output_flags({}, max_seqlen_k, bf16, "prefill"))
    c = counts_from_windows(t.S, t.N, t.heads, t.dim, t.ks.numpy(), t.ke.numpy(), clean_logits)
    return Problem(f"{path} (S {t.S}, N {t.N}, H {t.heads}, D {t.dim})", shape, c, tensors=t,
                   max_seqlen_k=max_seqlen_k, max_bytes=max_bytes)


def from_options(opts, target_fp8: str = "e4m3fn") -> Problem:
    msk = getattr(opts, "max_seqlen_k", 0) or 0
    bf16 = getattr(opts, "logits_dtype", "fp32") == "bf16"
    max_bytes = getattr(opts, "max_bytes", None)
    if max_bytes is not None and max_bytes < 1:
        raise UserError(f"--max-bytes must be >= 1, got {max_bytes}")
    if opts.input is not None:
        others = [k for k, v in vars(opts).items()
                  if v is not None and k not in ("input", "clean_logits", "paged", "max_seqlen_k", "logits_dtype",
                                                 "max_bytes")]
        if others:
            flags = ", ".join("--" + k.replace("_", "-") for k in others)
            raise UserError(f"--input takes the problem from the file; drop {flags}")
        return from_file(opts.input, opts.clean, msk, bf16, max_bytes)
    if getattr(opts, "paged", None):
        return from_spec(opts.paged_spec(), target_fp8, msk, bf16, max_bytes)
    return from_spec(opts.spec(), target_fp8, msk, bf16, max_bytes)


def with_call(prob: Problem, schedule: str | None = None, cache_block_stride: int | None = None,
              cache_layout: str | None = None) -> Problem:
    """The problem as an engine's paged call presents it: schedule_meta given or not, the cache's block stride in
    bytes (a layer of a bigger buffer), the order of its fp8 rows (aiter's pre-shuffled cache). What the plan
    decides from them is what that call runs."""
    if schedule is None and cache_block_stride is None and cache_layout is None:
        return prob
    if prob.shape.kind != "paged":
        raise UserError("--schedule, --cache-block-stride and --cache-layout describe a paged call; add --paged")
    changes = {}
    if schedule is not None:
        kind, _, ranges = schedule.partition(":")
        if kind not in ("given", "computed") or (ranges and (kind != "given" or not ranges.isdigit()
                                                             or int(ranges) < 1)):
            raise UserError(f"--schedule must be given, given:RANGES (e.g. given:66, vLLM's num_sms // 2 at next_n 4) "
                            f"or computed, got {schedule!r}")
        changes["schedule_given"] = kind == "given"
        changes["schedule_ranges"] = int(ranges or 0)
    if cache_block_stride is not None:
        dense = prob.shape.block_size * (prob.shape.dim + 4)
        if cache_block_stride < dense or cache_block_stride % 4:
            raise UserError(f"--cache-block-stride must be a multiple of 4 bytes of at least one block "
                            f"({dense} bytes), got {cache_block_stride}")
        changes["cache_block_stride"] = cache_block_stride
    if cache_layout is not None:
        if cache_layout not in ("plain", "shuffled"):
            raise UserError(f"--cache-layout must be plain or shuffled (aiter's pre-shuffled cache), got "
                            f"{cache_layout!r}")
        changes["cache_layout"] = cache_layout
    return replace(prob, shape=replace(prob.shape, **changes))
