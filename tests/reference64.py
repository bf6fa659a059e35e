"""A float64 reference for the API tests, written from the contract alone (it shares no code with
mqa_cli.check.reference, so the tests judge the library against an independent computation).

logit(i, j) = sum_h w[i, h] * relu(q[i, h] . kv[j]) * scale[j], with every input dequantised exactly
(fp8 -> float64). Next to each reference the helpers return `mag`, the same sum with |w|: an upper
bound of |logit| and the natural scale of a rounding error, so tolerances stay meaningful for logits
that cancel to near zero.

Also here: random inputs, the paged cache byte layout, and `assert_logits`, the one comparison every
test uses (exact -inf pattern when clean, every live entry finite, error within rtol * mag).
"""
from __future__ import annotations

import torch

FP8 = torch.float8_e4m3fn
NEG_INF = float("-inf")


# ------------------------------------------------------------------------------------------ inputs

def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


def fp8_rows(n: int, d: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """n fp8 rows of width d with positive fp32 per-row scales (amax / 448), like a per-token cast."""
    x = torch.randn(n, d, generator=g)
    scale = x.abs().amax(dim=1).clamp_min(1e-4) / 448.0
    return (x / scale[:, None]).to(FP8), scale.float()


def fp8_q(shape, g: torch.Generator) -> torch.Tensor:
    return torch.randn(*shape, generator=g).to(FP8)


def inside(x: torch.Tensor, shape, at, fill) -> torch.Tensor:
    """x as the view big[at] of a bigger tensor `big` of `shape` whose other entries hold `fill` (an fp8 tensor's:
    that byte): the row slices, padded rows, strided columns and sub-blocks engines pass."""
    big = torch.full(tuple(shape), fill, dtype=torch.uint8 if x.dtype == FP8 else x.dtype, device=x.device)
    big = big.view(FP8) if x.dtype == FP8 else big
    big[at] = x
    return big[at]


# ------------------------------------------------------------------------------------------ prefill

def _scores64(q, kv, scales, weights):
    """[S, N] logits and magnitudes in float64; q [S, H, D], kv [N, D], scales [N], weights [S, H]."""
    qd = q.to(torch.float64)
    kd = kv.to(torch.float64)
    dots = torch.einsum("shd,nd->shn", qd, kd).clamp_min(0) * scales.to(torch.float64)[None, None, :]
    w = weights.to(torch.float64)
    return torch.einsum("shn,sh->sn", dots, w), torch.einsum("shn,sh->sn", dots, w.abs())


def prefill64(q, kv, kv_scales, weights, ks, ke):
    """Full-form reference: (logits [S, N] float64 with -inf outside [ks, ke), mag [S, N])."""
    kv_scales = kv_scales.reshape(-1)
    logits, mag = _scores64(q, kv, kv_scales, weights)
    N = kv.shape[0]
    j = torch.arange(N)[None, :]
    live = (j >= ks.long()[:, None]) & (j < ke.long()[:, None])
    return logits.masked_fill(~live, NEG_INF), mag.masked_fill(~live, 0.0)


def compress64(full: torch.Tensor, mag: torch.Tensor, ks, ke, width: int):
    """Compressed form of a full reference: row i, column c = full[i, ks[i] + c] for c < ke[i] - ks[i]."""
    S = full.shape[0]
    out = torch.full((S, width), NEG_INF, dtype=torch.float64)
    mout = torch.zeros(S, width, dtype=torch.float64)
    for i in range(S):
        a, b = int(ks[i]), int(ke[i])
        n = max(0, b - a)
        out[i, :n] = full[i, a:a + n]
        mout[i, :n] = mag[i, a:a + n]
    return out, mout


# ------------------------------------------------------------------------------------------ paged

def paged_ends(context_lens: torch.Tensor, next_n: int) -> torch.Tensor:
    """int64 [B, next_n]: one past the last kv token each query row sees.

    1-D lengths: row t of sequence b is draft token t of next_n, so it sees k < ctx[b] - next_n + t + 1
    (DeepGEMM's k <= ctx - next_n + t); 2-D lengths: row (b, t) sees k < ctx[b, t]. Never below 0."""
    ctx = context_lens.long()
    if ctx.dim() == 2:
        return ctx.clamp_min(0)
    t = torch.arange(next_n)
    return (ctx[:, None] - next_n + t[None, :] + 1).clamp_min(0)


def pack_blocks(kv_blocks: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """fp8 [nb, bs, D] and fp32 [nb, bs] -> uint8 [nb, bs * (D + 4)]: a block's bs*D fp8 bytes
    (token-major), then its bs fp32 scales (DeepGEMM's cache layout)."""
    nb, bs, D = kv_blocks.shape
    data = kv_blocks.contiguous().view(torch.uint8).reshape(nb, bs * D)
    sf = scales.float().contiguous().view(torch.uint8).reshape(nb, bs * 4)
    return torch.cat([data, sf], dim=1)


def paged64(q, kv_blocks, scales, weights, ends, block_table, max_context_len: int):
    """Paged reference from the unpacked cache contents (never from the byte layout).

    q [B, next_n, H, D] fp8; kv_blocks [nb, bs, D] fp8; scales [nb, bs] fp32; weights [B*next_n, H];
    ends [B, next_n] (paged_ends); block_table [B, >= blocks needed]. Returns (logits, mag), both
    [B*next_n, max_context_len] float64, logits -inf where k >= end."""
    B, T, H, D = q.shape
    nb, bs, _ = kv_blocks.shape
    out = torch.full((B * T, max_context_len), NEG_INF, dtype=torch.float64)
    mag = torch.zeros(B * T, max_context_len, dtype=torch.float64)
    for b in range(B):
        e_max = int(ends[b].max())
        if e_max == 0:
            continue
        k = torch.arange(e_max)
        blocks = block_table[b].long()[k // bs]
        kv = kv_blocks[blocks, k % bs]  # [e_max, D]
        sf = scales[blocks, k % bs]
        lg, mg = _scores64(q[b], kv, sf, weights[b * T:(b + 1) * T])
        for t in range(T):
            e = int(ends[b, t])
            out[b * T + t, :e] = lg[t, :e]
            mag[b * T + t, :e] = mg[t, :e]
    return out, mag


# ------------------------------------------------------------------------------------------ checks

FP32_RTOL = 2e-3
# bf16 keeps 8 significant bits: rounding to nearest (GPU) is within 2^-8 of |logit| <= mag, the Triton
# interpreter's truncation within 2^-7; the rest is headroom for the fp32 accumulation before it.
BF16_RTOL = 1e-2


def assert_logits(out: torch.Tensor, ref: torch.Tensor, mag: torch.Tensor, clean: bool, dtype=torch.float32,
                  rtol: float | None = None, what: str = "") -> None:
    """The library's logits `out` against a float64 reference.

    clean: dead entries (-inf in ref) must be exactly -inf and live ones never -inf; not clean: dead
    entries are unspecified and not looked at. Every live entry must be finite and within
    rtol * mag (+ a tiny absolute floor for logits that are exactly 0)."""
    assert out.dtype == dtype, f"{what}logits dtype {out.dtype}, expected {dtype}"
    assert tuple(out.shape) == tuple(ref.shape), f"{what}logits shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
    if rtol is None:
        rtol = BF16_RTOL if dtype == torch.bfloat16 else FP32_RTOL
    o = out.detach().to("cpu", torch.float64)
    live = torch.isfinite(ref)
    if clean:
        bad = torch.isneginf(o) != ~live
        if bad.any():
            i, j = (int(x) for x in bad.nonzero()[0])
            raise AssertionError(f"{what}-inf pattern differs at [{i}, {j}]: got {o[i, j].item()}, "
                                 f"reference {ref[i, j].item()} ({int(bad.sum())} entries differ)")
    ol, rl, ml = o[live], ref[live], mag[live]
    nonfinite = ~torch.isfinite(ol)
    assert not nonfinite.any(), f"{what}{int(nonfinite.sum())} live entries are not finite"
    err = (ol - rl).abs()
    limit = rtol * ml + 1e-30
    if (err > limit).any():
        k = int((err / limit).argmax())
        raise AssertionError(f"{what}{int((err > limit).sum())} of {ol.numel()} live entries off: worst got "
                             f"{ol[k].item():.6g}, reference {rl[k].item():.6g}, |err| {err[k].item():.3g} > "
                             f"{rtol:g} * mag {ml[k].item():.3g}")


def assert_same(a: torch.Tensor, b: torch.Tensor, live: torch.Tensor | None = None, what: str = "") -> None:
    """Two library results for the same problem: equal dtype and shape, equal -inf pattern, values equal
    up to fp32 reassociation (a view may be read through another code path). With `live`, only those
    entries are compared (results without clean_logits)."""
    assert a.dtype == b.dtype and a.shape == b.shape, f"{what}{a.dtype}{tuple(a.shape)} vs {b.dtype}{tuple(b.shape)}"
    x, y = a.double(), b.double()
    if live is None:
        assert torch.equal(torch.isneginf(x), torch.isneginf(y)), f"{what}-inf patterns differ"
        live = torch.isfinite(y)
    x, y = x[live], y[live]
    assert torch.isfinite(x).all(), f"{what}non-finite live entries"
    scale = y.abs().max().item() if y.numel() else 0.0
    tol = 1e-5 * scale + 1e-30 if a.dtype == torch.float32 else 8e-3 * scale + 1e-30
    assert torch.allclose(x, y, rtol=1e-5, atol=tol), f"{what}values differ: max |diff| {(x - y).abs().max().item():.3g}"
