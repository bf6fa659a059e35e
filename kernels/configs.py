"""Kernel configs as data (no triton import, so dispatch and `explain` stay cheap).

A KernelConfig holds everything that makes one compiled variant differ: the constexprs
(which also name it, see naming.py), the launch options and the runtime schedule.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .naming import kernel_name


@dataclass(frozen=True)
class KernelConfig:
    kernel: str  # the entry kernel's base name (module attribute in mqa_kernels.<module>)
    module: str  # mqa_kernels submodule holding it
    keys: tuple  # constexpr keys that name the compiled kernel
    constexprs: dict = field(hash=False)
    options: dict = field(hash=False)  # num_warps, num_stages, target options
    schedule: dict = field(default_factory=dict, hash=False)  # runtime choices (grid splits, ...)

    @property
    def name(self) -> str:
        """The config-aware symbol the kernel compiles to."""
        return kernel_name(self.kernel, self.keys, self.constexprs)

    @property
    def dump_name(self) -> str:
        """num_warps / num_stages are launch options, not constexprs: the dump folder carries them."""
        return f"{self.name}_w{self.options.get('num_warps', 4)}_s{self.options.get('num_stages', 1)}"

    def as_dict(self) -> dict:
        return {"kernel": self.kernel, "name": self.name, "constexprs": dict(self.constexprs),
                "options": dict(self.options), "schedule": dict(self.schedule)}


def _pow2_ceil(x: int) -> int:
    return 1 << max(0, (max(1, x) - 1).bit_length())


TILED_KEYS = ("H", "D", "BLOCK_Q", "BLOCK_KV", "CLEAN")


def tiled_config(*, heads: int, dim: int, S: int, N: int, clean: bool, backend: str, units: int | None) -> KernelConfig:
    """Portable kernel: BLOCK_Q query rows x heads = the MMA's N (256 when it fits), kv tile = M."""
    block_q = max(1, min(256 // heads, _pow2_ceil(S)))
    block_q = max(block_q, _pow2_ceil(max(1, 16 // heads)))  # tl.dot needs N >= 16
    block_kv = 64
    if backend == "hip":
        options = {"num_warps": 4, "num_stages": 2, "waves_per_eu": 2, "matrix_instr_nonkdim": 16}
    elif backend == "cuda":
        options = {"num_warps": 4, "num_stages": 3}
    else:
        options = {"num_warps": 4, "num_stages": 1}
    q_blocks = -(-S // block_q)
    kv_tiles = -(-N // block_kv)
    # Split kv across grid axis 1 only when query blocks alone cannot fill the device.
    want = 2 * (units or 1)
    splits = 1 if q_blocks >= want else min(kv_tiles, -(-want // q_blocks))
    constexprs = {"H": heads, "D": dim, "BLOCK_Q": block_q, "BLOCK_KV": block_kv, "CLEAN": bool(clean)}
    return KernelConfig("mqa_logits_tiled", "prefill_tiled", TILED_KEYS, constexprs, options,
                        {"kv_splits": max(1, splits), "q_blocks": q_blocks})


H64D128_KEYS = ("H", "D", "BLOCK_Q", "BLOCK_KV", "CLEAN", "EVEN_S", "ORDER", "DEAD_MULT")

# Tuned per target: (BLOCK_Q, BLOCK_KV, options). sm90 from the H200 sweeps in docs/PERFORMANCE.md;
# gfx950 follows the seed's variant (4 query rows folded into the MMA, triple buffering).
H64D128_TUNED = {
    "sm90": (4, 64, {"num_warps": 4, "num_stages": 3}),
    "sm100": (4, 64, {"num_warps": 4, "num_stages": 3}),
    "gfx950": (4, 64, {"num_warps": 4, "num_stages": 3, "waves_per_eu": 1, "matrix_instr_nonkdim": 16}),
    "gfx942": (4, 64, {"num_warps": 4, "num_stages": 2, "waves_per_eu": 1, "matrix_instr_nonkdim": 16}),
    "cpu": (4, 64, {"num_warps": 4, "num_stages": 1}),
}


def h64d128_config(*, heads: int, dim: int, S: int, clean: bool, target: str, N: int | None = None) -> KernelConfig:
    """Specialised kernel: BLOCK_Q x heads = the MMA's N (256), interior tiles unmasked, ordered blocks.

    Block order (H200 sweep, docs/PERFORMANCE.md): last-first for causal-like rows; when queries
    outnumber kv rows twice or more (the compressed ratio-4 indexer: short rows, mostly -inf),
    zigzag with one-tile -inf stores measured 768 µs against 877 for last-first (4x8192 ratio 4).
    """
    block_q, block_kv, options = H64D128_TUNED.get(target, H64D128_TUNED["sm90"])
    block_q = max(1, block_q * 64 // heads)  # keep BLOCK_Q x heads at 256 (H = 32: 8 rows)
    compressed = N is not None and S >= 2 * N
    constexprs = {"H": heads, "D": dim, "BLOCK_Q": block_q, "BLOCK_KV": block_kv, "CLEAN": bool(clean),
                  "EVEN_S": S % block_q == 0, "ORDER": 2 if compressed else 1, "DEAD_MULT": 1 if compressed else 4}
    return KernelConfig("mqa_logits_h64d128", "prefill_h64d128", H64D128_KEYS, constexprs, dict(options),
                        {"q_blocks": -(-S // block_q)})
