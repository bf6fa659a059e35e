"""Inputs, float32 references and comparisons of the card's checks (tests/gpu). Only the public API is called
(mqa_cli.fp8_mqa_logits, fp8_paged_mqa_logits, ...), with the arguments engines pass; the inputs are random and
non-zero, the references float32 on the card."""
from __future__ import annotations

import torch

import mqa_cli

DEV = "cuda"
FP8 = torch.float8_e4m3fn
INT31 = 2 ** 31
NEG_INF = float("-inf")


def gen(seed: int) -> torch.Generator:
    return torch.Generator(device=DEV).manual_seed(seed)


def make_prefill(S, N, H, D, layout="causal", seed=0, window=None) -> dict:
    """Random fp8 q/kv, positive scales, weights, and int32 [ks, ke) windows; never zero."""
    g = gen(seed)
    q = torch.randn(S, H, D, generator=g, device=DEV).to(FP8)
    kv = torch.randn(N, D, generator=g, device=DEV).to(FP8)
    sc = torch.rand(N, generator=g, device=DEV) * 0.5 + 0.25
    w = torch.randn(S, H, generator=g, device=DEV) * 0.5
    i = torch.arange(S, device=DEV, dtype=torch.int64)
    if layout == "causal":
        ke = (N - S) + i + 1
        ks = torch.zeros_like(ke)
    elif layout == "full":
        ks, ke = torch.zeros_like(i), torch.full_like(i, N)
    elif layout == "window":
        ke = (N - S) + i + 1
        ks = (ke - (window or 64)).clamp_min(0)
    elif layout == "random":  # empty rows, full rows and everything between
        a = torch.randint(0, N + 1, (S,), generator=g, device=DEV)
        b = torch.randint(0, N + 1, (S,), generator=g, device=DEV)
        ks, ke = torch.minimum(a, b), torch.maximum(a, b)
        ks[: S // 8] = ke[: S // 8]  # some empty rows
    else:
        raise ValueError(layout)
    return dict(q=q, kv=kv, sc=sc, w=w, ks=ks.int().contiguous(), ke=ke.int().contiguous(), S=S, N=N, H=H, D=D)


def prefill_ref_rows(p, rows, mcols=0):
    """float32 reference of the given rows: ([R, N] or compressed [R, mcols] logits, live mask)."""
    rows = torch.as_tensor(rows, device=DEV, dtype=torch.long)
    kvf, sc = p["kv"].float(), p["sc"].float()
    outs, lives = [], []
    step = max(1, int(2 ** 27 // max(1, p["H"] * p["N"])))  # ~512 MB of scores per chunk
    for r0 in range(0, len(rows), step):
        rr = rows[r0:r0 + step]
        s = torch.einsum("rhd,nd->rhn", p["q"][rr].float(), kvf).clamp_min_(0)
        lg = torch.einsum("rhn,rh->rn", s, p["w"][rr].float()) * sc[None]
        del s
        cols = torch.arange(p["N"], device=DEV)
        ks, ke = p["ks"][rr].long()[:, None], p["ke"][rr].long()[:, None]
        if mcols:  # compressed: column c of row i is logit(i, ks[i] + c) for c < ke - ks
            c = torch.arange(mcols, device=DEV)[None]
            live = c < (ke - ks)
            lg = torch.gather(lg, 1, (ks + c).clamp_max(p["N"] - 1))
        else:
            live = (cols[None] >= ks) & (cols[None] < ke)
        outs.append(torch.where(live, lg, torch.full_like(lg, NEG_INF)))
        lives.append(live)
    return torch.cat(outs), torch.cat(lives)


def make_paged(B, T, H, D, block, ctx, max_len, two_d=False, seed=0, phys_blocks=None) -> dict:
    """Paged decode inputs in DeepGEMM's cache layout (per block: block*D fp8 bytes, then block fp32 scales).
    ctx: [B] ints (1-D) or [B, T] ints (2-D, each row its own end, sorted along next_n as engines pass them)."""
    g = gen(seed)
    ctx_t = torch.as_tensor(ctx, dtype=torch.int32, device=DEV)
    if two_d:
        ctx_t = ctx_t.sort(dim=1).values.contiguous()
    nb_seq = -(-max_len // block)
    need = int(phys_blocks or B * nb_seq)
    flat = torch.empty(need, block * (D + 4), dtype=torch.uint8, device=DEV)
    vals = torch.randn(need, block, D, generator=g, device=DEV).to(FP8)
    flat[:, : block * D] = vals.view(need, block * D).view(torch.uint8)
    scales = torch.rand(need, block, generator=g, device=DEV) * 0.5 + 0.25
    flat[:, block * D:] = scales.view(torch.uint8).view(need, block * 4)
    if phys_blocks is None:
        bt = torch.randperm(need, generator=g, device=DEV).int().view(B, nb_seq)
    else:  # blocks shared between rows (a big table over a small pool)
        bt = torch.randint(0, need, (B, nb_seq), generator=g, device=DEV, dtype=torch.int32)
    q = torch.randn(B, T, H, D, generator=g, device=DEV).to(FP8)
    w = torch.randn(B * T, H, generator=g, device=DEV) * 0.5
    ends = ctx_t.long().view(B, T) if two_d else \
        (ctx_t.long().view(B, 1) - T + torch.arange(T, device=DEV)[None] + 1).clamp_min(0)
    return dict(q=q, kv_cache=flat.view(need, block, 1, D + 4), flat=flat, w=w, ctx=ctx_t, bt=bt.contiguous(),
                max_len=int(max_len), ends=ends, B=B, T=T, H=H, D=D, block=block)


def paged_ref_rows(p, rows):
    """float32 reference rows of the paged form: ([R, max_len], live mask)."""
    block, D = p["block"], p["D"]
    out = torch.full((len(rows), p["max_len"]), NEG_INF, device=DEV)
    live = torch.zeros((len(rows), p["max_len"]), dtype=torch.bool, device=DEV)
    ends = p["ends"].reshape(-1).tolist()
    for j, r in enumerate(rows):
        e = min(int(ends[r]), p["max_len"])
        if e <= 0:
            continue
        b, t = divmod(int(r), p["T"])
        nb = -(-e // block)
        raw = p["flat"][p["bt"][b, :nb].long()]
        kv = raw[:, : block * D].contiguous().view(FP8).view(nb * block, D)[:e].float()
        sc = raw[:, block * D:].contiguous().view(torch.float32).view(nb * block)[:e]
        s = (p["q"][b, t].float() @ kv.T).clamp_min_(0)
        out[j, :e] = (p["w"][r].float()[:, None] * s).sum(0) * sc
        live[j, :e] = True
    return out, live


def paged_meta(ctx, block):
    return mqa_cli.get_paged_mqa_logits_metadata(ctx, block, mqa_cli.get_num_sms())


def call_prefill(p, clean=True, mcols=0, dtype=torch.float32, form="tuple", **over):
    """The prefill API in one of its forms, with `over` replacing inputs (views); checks the output's shape."""
    a = {k: over.get(k, p[k]) for k in ("q", "kv", "sc", "w", "ks", "ke")}
    kw = {"clean_logits": clean, "max_seqlen_k": mcols, "logits_dtype": dtype}
    if form == "tuple":
        out = mqa_cli.fp8_mqa_logits(a["q"], (a["kv"], a["sc"]), a["w"], a["ks"], a["ke"], **kw)
    elif form == "fp4name":
        out = mqa_cli.fp8_fp4_mqa_logits((a["q"], None), (a["kv"], a["sc"]), a["w"], a["ks"], a["ke"], **kw)
    elif form == "explicit":  # the project's explicit form, positionally, with the defaults
        assert clean and not mcols and dtype == torch.float32
        out = mqa_cli.fp8_mqa_logits(a["q"], a["kv"], a["sc"], a["w"], a["ks"], a["ke"])
    elif form == "mqa_logits":
        out = mqa_cli.mqa_logits(a["q"], a["kv"], a["sc"], a["w"], a["ks"], a["ke"], **kw)
    else:
        raise ValueError(form)
    want = (a["q"].shape[0], mcols or a["kv"].shape[0])
    assert out.dtype == dtype and tuple(out.shape) == want, (out.dtype, tuple(out.shape), want)
    return out


def call_paged(p, clean=False, dtype=torch.float32, meta="auto", fp4name=False, **over):
    """The paged API (metadata computed for the call unless `meta` is given: None or a tensor)."""
    a = {k: over.get(k, p[k]) for k in ("q", "kv_cache", "w", "ctx", "bt")}
    if isinstance(meta, str):
        meta = paged_meta(a["ctx"], p["block"])
    f = mqa_cli.fp8_fp4_paged_mqa_logits if fp4name else mqa_cli.fp8_paged_mqa_logits
    q = (a["q"], None) if fp4name else a["q"]
    out = f(q, a["kv_cache"], a["w"], a["ctx"], a["bt"], meta, p["max_len"], clean_logits=clean, logits_dtype=dtype)
    want = (a["q"].shape[0] * a["q"].shape[1], p["max_len"])
    assert out.dtype == dtype and tuple(out.shape) == want, (out.dtype, tuple(out.shape), want)
    return out


def defined_prefill(p, clean, mcols):
    """Entries the contract defines: everything when clean; else the live ones."""
    if clean:
        return None
    if mcols:
        return torch.arange(mcols, device=DEV)[None] < (p["ke"] - p["ks"]).long()[:, None]
    cols = torch.arange(p["N"], device=DEV)[None]
    return (cols >= p["ks"].long()[:, None]) & (cols < p["ke"].long()[:, None])


def defined_paged(p, clean):
    if clean:
        return None
    return torch.arange(p["max_len"], device=DEV)[None] < p["ends"].reshape(-1, 1)


def assert_bits_equal(a, b, mask=None, what=""):
    """Bitwise equality on the defined entries (mask None: all)."""
    assert a.shape == b.shape and a.dtype == b.dtype, (what, tuple(a.shape), a.dtype, tuple(b.shape), b.dtype)
    if mask is not None:
        a, b = a.masked_fill(~mask, 0), b.masked_fill(~mask, 0)
    iv = {2: torch.int16, 4: torch.int32}[a.element_size()]
    diff = int((a.contiguous().view(iv) != b.contiguous().view(iv)).sum())
    assert diff == 0, f"{what}: {diff} entries differ"


def assert_against_ref(out, ref, live, clean=True, tol=1e-3, what=""):
    """-inf pattern (clean), no NaN among live entries, relative error of the live entries below tol."""
    o = out.float()
    if clean:
        assert torch.equal(torch.isneginf(o), ~live), f"{what}: -inf pattern wrong"
    x, y = o[live].double(), ref[live].double()
    bad = int((~torch.isfinite(x)).sum())
    assert bad == 0, f"{what}: {bad} non-finite live logits"
    den = float(y.norm())
    rel = float((x - y).norm()) / den if den > 0 else 0.0
    assert rel < tol, f"{what}: relative error {rel:.2e} >= {tol:g}"


def tol_for(dtype) -> float:
    return 1e-3 if dtype == torch.float32 else 8e-3


def graph_capture(fn):
    """(graph, static output) of one call of fn, warmed on a side stream first as torch advises."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    return g, out


def embed_rows(x, lead=1, tail=1):
    """x as a row slice [lead:lead+n] of a bigger buffer (a storage offset, contiguous rows)."""
    big = torch.empty((x.shape[0] + lead + tail,) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    big[lead:lead + x.shape[0]] = x
    return big[lead:lead + x.shape[0]]


def pad_last(x, dim, extra):
    """x as a slice of a buffer wider along `dim` (row strides larger than contiguous)."""
    shape = list(x.shape)
    shape[dim] += extra
    big = torch.zeros(shape, dtype=x.dtype, device=x.device) if x.dtype != FP8 else \
        torch.zeros(shape, device=x.device).to(FP8)
    sl = [slice(None)] * x.dim()
    sl[dim] = slice(0, x.shape[dim])
    big[tuple(sl)] = x
    return big[tuple(sl)]


def col0(x):
    """x as column 0 of an [n, 2] tensor: a 1-D view with stride 2."""
    big = torch.zeros((x.shape[0], 2), dtype=x.dtype, device=x.device)
    big[:, 0] = x
    return big[:, 0]


def layer_of(flat, block, D, layers=3, layer=1):
    """The cache as one layer of a [blocks, layers, block * (D + 4)] buffer (block stride layers x a block)."""
    nb = flat.shape[0]
    buf = torch.zeros(nb, layers, flat.shape[1], dtype=torch.uint8, device=flat.device)
    buf[:, layer] = flat
    return buf[:, layer].view(nb, block, 1, D + 4)


def untma_cache(flat, block, D):
    """The cache inside a buffer 4 bytes wider per block: a block stride TMA cannot describe (the portable row)."""
    nb, row = flat.shape
    wide = torch.zeros(nb, row + 4, dtype=torch.uint8, device=flat.device)
    wide[:, :row] = flat
    return torch.as_strided(wide, (nb, block, 1, D + 4), (row + 4, D + 4, D + 4, 1))
