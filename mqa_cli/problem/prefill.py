"""ProblemSpec: sizes, layout and windows of a prefill problem, with no tensors (cheap: numpy only).

S = batch*seq query rows and N = batch*seq_kv kv rows, sequences packed one after another. Counts come in closed
form (no per-row lists), so a problem of any size is explained at once; `memory` says what running it takes,
which the commands compare with the device's memory (or --max-bytes) before allocating anything.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import UserError

LAYOUTS = ("causal", "full", "window", "cp")


@dataclass(frozen=True)
class ProblemSpec:
    batch: int = 1
    seq: int = 256
    seq_kv: int | None = None  # kv tokens per sequence; default seq // ratio (cp: 4 * seq)
    ratio: int = 1
    heads: int = 64
    dim: int = 128
    layout: str = "causal"
    window: int | None = None
    seed: int = 0
    clean_logits: bool = True

    def __post_init__(self):
        for name in ("batch", "seq", "ratio", "heads", "dim"):
            if getattr(self, name) < 1:
                raise UserError(f"--{name} must be >= 1, got {getattr(self, name)}")
        if self.layout not in LAYOUTS:
            raise UserError(f"--layout must be one of {', '.join(LAYOUTS)}, got {self.layout!r}")
        if self.seq_kv is not None and self.seq_kv < 1:
            raise UserError(f"--seq-kv must be >= 1, got {self.seq_kv}")
        if self.layout == "window" and (self.window is None or self.window < 1):
            raise UserError("--layout window needs --window W with W >= 1")
        if self.layout == "cp":
            if self.seq % 2:
                raise UserError(f"--layout cp needs an even --seq (two query chunks), got {self.seq}")
            if self.kv_len % self.seq:
                raise UserError(f"--layout cp needs --seq-kv a multiple of --seq, got {self.kv_len} and {self.seq}")
        if self.seq_kv is None and self.seq // self.ratio < 1:
            raise UserError(f"--seq {self.seq} / --ratio {self.ratio} leaves no kv tokens")

    @property
    def kv_len(self) -> int:
        """kv tokens per sequence (LK)."""
        if self.seq_kv is not None:
            return self.seq_kv
        if self.layout == "cp":
            return 4 * self.seq
        return self.seq // self.ratio

    @property
    def S(self) -> int:
        return self.batch * self.seq

    @property
    def N(self) -> int:
        return self.batch * self.kv_len

    def with_(self, **changes) -> "ProblemSpec":
        return replace(self, **changes)

    def label(self) -> str:
        """An id that reads like a bench line: s1024-n1560-h64-d128-causal-clean1."""
        extra = f"-r{self.ratio}" if self.ratio != 1 else ""
        extra += f"-w{self.window}" if self.layout == "window" else ""
        return (f"b{self.batch}-s{self.seq}-n{self.kv_len}-h{self.heads}-d{self.dim}-{self.layout}{extra}"
                f"-clean{int(self.clean_logits)}")


def sequence_windows(spec: ProblemSpec) -> tuple[list, list]:
    """Window [s, e) of each query position of one sequence, relative to its kv (pure Python: cheap to import)."""
    L, LK, R = spec.seq, spec.kv_len, spec.ratio
    if spec.layout == "full":
        return [0] * L, [LK] * L
    if spec.layout == "cp":
        # Zigzag context parallelism: this rank holds query chunks cp_id and 2*cp-1-cp_id of a
        # sequence of LK tokens split into 2*cp chunks of L/2 (cp = LK / L).
        chunk, cp = L // 2, LK // L
        cp_id = cp // 3
        e = [cp_id * chunk + p + 1 for p in range(chunk)] + [(2 * cp - 1 - cp_id) * chunk + p + 1 for p in range(chunk)]
        return [0] * L, e
    if R == 1:
        e = [min(max(p + 1 + LK - L, 1), LK) for p in range(L)]
    else:
        e = [min(max((p + 1) // R, 1), LK) for p in range(L)]
    s = [max(x - spec.window, 0) for x in e] if spec.layout == "window" else [0] * L
    return s, e


def windows(spec: ProblemSpec):
    """ks, ke (int32 numpy [S]) for the spec's layout; query position p of sequence b is row b*seq + p."""
    import numpy as np

    s, e = sequence_windows(spec)
    base = (np.arange(spec.batch, dtype=np.int64) * spec.kv_len)[:, None]
    ks = (base + np.asarray(s, np.int64)[None, :]).reshape(-1).astype(np.int32)
    ke = (base + np.asarray(e, np.int64)[None, :]).reshape(-1).astype(np.int32)
    return ks, ke


@dataclass(frozen=True)
class Counts:
    """What the problem costs: the two numbers every performance claim is measured against."""

    S: int
    N: int
    heads: int
    dim: int
    live: int
    clean_logits: bool
    flop: int = field(init=False)
    bytes: int = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "flop", 2 * self.heads * self.dim * self.live)
        inputs = self.S * self.heads * self.dim + self.N * self.dim + 4 * self.N + 4 * self.S * self.heads + 8 * self.S
        # clean: every [S, N] entry is written; otherwise only the live ones must be.
        outputs = 4 * (self.S * self.N if self.clean_logits else self.live)
        object.__setattr__(self, "bytes", inputs + outputs)

    @property
    def live_fraction(self) -> float:
        return self.live / max(1, self.S * self.N)

    @property
    def intensity(self) -> float:
        return self.flop / max(1, self.bytes)


def counts_from_windows(S, N, heads, dim, ks, ke, clean_logits=True) -> Counts:
    import numpy as np

    live = int(np.maximum(np.asarray(ke, np.int64) - np.asarray(ks, np.int64), 0).sum())
    return Counts(S, N, heads, dim, live, clean_logits)


def _sum_clamped(a: int, n: int, lo: int, hi: int) -> int:
    """sum over p in [0, n) of clamp(a + p, lo, hi), lo <= hi."""
    if n <= 0:
        return 0
    x0, x1 = a, a + n - 1
    below = max(0, min(x1, lo - 1) - x0 + 1)  # terms under lo
    above = max(0, x1 - max(x0, hi + 1) + 1)  # terms over hi
    m0, m1 = max(x0, lo), min(x1, hi)
    middle = (m0 + m1) * (m1 - m0 + 1) // 2 if m1 >= m0 else 0
    return lo * below + middle + hi * above


def _floor_sum(n: int, r: int) -> int:
    """sum over x in [0, n] of x // r (0 for n < 0)."""
    if n < 0:
        return 0
    q, m = divmod(n, r)
    return r * q * (q - 1) // 2 + q * (m + 1)


def _sum_clamped_floor(n: int, r: int, lo: int, hi: int) -> int:
    """sum over x in [1, n] of clamp(x // r, lo, hi), 1 <= lo <= hi."""
    a, b = lo * r, (hi + 1) * r - 1  # x // r lies in [lo, hi] exactly for x in [a, b]
    below = max(0, min(n, a - 1))
    top = min(n, b)
    middle = _floor_sum(top, r) - _floor_sum(a - 1, r) if top >= a else 0
    above = max(0, n - max(b, 0))
    return lo * below + middle + hi * above


def live_per_sequence(spec: ProblemSpec) -> int:
    """sum over the queries of one sequence of their window lengths, in closed form (sequence_windows' rule)."""
    L, LK, R = spec.seq, spec.kv_len, spec.ratio
    if spec.layout == "full":
        return L * LK
    if spec.layout == "cp":
        chunk, cp = L // 2, LK // L
        cp_id = cp // 3
        return _sum_clamped(cp_id * chunk + 1, chunk, 0, 2 * LK) + \
            _sum_clamped((2 * cp - 1 - cp_id) * chunk + 1, chunk, 0, 2 * LK)
    hi = min(LK, spec.window) if spec.layout == "window" else LK  # a window keeps min(e, W) of e's tokens
    if R == 1:
        return _sum_clamped(1 + LK - L, L, 1, hi)
    return _sum_clamped_floor(L, R, 1, hi)


def counts(spec: ProblemSpec) -> Counts:
    return Counts(spec.S, spec.N, spec.heads, spec.dim, spec.batch * live_per_sequence(spec), spec.clean_logits)


# The logits buffer's rows are padded to a multiple of ROW_BYTES, as DeepGEMM pads them (256 fp32 or 512 bf16
# elements): one of vLLM's top-k backends needs a 1024-byte row stride, and whole kv tiles store without column masks.
# Kept here, below mqa_cli.launch.common (which allocates the buffer), so the size checks count what it allocates.
ROW_BYTES = 1024
ROW_ALIGN = ROW_BYTES // 4  # elements, fp32


def padded_stride(cols: int, align: int = ROW_ALIGN) -> int:
    """The row stride of a [*, cols] logits buffer whose rows are padded to `align` elements."""
    return max(align, -(-cols // align) * align)


def row_bytes(cols: int, size: int = 4) -> int:
    """Bytes of one padded row of a [*, cols] logits buffer of `size`-byte elements."""
    return padded_stride(cols, ROW_BYTES // size) * size


def memory(spec: ProblemSpec, *, cols: int | None = None, logits_size: int = 4, reference_size: int = 0) -> dict:
    """Bytes running the problem takes (no tensor made): its inputs while generated (fp8 q and kv from fp32
    randn), the row-padded logits buffer ([S, cols], cols = N or max_seqlen_k) and, with reference_size (4 or 8:
    a check), the [S, N] reference."""
    S, N, H, D = spec.S, spec.N, spec.heads, spec.dim
    held = S * H * D + N * D + 4 * N + 4 * S * H + 8 * S
    inputs = held + 4 * max(S * H * D, N * D)  # the larger fp32 staging tensor, while it is cast to fp8
    logits = S * row_bytes(N if cols is None else cols, logits_size)
    reference = S * N * reference_size
    return {"inputs": inputs, "logits": logits, "reference": reference, "total": inputs + logits + reference}


def check_memory(need: dict, limit: int | None, where: str) -> None:
    """Refuse (exit 2) a problem whose memory passes `limit`, naming the bytes each part needs."""
    if limit is None or need["total"] <= limit:
        return
    parts = ", ".join(f"{k} {v:,}" for k, v in need.items() if k != "total" and v)
    raise UserError(f"the problem needs {need['total']:,} bytes ({parts}), more than the {limit:,} bytes of {where}")


def summary_rows(c: Counts) -> list[tuple[str, str]]:
    """The problem summary every command prints."""
    return [
        ("S x N", f"{c.S:,} x {c.N:,}"),
        ("H, D", f"{c.heads}, {c.dim}"),
        ("live pairs", f"{c.live:,} ({100 * c.live_fraction:.1f} %)"),
        ("FLOP", f"{c.flop:,} ({c.flop / 1e12:.3f} T)"),
        ("min bytes", f"{c.bytes:,} ({c.bytes / 1e6:.1f} MB)"),
        ("intensity", f"{c.intensity:.1f} FLOP/B"),
    ]
