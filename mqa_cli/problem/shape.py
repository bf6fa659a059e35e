"""The Shape dispatch reads: a problem's sizes and flags, no tensors (no torch: `explain` stays cheap)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    """What dispatch looks at: sizes and flags, never tensors."""

    kind: str  # "prefill" or "paged"
    S: int  # query rows (paged: batch * next_n)
    N: int  # kv rows (paged: max_context_len)
    heads: int
    dim: int
    clean_logits: bool = True
    fp8: str = "e4m3fn"
    batch: int = 1
    next_n: int = 1
    block_size: int = 0
    compressed: bool = False  # prefill: logits [S, max_seqlen_k] starting at each row's ks
    bf16: bool = False  # logits in bfloat16
    # paged: the call's schedule_meta is a tensor (an engine's call), not None
    schedule_given: bool = False
    # paged: the ranges a given schedule_meta splits the work into (its entries - 1; 0 where none is given)
    schedule_ranges: int = 0
    # paged: bytes from one cache block to the next (kv_cache.stride(0)); 0: dense, block_size * (dim + 4)
    cache_block_stride: int = 0
    cache_aligned: bool = True  # paged: the cache's base address is 16-byte aligned
    # paged: the order of each block's fp8 rows: "plain" (DeepGEMM's), or "shuffled" (aiter's pre-shuffled cache,
    # its Preshuffle=True: 16-token groups, 16-byte pieces of D piece-major)
    cache_layout: str = "plain"

    @property
    def out_elements(self) -> int:
        """Elements of the output buffer (rows x padded columns), before compression."""
        align = 512 if self.bf16 else 256  # 1024-byte rows, as the launcher pads them (mqa_cli.problem.prefill.ROW_BYTES)
        return self.S * (-(-self.N // align) * align)
