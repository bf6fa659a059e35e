"""GPU checks of the public API and the CLI (issues 9 and 10), one step per argument.

Uses only the public API (mqa_cli.fp8_mqa_logits, fp8_paged_mqa_logits, ...; the session contract) and the
CLI (`python -m mqa_cli run/explain ... --kernel ROW`), never the internals. Inputs and float32 references
are made here.

    python3 tools/gpu_checks.py capture hostcost views engines large     # on the GPU machine, repository root
    python3 tools/gpu_checks.py --smoke capture hostcost views engines large   # on CPU (interpreter), toy sizes

Steps:
  capture   CUDA-graph capture of both APIs (prefill full and compressed, fp32 and bf16, clean on and off;
            paged with [B] and [B, next_n] context lens incl. zeros); the replay must be bitwise equal to
            eager on every defined entry, also after new values are copied into the captured inputs.
  hostcost  eager API call vs CUDA-graph replay of the same call: do_bench vs do_bench_cudagraph, and
            back-to-back calls vs back-to-back replays (the host cost an engine sees); goal eager - graph
            <= 10 us (decode B 1/8/64, C 8K, next_n 1/2; prefill 1x4096).
  views     every tensor argument passed as a view (row slices, strided rows, x[:, 0] of [n, 2], [N, 1]
            scales, strided kv cache inside a multi-layer buffer, block-table slices, 2-D context lens with
            zeros) against the contiguous call: bitwise equal, or a clear refusal (UserError).
  engines   the call forms of vLLM 0.33, SGLang 0.5.23 and DeepGEMM 0.2.5 (../shared/context/engine-call-sites.md)
            exactly as each engine passes its arguments: six positionals with max_seqlen_k an int, +inf written
            into the returned logits, compressed with empty rows, seven / eight positionals on the paged op,
            layer views and row slices of persistent buffers, num_sms // 2 schedule slots at next_n 4, GLM-5's
            clamped metadata, DeepGEMM's own schedule format, set_num_sms.
  large     every dispatch row once past 2^31 output elements (S x padded N): rows from `explain --json`;
            the dispatched row through the API, the others through `run --kernel ROW --output`; sampled
            rows (first, around the 2^31 element, last, random) against a float32 reference.
  badmeta   both decode kernels (the Gluon row, and the portable one through a cache TMA cannot describe) on
            foreign, stale and garbage schedule_meta and block ids out of range (issue 30): every call returns
            (a fault or a hang past BADMETA_HANG_S seconds, default 120, fails the step); a schedule in any
            format gives the logits of schedule_meta=None bit for bit; bad block ids give, in the portable
            kernel, the reference of the ids clamped into [0, num_blocks), in the Gluon one (TMA bounds: zeros
            or a wrapped block) finite logits, the other sequences' right; check_values refuses each bad one.
            Run it under compute-sanitizer (memcheck) to see that nothing reads or writes outside the tensors.
--smoke: CPU tensors through the Triton interpreter, toy sizes; what needs CUDA prints SKIP; a feature the
API lacks prints SKIP (on the GPU it is MISSING, a failure).
Details go to $OUT/checks.jsonl (one JSON object per check). Exit 0 when nothing failed.
Env: LARGE_JOBS (children of `large` at a time, default 2), LARGE_TMP (folder for the big files, default /tmp),
LARGE_SKIP_BIG=1 (leave out the S = N = 65536 case), LARGE_CHILD_S (limit per child, default 300).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback

SMOKE = "--smoke" in sys.argv
if SMOKE:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.environ.get("OUT") or "/tmp/out"
DEV = "cpu" if SMOKE else "cuda"
GPU = not SMOKE
FP8 = torch.float8_e4m3fn
INT31 = 2 ** 31
NEG_INF = float("-inf")
RESULTS: list[dict] = []
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def say(msg: str = "") -> None:
    print(msg, flush=True)


class Missing(Exception):
    """The API lacks a feature the contract promises (SKIP in --smoke, a failure on the GPU)."""


def api():
    import mqa_cli

    return mqa_cli


def user_error_types():
    try:
        from mqa_cli.errors import UserError

        return (UserError,)
    except ImportError:
        return (ValueError,)


def record(step: str, name: str, status: str, detail: str = "", **extra) -> dict:
    r = {"step": step, "check": name, "status": status, "detail": detail, **extra}
    RESULTS.append(r)
    say(f"  {status:8s} {name}: {detail}")
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "checks.jsonl"), "a") as f:
        f.write(json.dumps(r, default=str) + "\n")
    return r


def missing_status() -> str:
    return "SKIP" if SMOKE else "MISSING"


def table(rows: list[list], headers: list[str]) -> str:
    cells = [[str(c) for c in r] for r in rows]
    w = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = lambda r: "| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(r)) + " |"  # noqa: E731
    return "\n".join([line(headers), "|" + "|".join("-" * (x + 2) for x in w) + "|"] + [line(r) for r in cells])


def sync() -> None:
    if GPU:
        torch.cuda.synchronize()


def first_line(e: BaseException) -> str:
    s = str(e).strip()
    return f"{type(e).__name__}: {s.splitlines()[0][:240] if s else ''}"


# ----------------------------------------------------------------------------------------------- inputs

def gen(seed: int):
    return torch.Generator(device=DEV).manual_seed(seed)


def make_prefill(S, N, H, D, layout="causal", seed=0, window=None):
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
    kvf = p["kv"].float()
    sc = p["sc"].float()
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
            idx = (ks + c).clamp_max(p["N"] - 1)
            live = c < (ke - ks)
            lg = torch.gather(lg, 1, idx)
        else:
            live = (cols[None] >= ks) & (cols[None] < ke)
        outs.append(torch.where(live, lg, torch.full_like(lg, NEG_INF)))
        lives.append(live)
    return torch.cat(outs), torch.cat(lives)


def make_paged(B, T, H, D, block, ctx, max_len, two_d=False, seed=0, phys_blocks=None):
    """Paged decode inputs in DeepGEMM's cache layout (per block: block*D fp8 bytes, then block fp32
    scales). ctx: [B] ints (1-D) or [B, T] ints (2-D, each row its own end)."""
    g = gen(seed)
    ctx_t = torch.as_tensor(ctx, dtype=torch.int32, device=DEV)
    if two_d:  # as engines pass them: each row's end grows along next_n (zeros: padding requests)
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
    if two_d:
        ends = ctx_t.long().view(B, T)
    else:
        ends = (ctx_t.long().view(B, 1) - T + torch.arange(T, device=DEV)[None] + 1).clamp_min(0)
    return dict(q=q, kv_cache=flat.view(need, block, 1, D + 4), flat=flat, w=w, ctx=ctx_t, bt=bt.contiguous(),
                max_len=int(max_len), ends=ends, B=B, T=T, H=H, D=D, block=block)


def paged_ref_rows(p, rows):
    """float32 reference rows of the paged form: ([R, max_len], live mask)."""
    block, D = p["block"], p["D"]
    out = torch.full((len(rows), p["max_len"]), NEG_INF, device=DEV)
    live = torch.zeros((len(rows), p["max_len"]), dtype=torch.bool, device=DEV)
    ends = p["ends"].view(-1).tolist()
    for j, r in enumerate(rows):
        e = int(ends[r])
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
    m = api()
    f = getattr(m, "get_paged_mqa_logits_metadata", None)
    if f is None:
        return None
    n = m.get_num_sms() if hasattr(m, "get_num_sms") else 132
    return f(ctx, block, n)


# ------------------------------------------------------------------------------------------- API calls

def call_prefill(p, clean=True, mcols=0, dtype=torch.float32, form="tuple", **over):
    """The prefill API with the contract's arguments; only non-default options are passed, so a missing
    option raises Missing instead of breaking the plain call."""
    a = {k: over.get(k, p[k]) for k in ("q", "kv", "sc", "w", "ks", "ke")}
    kw = {"clean_logits": clean}
    if mcols:
        kw["max_seqlen_k"] = mcols
    if dtype != torch.float32:
        kw["logits_dtype"] = dtype
    out = _call_prefill(a, kw, form)
    want = (a["q"].shape[0], mcols or a["kv"].shape[0])
    if out.dtype != dtype or tuple(out.shape) != want:
        raise AssertionError(f"asked for {dtype} {list(want)}, got {out.dtype} {list(out.shape)}")
    return out


def _call_prefill(a, kw, form):
    m = api()
    try:
        if form == "tuple":
            return m.fp8_mqa_logits(a["q"], (a["kv"], a["sc"]), a["w"], a["ks"], a["ke"], **kw)
        if form == "fp4name":
            f = getattr(m, "fp8_fp4_mqa_logits", None)
            if f is None:
                raise Missing("mqa_cli.fp8_fp4_mqa_logits")
            return f((a["q"], None), (a["kv"], a["sc"]), a["w"], a["ks"], a["ke"], **kw)
        if form == "explicit":  # the project's explicit form, positionally: kv tensor then its scales
            if kw != {"clean_logits": True}:
                raise ValueError("the positional explicit form is checked with the defaults only")
            return m.fp8_mqa_logits(a["q"], a["kv"], a["sc"], a["w"], a["ks"], a["ke"])
        if form == "mqa_logits":  # the project's explicit form by name, options by keyword
            f = getattr(m, "mqa_logits", None)
            if f is None:
                raise Missing("mqa_cli.mqa_logits")
            return f(a["q"], a["kv"], a["sc"], a["w"], a["ks"], a["ke"], **kw)
        raise ValueError(form)
    except TypeError as e:
        if any(k in str(e) for k in ("max_seqlen_k", "logits_dtype", "unexpected keyword")):
            raise Missing(first_line(e)) from None
        raise


def call_paged(p, clean=False, dtype=torch.float32, meta="auto", fp4name=False, **over):
    a = {k: over.get(k, p[k]) for k in ("q", "kv_cache", "w", "ctx", "bt")}
    if isinstance(meta, str):
        meta = paged_meta(a["ctx"], p["block"])
    kw = {"clean_logits": clean}
    if dtype != torch.float32:
        kw["logits_dtype"] = dtype
    out = _call_paged(a, kw, meta, p["max_len"], fp4name)
    want = (a["q"].shape[0] * a["q"].shape[1], p["max_len"])
    if out.dtype != dtype or tuple(out.shape) != want:
        raise AssertionError(f"asked for {dtype} {list(want)}, got {out.dtype} {list(out.shape)}")
    return out


def _call_paged(a, kw, meta, max_len, fp4name):
    m = api()
    try:
        if fp4name:
            f = getattr(m, "fp8_fp4_paged_mqa_logits", None)
            if f is None:
                raise Missing("mqa_cli.fp8_fp4_paged_mqa_logits")
            return f((a["q"], None), a["kv_cache"], a["w"], a["ctx"], a["bt"], meta, max_len, **kw)
        return m.fp8_paged_mqa_logits(a["q"], a["kv_cache"], a["w"], a["ctx"], a["bt"], meta, max_len, **kw)
    except TypeError as e:
        if any(k in str(e) for k in ("logits_dtype", "unexpected keyword")):
            raise Missing(first_line(e)) from None
        raise


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
    cols = torch.arange(p["max_len"], device=DEV)[None]
    return cols < p["ends"].reshape(-1, 1)


def bits_equal(a, b, mask) -> tuple[bool, str]:
    """Bitwise equality on the defined entries (mask None: all)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False, f"shape/dtype {tuple(a.shape)} {a.dtype} vs {tuple(b.shape)} {b.dtype}"
    if mask is not None:
        a, b = a.masked_fill(~mask, 0), b.masked_fill(~mask, 0)
    iv = {2: torch.int16, 4: torch.int32}[a.element_size()]
    x, y = a.contiguous().view(iv), b.contiguous().view(iv)
    diff = int((x != y).sum())
    return diff == 0, "bitwise equal" if diff == 0 else f"{diff} entries differ"


def against_ref(out, ref, live, clean, tol) -> tuple[bool, str]:
    """-inf pattern (clean), no NaN among live entries, relative error of the live entries."""
    o = out.float()
    inf_ok = bool(torch.equal(torch.isneginf(o), ~live)) if clean else True
    x, y = o[live].double(), ref[live].double()
    bad = int((~torch.isfinite(x)).sum())
    den = float(y.norm())
    rel = float((torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0) - y).norm()) / den if den > 0 else 0.0
    ok = inf_ok and bad == 0 and rel < tol
    return ok, f"rel {rel:.2e}, -inf pattern {'ok' if inf_ok else 'WRONG'}, non-finite live {bad}"


def tol_for(dtype) -> float:
    return 1e-3 if dtype == torch.float32 else 8e-3


# ---------------------------------------------------------------------------------------------- capture

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


def check_capture(step, name, fn, mask_fn, refresh):
    """eager vs replay bitwise; then new input values copied in place: replay vs a new eager call."""
    try:
        eager = fn()
        sync()
        if not GPU:  # smoke: the same calls, eager only
            ok, msg = bits_equal(eager, fn(), mask_fn())
            refresh()
            fn()
            return record(step, name, "SKIP", f"no CUDA graphs on CPU (eager twice: {msg})")
        g, out = graph_capture(fn)
        g.replay()
        sync()
        ok1, m1 = bits_equal(eager, out, mask_fn())
        refresh()
        eager2 = fn()
        g.replay()
        sync()
        ok2, m2 = bits_equal(eager2, out, mask_fn())
        ok = ok1 and ok2
        return record(step, name, "PASS" if ok else "FAIL", f"replay vs eager: {m1}; after new inputs: {m2}")
    except Missing as e:
        return record(step, name, missing_status(), f"API lacks: {e}")
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        return record(step, name, "FAIL", first_line(e))


def step_capture():
    step = "capture"
    say("\n== capture: CUDA graphs of both APIs, replay bitwise equal to eager ==")
    shapes = [(2048, 2048, 64, 128), (2048, 3000, 32, 128), (256, 512, 64, 128)] if GPU else [(24, 40, 8, 32)]
    for (S, N, H, D) in shapes:
        p = make_prefill(S, N, H, D, "random" if S < 1024 else "causal", seed=S + H)
        say(f"-- prefill S{S} N{N} H{H} D{D}: dispatched to {dispatched(S, N, H, D)}")
        mc = int((p["ke"] - p["ks"]).max())
        for clean, mcols, dt in [(True, 0, torch.float32), (False, 0, torch.float32), (True, mc, torch.float32),
                                 (False, mc, torch.float32), (True, 0, torch.bfloat16), (False, mc, torch.bfloat16)]:
            nm = f"prefill S{S} N{N} H{H} {'cmp' if mcols else 'full'} {'bf16' if dt != torch.float32 else 'fp32'} clean={int(clean)}"

            def refresh(p=p):
                p["q"].copy_(torch.randn(p["q"].shape, device=DEV).to(FP8))
                p["w"].copy_(torch.randn(p["w"].shape, device=DEV))
            check_capture(step, nm, lambda p=p, c=clean, m=mcols, d=dt: call_prefill(p, c, m, d),
                          lambda p=p, c=clean, m=mcols: defined_prefill(p, c, m), refresh)
    # paged: [B] and [B, next_n] context lens with zeros; metadata computed outside the graph (as engines do)
    pcfg = [(8, 2, 64, 128, 64, 4096), (3, 1, 64, 128, 64, 1000)] if GPU else [(3, 2, 8, 64, 16, 80)]
    for (B, T, H, D, blk, C) in pcfg:
        for two_d in (False, True):
            g = torch.Generator().manual_seed(B * 7 + T)
            if two_d:
                ctx = torch.randint(0, C + 1, (B, T), generator=g)
                ctx[0] = 0
                ctx[-1, -1] = C
            else:
                ctx = torch.randint(0, C + 1, (B,), generator=g)
                ctx[0] = 0
                ctx[-1] = C
            p = make_paged(B, T, H, D, blk, ctx.tolist(), C, two_d=two_d, seed=B + T)
            for clean, dt in [(False, torch.float32), (True, torch.float32), (True, torch.bfloat16),
                              (False, torch.bfloat16)]:
                nm = (f"paged B{B} n{T} C{C} ctx {'[B,n]' if two_d else '[B]'} with 0 "
                      f"{'bf16' if dt != torch.float32 else 'fp32'} clean={int(clean)}")
                meta = paged_meta(p["ctx"], blk)

                def refresh(p=p, meta=meta):
                    p["q"].copy_(torch.randn(p["q"].shape, device=DEV).to(FP8))
                    p["w"].copy_(torch.randn(p["w"].shape, device=DEV))
                    if meta is not None:  # engines refresh the schedule in place when lengths change
                        meta.copy_(paged_meta(p["ctx"], p["block"]))
                check_capture(step, nm, lambda p=p, c=clean, d=dt, m=meta: call_paged(p, c, d, meta=m),
                              lambda p=p, c=clean: defined_paged(p, c), refresh)
        # the metadata call inside the graph too (one engine pattern)
        p = make_paged(B, T, H, D, blk, [C] * B, C, seed=3)
        check_capture(step, f"paged B{B} n{T}: metadata + logits in one graph",
                      lambda p=p: call_paged(p, True, meta="auto"), lambda: None, lambda: None)


# --------------------------------------------------------------------------------------------- hostcost

def step_hostcost():
    step = "hostcost"
    say("\n== hostcost: eager API call vs CUDA-graph replay of the same call (goal: eager - graph <= 10 us) ==")
    if not GPU:
        return record(step, "hostcost", "SKIP", "needs CUDA (events and graphs)")
    import triton.testing as tt

    cases = []
    for B in (1, 8, 64):
        for T in (1, 2):
            g = torch.Generator().manual_seed(B + T)
            C = 8192
            ctx = torch.randint(int(0.7 * C), int(1.3 * C), (B,), generator=g)
            max_len = -(-int(1.3 * C) // 64) * 64
            p = make_paged(B, T, 64, 128, 64, ctx.tolist(), max_len, seed=B)
            meta = paged_meta(p["ctx"], 64)
            f = api().fp8_paged_mqa_logits  # bound once, as an engine imports it; no wrapper of ours timed
            cases.append((f"decode B{B} C8K n{T}", lambda f=f, p=p, m=meta: f(
                p["q"], p["kv_cache"], p["w"], p["ctx"], p["bt"], m, p["max_len"], clean_logits=False)))
    pf = make_prefill(4096, 4096, 64, 128, "causal", seed=1)
    fp = api().fp8_mqa_logits
    cases.append(("prefill 1x4096 causal H64", lambda: fp(pf["q"], (pf["kv"], pf["sc"]), pf["w"], pf["ks"], pf["ke"])))
    rows = []
    worst = 0.0
    for name, fn in cases:
        try:
            fn()
            sync()
            eager_db = tt.do_bench(fn, warmup=10, rep=50, return_mode="median") * 1e3
            graph_db = tt.do_bench_cudagraph(fn, rep=50, return_mode="median") * 1e3
            g, _ = graph_capture(fn)
            replay_db = tt.do_bench(g.replay, warmup=10, rep=50, return_mode="median") * 1e3

            def loop(f, n=300):
                for _ in range(20):
                    f()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(n):
                    f()
                t1 = time.perf_counter()
                torch.cuda.synchronize()
                t2 = time.perf_counter()
                return (t2 - t0) / n * 1e6, (t1 - t0) / n * 1e6

            loop_e, host_e = loop(fn)
            loop_g, _ = loop(g.replay)
            d_loop = loop_e - loop_g
            d_db = eager_db - graph_db
            worst = max(worst, d_loop, d_db)
            ok = d_loop <= 10.0 and d_db <= 10.0
            rows.append([name, f"{eager_db:.1f}", f"{graph_db:.1f}", f"{replay_db:.1f}", f"{d_db:+.1f}",
                         f"{loop_e:.1f}", f"{loop_g:.1f}", f"{d_loop:+.1f}", f"{host_e:.1f}", "PASS" if ok else "FAIL"])
            record(step, name, "PASS" if ok else "FAIL",
                   f"do_bench {eager_db:.1f} vs do_bench_cudagraph {graph_db:.1f} us ({d_db:+.1f}); back-to-back "
                   f"{loop_e:.1f} vs {loop_g:.1f} us/call ({d_loop:+.1f}); host {host_e:.1f} us/call",
                   eager_us=eager_db, graph_us=graph_db, replay_flushed_us=replay_db, loop_eager_us=loop_e,
                   loop_graph_us=loop_g, host_us=host_e)
            del g
        except Missing as e:
            record(step, name, missing_status(), str(e))
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            record(step, name, "FAIL", first_line(e))
            rows.append([name] + ["-"] * 8 + ["FAIL"])
    say(table(rows, ["call", "eager do_bench µs", "graph do_bench_cudagraph µs", "graph replay do_bench µs",
                     "eager-graph µs", "eager back-to-back µs/call", "replay back-to-back µs/call",
                     "eager-graph (b2b) µs", "host µs/call", "≤ 10 µs"]))
    say("do_bench flushes L2 before each call (a 256 MB memset the host's launch work hides behind); "
        "back-to-back calls show the host cost an engine pays per call when the GPU is not the bottleneck.")
    say(f"worst eager - graph: {worst:+.1f} µs")


# ------------------------------------------------------------------------------------------------ views

def view_check(step, name, call_base, call_view, mask, expect_refusal_ok=True):
    """The view call against the contiguous call: bitwise equal on defined entries, or a clear refusal."""
    try:
        base = call_base()
    except Missing as e:
        return record(step, name, missing_status(), f"API lacks: {e}")
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        return record(step, name, "FAIL", f"the contiguous call fails: {first_line(e)}")
    try:
        out = call_view()
        sync()
    except Missing as e:
        return record(step, name, missing_status(), f"API lacks: {e}")
    except user_error_types() as e:
        msg = first_line(e)
        one_line = "\n" not in str(e).strip()
        return record(step, name, "REFUSED" if one_line else "FAIL", ("clear refusal: " if one_line else
                      "refusal spans several lines: ") + msg)
    except Exception as e:  # noqa: BLE001  (a crash, not a refusal)
        traceback.print_exc()
        return record(step, name, "FAIL", f"not a UserError: {first_line(e)}")
    ok, msg = bits_equal(base, out, mask)
    return record(step, name, "PASS" if ok else "FAIL", ("honoured, " if ok else "SILENTLY WRONG: ") + msg)


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


def step_views():
    step = "views"
    say("\n== views: every tensor argument as a view vs the contiguous call (equal, or a clear refusal) ==")
    # on the H200: gluon_ws_sm90 (H 64), h64d128_sm90 (H 32, S >= 1024), tiled (S < 1024)
    shapes = [(1024, 1024, 64, 128, "causal"), (1024, 1500, 32, 128, "random"), (300, 777, 32, 128, "random")] \
        if GPU else [(24, 40, 8, 32, "random")]
    for (S, N, H, D, layout) in shapes:
        p = make_prefill(S, N, H, D, layout, seed=S)
        mc = int((p["ke"] - p["ks"]).max())
        say(f"-- prefill S{S} N{N} H{H} D{D} {layout}: dispatched to {dispatched(S, N, H, D)}")
        # the contiguous call against the reference first: a wrong baseline would make every view "equal"
        try:
            out = call_prefill(p, True)
            ref, live = prefill_ref_rows(p, list(range(S)))
            ok, msg = against_ref(out, ref, live, True, 1e-3)
            record(step, f"prefill S{S} N{N} H{H} contiguous vs reference", "PASS" if ok else "FAIL", msg)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            record(step, f"prefill S{S} N{N} H{H} contiguous vs reference", "FAIL", first_line(e))
        q_perm = p["q"].transpose(0, 1).contiguous().transpose(0, 1)  # [S, H, D] laid out head-major
        cases = {
            "q row slice": dict(q=embed_rows(p["q"])),
            "q rows padded (H+3 heads)": dict(q=pad_last(p["q"], 1, 3)),
            "q head-major (stride(1) = S*D)": dict(q=q_perm),
            "weights row slice": dict(w=embed_rows(p["w"])),
            "weights row-strided [S, 2H][:, :H]": dict(w=pad_last(p["w"], 1, p["H"])),
            "weights transposed (stride(1) = S)": dict(w=p["w"].t().contiguous().t()),
            "ks/ke x[:, 0] of [S, 2]": dict(ks=col0(p["ks"]), ke=col0(p["ke"])),
            "ks/ke row slices": dict(ks=embed_rows(p["ks"]), ke=embed_rows(p["ke"])),
            "kv_scales [N, 1]": dict(sc=p["sc"][:, None].contiguous()),
            "kv_scales x[:, 0] of [N, 2]": dict(sc=col0(p["sc"])),
            "kv_scales [N, 1] view x[:, :1] of [N, 2]": dict(sc=torch.stack([p["sc"], p["sc"]], 1)[:, :1]),
            "kv row slice": dict(kv=embed_rows(p["kv"])),
            "kv row-strided [N, 2D][:, :D]": dict(kv=pad_last(p["kv"], 1, p["D"])),
        }
        # strided D: every second byte of a [S, H, 2D] buffer
        big = torch.zeros(S, H, 2 * D, device=DEV).to(FP8)
        big[:, :, ::2] = p["q"]
        cases["q strided D (stride(2) = 2)"] = dict(q=big[:, :, ::2])
        cases["all views at once"] = dict(q=embed_rows(pad_last(p["q"], 1, 3)), w=embed_rows(pad_last(p["w"], 1, 2)),
                                          ks=col0(p["ks"]), ke=col0(p["ke"]), sc=col0(p["sc"])[:, None],
                                          kv=embed_rows(pad_last(p["kv"], 1, 16)))
        for cname, over in cases.items():
            for clean, mcols in ((True, 0), (False, mc)):
                nm = f"prefill S{S} H{H} {cname} ({'full clean' if clean else 'compressed'})"
                view_check(step, nm, lambda p=p, c=clean, m=mcols: call_prefill(p, c, m),
                           lambda p=p, c=clean, m=mcols, o=over: call_prefill(p, c, m, **o),
                           defined_prefill(p, clean, mcols))
        for form, what in (("explicit", "fp8_mqa_logits(q, kv, kv_scales, weights, ks, ke)"),
                           ("fp4name", "fp8_fp4_mqa_logits((q, None), (kv, kv_scales), ...)")):
            view_check(step, f"prefill S{S} H{H} {what}", lambda p=p: call_prefill(p, True),
                       lambda p=p, f=form: call_prefill(p, True, form=f), None)
        view_check(step, f"prefill S{S} H{H} mqa_logits(q, kv, kv_scales, ..., clean_logits=False, max_seqlen_k)",
                   lambda p=p: call_prefill(p, False, mc), lambda p=p: call_prefill(p, False, mc, form="mqa_logits"),
                   defined_prefill(p, False, mc))
        view_check(step, f"prefill S{S} H{H} bf16 with views", lambda p=p: call_prefill(p, True, dtype=torch.bfloat16),
                   lambda p=p: call_prefill(p, True, dtype=torch.bfloat16, ks=col0(p["ks"]), ke=col0(p["ke"]),
                                            sc=col0(p["sc"]), q=embed_rows(p["q"])), None)

    pcfg = [(6, 2, 64, 128, 64, 3000), (5, 1, 32, 128, 64, 700)] if GPU else [(3, 2, 8, 64, 16, 70)]
    for (B, T, H, D, blk, C) in pcfg:
        g = torch.Generator().manual_seed(B)
        for two_d in (False, True):
            ctx = torch.randint(0, C + 1, (B, T) if two_d else (B,), generator=g)
            ctx.view(-1)[0] = 0
            ctx.view(-1)[-1] = C
            max_len = -(-C // blk) * blk
            p = make_paged(B, T, H, D, blk, ctx.tolist(), max_len, two_d=two_d, seed=B + T)
            tag = f"paged B{B} n{T} ctx {'[B,n]' if two_d else '[B]'} with 0"
            try:
                out = call_paged(p, True)
                ref, live = paged_ref_rows(p, list(range(B * T)))
                ok, msg = against_ref(out, ref, live, True, 1e-3)
                record(step, f"{tag} contiguous vs reference", "PASS" if ok else "FAIL", msg)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                record(step, f"{tag} contiguous vs reference", "FAIL", first_line(e))
            nbp = p["flat"].shape[0]
            layers = torch.zeros(nbp, 3, p["flat"].shape[1], dtype=torch.uint8, device=DEV)
            layers[:, 1] = p["flat"]
            kv_layer = layers[:, 1].view(nbp, blk, 1, D + 4)  # block stride 3 * block * (D + 4) bytes
            bt2 = torch.zeros(2 * B, p["bt"].shape[1], dtype=torch.int32, device=DEV)
            bt2[::2] = p["bt"]
            btw = torch.zeros(B + 3, p["bt"].shape[1] + 5, dtype=torch.int32, device=DEV)
            btw[:B, :p["bt"].shape[1]] = p["bt"]
            ctxt = p["ctx"].t().contiguous().t() if two_d else p["ctx"]
            cases = {
                "q row slice": dict(q=embed_rows(p["q"])),
                "q heads padded [B, n, H+2, D][:, :, :H]": dict(q=pad_last(p["q"], 2, 2)),
                "weights row slice": dict(w=embed_rows(p["w"])),
                "weights row-strided": dict(w=pad_last(p["w"], 1, 4)),
                "context_lens strided x[:, 0]" if not two_d else "context_lens [B, n] transposed layout":
                    dict(ctx=col0(p["ctx"]) if not two_d else ctxt),
                "context_lens row slice": dict(ctx=embed_rows(p["ctx"])),
                "block_table bt[::2]": dict(bt=bt2[::2]),
                "block_table buf[:r, :c]": dict(bt=btw[:B, :p["bt"].shape[1]]),
                "block_table row slice": dict(bt=embed_rows(p["bt"])),
                "kv cache layer of a [blocks, 3 layers, ...] buffer": dict(kv_cache=kv_layer),
                "kv cache block slice (offset)": dict(kv_cache=embed_rows(p["kv_cache"])),
                "all views at once": dict(q=embed_rows(pad_last(p["q"], 2, 2)), w=embed_rows(pad_last(p["w"], 1, 4)),
                                          bt=bt2[::2], kv_cache=kv_layer,
                                          ctx=col0(p["ctx"]) if not two_d else ctxt),
            }
            for cname, over in cases.items():
                for clean in (True, False):
                    view_check(step, f"{tag} {cname} (clean={int(clean)})",
                               lambda p=p, c=clean: call_paged(p, c), lambda p=p, c=clean, o=over: call_paged(p, c, **o),
                               defined_paged(p, clean))
            view_check(step, f"{tag} fp8_fp4_paged_mqa_logits((q, None), ...)", lambda p=p: call_paged(p, True),
                       lambda p=p: call_paged(p, True, fp4name=True), None)
            view_check(step, f"{tag} schedule_meta None", lambda p=p: call_paged(p, True),
                       lambda p=p: call_paged(p, True, meta=None), None)


# ---------------------------------------------------------------------------------------------- engines

def engine_check(step, name, fn):
    """One engine form: fn() -> (ok, detail). Missing: the API lacks the form (SKIP with --smoke, a failure on the
    GPU); a refusal or a crash fails it (the engine would stop there)."""
    try:
        ok, detail = fn()
        sync()
    except Missing as e:
        return record(step, name, missing_status(), f"API lacks: {e}")
    except Skip as e:
        return record(step, name, "SKIP", str(e))
    except Exception as e:  # noqa: BLE001  (an engine makes this call as it is: a refusal breaks it)
        traceback.print_exc()
        return record(step, name, "FAIL", f"{'refused' if isinstance(e, user_error_types()) else 'crashed'}: "
                      f"{first_line(e)}")
    return record(step, name, "PASS" if ok else "FAIL", detail)


class Skip(Exception):
    """A form that cannot be checked here (e.g. DeepGEMM not importable for its schedule format)."""


def step_engines():
    """The call forms of vLLM 0.33, SGLang 0.5.23 and DeepGEMM 0.2.5 (../shared/context/engine-call-sites.md),
    through the public API exactly as each engine passes its arguments; each against the float32 reference on the
    entries the form defines, or bitwise against the plain call."""
    step = "engines"
    say("\n== engines: the engines' call forms, as they pass their arguments ==")
    m = api()
    S, N, H, D = (2048, 4096, 64, 128) if GPU else (40, 72, 16, 64)
    pre = make_prefill(S, N, H, D, "random", seed=61)  # empty rows, full rows and everything between

    def vllm_prefill():  # fp8_fp4_mqa_logits((q[r0:r1], None), (k_ws[:N], s_ws[:N]), w[r0:r1], ks, ke, max_seqlen_k)
        f = getattr(m, "fp8_fp4_mqa_logits", None)
        if f is None:
            raise Missing("mqa_cli.fp8_fp4_mqa_logits")
        r0, r1 = S // 4, S // 4 + S // 2
        k_ws = embed_rows(pre["kv"], 0, N // 2)  # the workspace is longer than this chunk's kv
        s_ws = embed_rows(pre["sc"], 0, N // 2)
        ks, ke = pre["ks"][r0:r1], pre["ke"][r0:r1]
        M = max(1, int((ke - ks).max()))  # the chunk's longest window, not aligned
        out = f((pre["q"][r0:r1], None), (k_ws[:N], s_ws[:N]), pre["w"][r0:r1], ks, ke, M)
        if tuple(out.shape) != (r1 - r0, M):
            raise Missing(f"six positionals with an int sixth (max_seqlen_k {M}) gave {list(out.shape)}, not the "
                          f"compressed [{r1 - r0}, {M}]")
        sub = dict(pre, q=pre["q"][r0:r1], w=pre["w"][r0:r1], ks=ks, ke=ke)
        ref, live = prefill_ref_rows(sub, list(range(r1 - r0)), mcols=M)
        return against_ref(out, ref, live, False, 1e-3)  # vLLM reads columns [0, ke - ks) only

    def sglang_dsa_prefill():  # fp8_mqa_logits(q, (k, s), w, ks, ke, clean_logits=False), then +inf in place
        out = m.fp8_mqa_logits(pre["q"], (pre["kv"], pre["sc"]), pre["w"], pre["ks"], pre["ke"], clean_logits=False)
        if out.shape[1] != N:
            return False, f"logits.shape[1] == {out.shape[1]}, SGLang asserts N = {N} (absolute columns)"
        ref, live = prefill_ref_rows(pre, list(range(S)))
        ok, msg = against_ref(out, ref, live, False, 1e-3)
        rows = torch.arange(S, device=DEV)
        cols = pre["ks"].long().clamp_max(N - 1)
        out[rows, cols] = float("inf")  # SGLang marks each row's local tokens in the returned logits
        wrote = bool(torch.isposinf(out[rows, cols]).all())
        return ok and wrote, msg + f"; +inf written in place: {'yes' if wrote else 'NO'}"

    def sglang_v4_prefill():  # fp8_mqa_logits(q[rows], kv, w[rows], ks[rows], ke[rows], clean_logits=False,
        # max_seqlen_k=M) with ks = 0, empty rows ke = ks, M rounded up to 64
        p4 = dict(pre, ks=torch.zeros_like(pre["ke"]), ke=pre["ke"].clone())
        p4["ke"][::5] = 0
        rows = torch.arange(0, S, 3, device=DEV)
        M = -(-max(1, int(p4["ke"][rows].max())) // 64) * 64
        out = m.fp8_mqa_logits(pre["q"][rows], (pre["kv"], pre["sc"]), pre["w"][rows], p4["ks"][rows],
                               p4["ke"][rows], clean_logits=False, max_seqlen_k=M)
        sub = dict(p4, q=pre["q"][rows], w=pre["w"][rows], ks=p4["ks"][rows], ke=p4["ke"][rows])
        ref, live = prefill_ref_rows(sub, list(range(len(rows))), mcols=M)
        return against_ref(out, ref, live, False, 1e-3)

    for name, fn in (("vLLM 0.33 prefill: fp8_fp4_mqa_logits six positionals, max_seqlen_k an int", vllm_prefill),
                     ("SGLang DSA prefill: fp8_mqa_logits clean_logits=False, +inf written in place", sglang_dsa_prefill),
                     ("SGLang V4 prefill: compressed, ks 0, empty rows, max_seqlen_k rounded up to 64", sglang_v4_prefill)):
        engine_check(step, name, fn)

    sms = m.get_num_sms() if GPU else 4
    blk = 64
    last = []  # DeepGEMM's schedule format, run after every other form: a kernel that misreads it may fault
    for T in (1, 2, 4):
        B = 12 if GPU else 3
        C = 3000 if GPU else 150
        g = torch.Generator().manual_seed(70 + T)
        ctx = torch.randint(1, C + 1, (B, T), generator=g)
        ctx[-1] = 0  # a padding request
        max_len = -(-C // blk) * blk
        p = make_paged(B, T, H, D, blk, ctx.tolist(), max_len, two_d=True, seed=80 + T)
        ref, live = paged_ref_rows(p, list(range(B * T)))
        plain = {}

        def base(p=p, plain=plain):
            if "out" not in plain:
                plain["out"] = m.fp8_paged_mqa_logits(p["q"], p["kv_cache"], p["w"], p["ctx"], p["bt"], None,
                                                      p["max_len"], clean_logits=False)
            return plain["out"]

        def vllm_paged(p=p, T=T, ref=ref, live=live):  # fp8_fp4_paged_mqa_logits((q, None), kv_layer, w, ctx2d, bt[:B], sched[:P+1],
            # max_model_len): seven positionals; the schedule copied into a row slice of a fixed buffer, num_sms // 2
            # slots at next_n 4 (DeepGEMM 2.8.1's 2-CTA form on sm90)
            f = getattr(m, "fp8_fp4_paged_mqa_logits", None)
            if f is None:
                raise Missing("mqa_cli.fp8_fp4_paged_mqa_logits")
            nbp = p["flat"].shape[0]
            layers = torch.zeros(nbp, 2, p["flat"].shape[1], dtype=torch.uint8, device=DEV)
            layers[:, 1] = p["flat"]
            kv_layer = layers[:, 1].view(nbp, blk, 1, D + 4)
            bt_buf = torch.zeros(p["B"] + 5, p["bt"].shape[1] + 9, dtype=torch.int32, device=DEV)
            bt_buf[:p["B"], :p["bt"].shape[1]] = p["bt"]
            slots = max(1, sms // 2) if T == 4 else sms
            sched_buf = torch.zeros(sms + 1, 2, dtype=torch.int32, device=DEV)
            sched_buf[:slots + 1].copy_(m.get_paged_mqa_logits_metadata(p["ctx"], blk, slots))
            max_model_len = p["max_len"] + 4 * blk  # the model's limit, past every context
            out = f((p["q"], None), kv_layer, p["w"], p["ctx"], bt_buf[:p["B"]], sched_buf[:slots + 1], max_model_len)
            if tuple(out.shape) != (p["B"] * T, max_model_len):
                return False, f"shape {list(out.shape)}, want {[p['B'] * T, max_model_len]}"
            return against_ref(out[:, :p["max_len"]], ref, live, False, 1e-3)

        def sglang_paged(p=p, T=T, base=base, live=live):  # fp8_paged_mqa_logits(q, kv, w, ctx, bt[::n] (next_n > 1), meta, max_len,
            # False): eight positionals
            if T == 1:
                q, bt = p["q"], p["bt"]
            else:
                bt_rows = torch.zeros(p["B"] * T, p["bt"].shape[1], dtype=torch.int32, device=DEV)
                bt_rows[::T] = p["bt"]
                q, bt = p["q"], bt_rows[::T]
            meta = m.get_paged_mqa_logits_metadata(p["ctx"], blk, sms)
            out = m.fp8_paged_mqa_logits(q, p["kv_cache"], p["w"], p["ctx"], bt, meta, p["max_len"], False)
            return bits_equal(out, base(), live)

        def glm5_pooled(p=p, base=base, live=live):  # metadata from ctx.clamp(min=1), the call with the raw ctx (zeros)
            meta = m.get_paged_mqa_logits_metadata(p["ctx"].clamp(min=1), blk, sms)
            out = m.fp8_paged_mqa_logits(p["q"], p["kv_cache"], p["w"], p["ctx"], p["bt"], meta, p["max_len"],
                                         clean_logits=False)
            return bits_equal(out, base(), live)

        def dg_schedule(p=p, base=base, live=live):  # a schedule in DeepGEMM's own format (SGLang V4 builds it itself at large batches)
            try:
                import deep_gemm
            except Exception as e:  # noqa: BLE001
                raise Skip(f"deep_gemm not importable here ({first_line(e)})") from None
            meta = deep_gemm.get_paged_mqa_logits_metadata(p["ctx"], blk, sms)
            out = m.fp8_paged_mqa_logits(p["q"], p["kv_cache"], p["w"], p["ctx"], p["bt"], meta, p["max_len"],
                                         clean_logits=False)
            return bits_equal(out, base(), live)

        engine_check(step, f"paged n{T}: the plain call vs reference", lambda: against_ref(base(), ref, live, False, 1e-3))
        engine_check(step, f"vLLM 0.33 paged n{T}: seven positionals, layer view, bt/schedule row slices", vllm_paged)
        engine_check(step, f"SGLang paged n{T}: eight positionals{', bt[::n]' if T > 1 else ''}", sglang_paged)
        engine_check(step, f"GLM-5 pooled decode n{T}: metadata of ctx.clamp(min=1), zeros in the call", glm5_pooled)
        if T > 1:
            last.append((f"DeepGEMM-format schedule n{T} (DeepGEMM's metadata passed to ours)", dg_schedule))

    def sm_control():  # get_num_sms() / set_num_sms(n) around a call (SGLang's pipeline parallelism, vLLM's
        # micro-batching); the call after set_num_sms must be unchanged and get_num_sms must say what was set
        if not hasattr(m, "set_num_sms"):
            raise Missing("mqa_cli.set_num_sms")
        n0 = m.get_num_sms()
        want = max(1, n0 - 8) if GPU else n0
        before = m.fp8_mqa_logits(pre["q"], (pre["kv"], pre["sc"]), pre["w"], pre["ks"], pre["ke"])
        try:
            m.set_num_sms(want)
            got = m.get_num_sms()
            after = m.fp8_mqa_logits(pre["q"], (pre["kv"], pre["sc"]), pre["w"], pre["ks"], pre["ke"])
        finally:
            m.set_num_sms(n0)
        ok, msg = bits_equal(after, before, None)
        return ok and got == want, f"get_num_sms after set_num_sms({want}): {got}; prefill {msg}"

    engine_check(step, "set_num_sms / get_num_sms around a prefill call", sm_control)
    for name, fn in last:
        engine_check(step, name, fn)


# ------------------------------------------------------------------------------------------------ large

def cli(*args, timeout=900):
    """python -m mqa_cli ARGS from the repository root; (rc, stdout, stderr)."""
    env = dict(os.environ)
    if not SMOKE:
        env.pop("TRITON_INTERPRET", None)
    r = subprocess.run([sys.executable, "-m", "mqa_cli", *map(str, args)], capture_output=True, text=True,
                       cwd=ROOT, env=env, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def explain(flags: list[str], kernel: str | None = None) -> tuple[dict | None, str]:
    args = ["explain", "--json", *flags] + (["--kernel", kernel] if kernel else [])
    if SMOKE:
        args += ["--target", "cpu"]
    rc, out, err = cli(*args, timeout=120)
    if rc != 0:
        return None, (err.strip().splitlines() or ["exit %d" % rc])[-1]
    try:
        return json.loads(out), ""
    except json.JSONDecodeError as e:
        return None, f"explain output is not JSON: {e}"


SIZE_WORDS = ("2^31", "2³¹", "int32", "element", "offset", "64-bit", "addres", "output size", "S x N", "S*N", "bytes")


def rows_at(flags: list[str]) -> tuple[list[dict], str | None]:
    """Every row of this target at a shape: name, holds (when named), why not, size-limited?; + the selected."""
    d, err = explain(flags)
    if d is None:
        return [], None
    sel = d["plan"].get("selected")
    out = []
    for c in d["plan"]["candidates"]:
        target_ok = all(x["ok"] for x in c["conditions"] if x["name"] == "target")
        problem_ok = all(x["ok"] for x in c["conditions"] if x["name"] == "problem")
        if not (target_ok and problem_ok):
            continue
        holds, why = c["ok"], c.get("ruled_out_by") or ""
        if not holds:  # an opt-in row holds when named
            d2, err2 = explain(flags, kernel=c["kernel"])
            if d2 is not None:
                c2 = next((x for x in d2["plan"]["candidates"] if x["kernel"] == c["kernel"]), None)
                if c2 is not None:
                    holds, why = c2["ok"], c2.get("ruled_out_by") or ""
            else:
                why = err2 or why
        size = (not holds) and any(w.lower() in why.lower() for w in SIZE_WORDS)
        out.append({"row": c["kernel"], "holds": holds, "why": why, "size_limited": size})
    return out, (sel if isinstance(sel, str) else (sel or {}).get("kernel") if isinstance(sel, dict) else None)


def dispatched(S, N, H, D) -> str:
    """The row the API picks for a full-layout prefill problem of this size (from `explain --json`)."""
    d, err = explain(["--seq", str(S), "--seq-kv", str(N), "--heads", str(H), "--dim", str(D), "--layout", "full"])
    return d["plan"].get("selected") if d else f"? ({err})"


def sample_rows(R, stride):
    """First rows, rows around the 2^31-th element, last rows, and a few random ones."""
    b = min(R - 1, INT31 // stride) if GPU else R // 2
    rows = {0, 1, R // 2, max(0, b - 1), b, min(R - 1, b + 1), R - 2, R - 1}
    g = torch.Generator().manual_seed(R)
    rows |= set(torch.randint(0, R, (6,), generator=g).tolist())
    return sorted(r for r in rows if 0 <= r < R)


def large_prefill_api(spec) -> list[dict]:
    """Child: the dispatched row through the API, fp32/bf16, full/compressed, sampled rows vs float32."""
    S, N, H, D = spec["S"], spec["N"], spec["H"], spec["D"]
    p = make_prefill(S, N, H, D, "causal", seed=spec.get("seed", 5))
    res = []
    for clean, cmp, dt in spec["variants"]:
        mcols = N if cmp else 0
        name = f"API {S}x{N} H{H} {'cmp' if cmp else 'full'} {dt} clean={int(clean)}"
        dtype = torch.bfloat16 if dt == "bf16" else torch.float32
        try:
            if GPU:  # poison: hand the allocator a NaN-filled block of the output's size first
                cols = mcols or N
                pad = -(-cols // 128) * 128
                junk = torch.full((S * pad,), float("nan"), dtype=dtype, device=DEV)
                del junk
            out = call_prefill(p, clean, mcols, dtype)
            sync()
            stride = out.stride(0)
            rows = sample_rows(S, stride)
            ref, live = prefill_ref_rows(p, rows, mcols)
            got = out[rows]
            if not clean:  # undefined entries may hold anything
                got = got.float().masked_fill(~live, NEG_INF)
            ok, msg = against_ref(got, ref, live, True, tol_for(dtype))
            res.append(dict(name=name, status="PASS" if ok else "FAIL", past=S * stride > INT31,
                            detail=f"S x row stride {S}x{stride} = {S * stride:,} elements; rows {len(rows)}: {msg}"))
            del out, ref, live, got
        except Missing as e:
            res.append(dict(name=name, status=missing_status(), past=None, detail=f"API lacks: {e}"))
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            res.append(dict(name=name, status="FAIL", past=None, detail=first_line(e)))
            if "CUDA" in str(e):
                break
        if GPU:
            torch.cuda.empty_cache()
    return res


def large_prefill_cli(spec) -> list[dict]:
    """Child: a named row through `run --input P --kernel ROW --output O`; sampled rows of O vs float32."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    S, N, H, D, row = spec["S"], spec["N"], spec["H"], spec["D"], spec["row"]
    tmp = spec["tmp"]
    p = make_prefill(S, N, H, D, "causal", seed=spec.get("seed", 5))
    pf = os.path.join(tmp, f"large_{row}_{S}_{H}.safetensors")
    of = os.path.join(tmp, f"large_{row}_{S}_{H}_out.safetensors")
    name = f"CLI --kernel {row} {S}x{N} H{H} full fp32 clean=1"
    try:
        save_file({"q": p["q"].cpu(), "kv": p["kv"].cpu(), "kv_scales": p["sc"].cpu(), "weights": p["w"].cpu(),
                   "ks": p["ks"].cpu(), "ke": p["ke"].cpu()}, pf)
        t0 = time.time()
        rc, out, err = cli("run", "--input", pf, "--kernel", row, "--force", "--output", of, "--json", timeout=600)
        dt = time.time() - t0
        if rc != 0:
            tail = " | ".join(ln for ln in err.strip().splitlines()[-3:])
            return [dict(name=name, status="FAIL", past=None, detail=f"run exit {rc} after {dt:.0f} s: {tail[:400]}")]
        info = json.loads(out) if out.strip().startswith("{") else {}
        with safe_open(of, framework="pt", device="cpu") as f:
            sl = f.get_slice("logits")
            R, C = sl.get_shape()
            rows = sample_rows(R, -(-C // 128) * 128)
            got = torch.cat([sl[r:r + 1] for r in rows]).to(DEV)
        ref, live = prefill_ref_rows(p, rows)
        ok, msg = against_ref(got, ref, live, True, 1e-3)
        stride = -(-N // 128) * 128
        return [dict(name=name, status="PASS" if ok else "FAIL", past=S * stride > INT31,
                     detail=f"kernel {info.get('kernel_name', '?')}, {info.get('time_us', 0):.0f} us; S x padded N "
                            f"{S * stride:,}; rows {len(rows)}: {msg}")]
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        return [dict(name=name, status="FAIL", past=None, detail=first_line(e))]
    finally:
        for f in (pf, of):
            if os.path.exists(f):
                os.remove(f)


def large_paged_api(spec) -> list[dict]:
    """Child: the paged API past 2^31: B*next_n x max_context_len > 2^31 with a small shared block pool."""
    B, T, H, D, blk, L = spec["B"], spec["T"], spec["H"], spec["D"], spec["block"], spec["max_len"]
    g = torch.Generator().manual_seed(11)
    ctx = torch.randint(0, L + 1, (B, T), generator=g)
    ctx[:4] = 0  # padding requests
    ctx[-4:] = L  # the last rows, past the 2^31-th element, live to the end
    p = make_paged(B, T, H, D, blk, ctx.tolist(), L, two_d=True, seed=12, phys_blocks=spec["pool"])
    res = []
    for clean, dt, oned in spec["variants"]:
        dtype = torch.bfloat16 if dt == "bf16" else torch.float32
        name = f"API paged B{B} n{T} L{L} {dt} clean={int(clean)} ctx {'[B]' if oned else '[B,n]'}"
        try:
            q = p
            if oned:  # 1-D lengths: row (b, t) ends at ctx[b] - next_n + t + 1
                q = dict(p)
                q["ctx"] = p["ctx"][:, -1].contiguous()
                q["ends"] = (q["ctx"].long().view(B, 1) - T + torch.arange(T, device=DEV)[None] + 1).clamp_min(0)
            if GPU:
                pad = -(-L // 128) * 128
                junk = torch.full((B * T * pad,), float("nan"), dtype=dtype, device=DEV)
                del junk
            out = call_paged(q, clean, dtype)
            sync()
            stride = out.stride(0)
            rows = sample_rows(B * T, stride)
            ref, live = paged_ref_rows(q, rows)
            got = out[rows].float()
            if not clean:
                got = got.masked_fill(~live, NEG_INF)
            ok, msg = against_ref(got, ref, live, True, tol_for(dtype))
            res.append(dict(name=name, status="PASS" if ok else "FAIL", past=B * T * stride > INT31,
                            detail=f"rows x row stride {B * T}x{stride} = {B * T * stride:,}; rows {len(rows)}: {msg}"))
            del out, ref, live, got
        except Missing as e:
            res.append(dict(name=name, status=missing_status(), past=None, detail=f"API lacks: {e}"))
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            res.append(dict(name=name, status="FAIL", past=None, detail=first_line(e)))
            if "CUDA" in str(e):
                break
        if GPU:
            torch.cuda.empty_cache()
    return res


def large_child(spec_json: str) -> int:
    spec = json.loads(spec_json)
    fn = {"prefill_api": large_prefill_api, "prefill_cli": large_prefill_cli, "paged_api": large_paged_api}[spec["kind"]]
    res = fn(spec)
    print("RESULT " + json.dumps(res), flush=True)
    return 0


def step_large():
    step = "large"
    say("\n== large: every dispatch row once past 2^31 output elements, sampled rows vs a float32 reference ==")
    tmp = os.environ.get("LARGE_TMP", "/tmp")
    if GPU:
        A = dict(S=46341, N=46341, H=64, D=128)  # 46341 x 46464 (padded) = 2,153,188,224 > 2^31
        A32 = dict(A, H=32)
        BIG = dict(S=65536, N=65536, H=64, D=128)  # 16 GiB of fp32 logits
        # 2200 rows x 1,048,640 (+ padding) = 2.3e9 elements: the last ~150 rows lie wholly past 2^31
        paged = dict(B=1100, T=2, H=64, D=128, block=64, max_len=16385 * 64, pool=20000)
    else:
        A = dict(S=40, N=40, H=8, D=32)
        A32 = dict(A, H=16)
        BIG = None
        paged = dict(B=3, T=2, H=8, D=64, block=16, max_len=80, pool=12)
    flags = lambda s: ["--seq", str(s["S"]), "--heads", str(s["H"]), "--dim", str(s["D"]), "--layout", "causal"]  # noqa
    jobs, notes = [], []
    rows_a, sel_a = rows_at(flags(A))
    say(f"rows at {A['S']}x{A['N']} H{A['H']}: " + ", ".join(
        f"{r['row']}{'' if r['holds'] else ' (not: ' + r['why'] + ')'}" for r in rows_a) + f"; dispatched: {sel_a}")
    variants = [(True, False, "fp32"), (False, True, "fp32"), (True, False, "bf16"), (True, True, "bf16")]
    jobs.append(dict(kind="prefill_api", variants=variants, rowname=f"{sel_a} (dispatched)", **A))
    for r in rows_a:
        if r["row"] == sel_a and GPU:  # (the smoke run sends the dispatched row through the CLI too)
            continue
        if r["holds"]:
            jobs.append(dict(kind="prefill_cli", row=r["row"], tmp=tmp, rowname=r["row"], **A))
        elif r["size_limited"]:
            record(step, f"{r['row']} at {A['S']}x{A['N']} H{A['H']}", "PASS",
                   f"ruled out by dispatch past its limit: {r['why']}")
        else:
            notes.append(f"{r['row']}: does not hold at {A['S']}x{A['N']} H{A['H']} ({r['why']})")
    _, sel_32 = rows_at(flags(A32))
    jobs.append(dict(kind="prefill_api", variants=[(True, False, "fp32")], rowname=f"{sel_32} (dispatched)", **A32))
    if BIG and os.environ.get("LARGE_SKIP_BIG") != "1":
        _, sel_big = rows_at(flags(BIG))
        jobs.append(dict(kind="prefill_api", variants=[(True, False, "fp32")], rowname=f"{sel_big} (dispatched)", **BIG))
    pflags = ["--paged", "--batch", str(paged["B"]), "--next-n", str(paged["T"]), "--context-len",
              str(paged["max_len"] // 2), "--context-jitter", "0.99", "--heads", str(paged["H"]), "--dim",
              str(paged["D"]), "--block-size", str(paged["block"])]
    rows_p, sel_p = rows_at(pflags)
    others = [r["row"] for r in rows_p if r["row"] != sel_p and r["holds"]]
    if others:
        notes.append(f"paged rows other than the dispatched {sel_p} not run past 2^31 here: {', '.join(others)}")
    jobs.append(dict(kind="paged_api", rowname=f"{sel_p} (dispatched)",
                     variants=[(True, "fp32", False), (False, "fp32", False), (True, "bf16", False),
                               (True, "fp32", True)], **paged))
    for n in notes:
        say("note: " + n)

    # children: one process per job (a crash loses one CUDA context, not the step); CLI jobs in parallel
    n_par = int(os.environ.get("LARGE_JOBS", "2"))
    env = dict(os.environ)
    running, table_rows = [], []
    pending = list(jobs)

    def start(job):
        args = [sys.executable, os.path.abspath(__file__), "_large_child", json.dumps(job)] + (["--smoke"] if SMOKE else [])
        say(f"start: {job['kind']} {job.get('rowname')} {job.get('S', job.get('B'))}")
        log = open(os.path.join(tmp, f"large_child_{len(table_rows)}_{time.time_ns()}.log"), "w+")
        job = dict(job, _log=log)  # a file, not a pipe: a chatty child must never block on a full pipe
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env), job, time.time()

    def finish(proc, job, t0):
        proc.wait()
        log = job.pop("_log")
        log.seek(0)
        out = log.read()
        log.close()
        os.remove(log.name)
        line = next((ln for ln in out.splitlines() if ln.startswith("RESULT ")), None)
        dt = time.time() - t0
        if line is None:
            tail = " | ".join(out.strip().splitlines()[-4:])[:500]
            record(step, f"{job.get('rowname')} {job['kind']}", "FAIL", f"child exit {proc.returncode} ({dt:.0f} s): {tail}")
            table_rows.append([job.get("rowname"), job["kind"], "?", "FAIL", f"crash: {tail[:120]}"])
            return
        if proc.returncode != 0 or "Traceback" in out:
            say(out[-3000:])
        for r in json.loads(line[len("RESULT "):]):
            if GPU and r["status"] == "PASS" and r.get("past") is False:
                r["status"], r["detail"] = "FAIL", "the case did not pass 2^31 elements: " + r["detail"]
            record(step, f"{job.get('rowname')}: {r['name']}", r["status"], r["detail"], past_2_31=r.get("past"))
            table_rows.append([job.get("rowname"), r["name"], {True: "yes", False: "NO", None: "?"}[r.get("past")],
                               r["status"], r["detail"][-110:]])

    limit = float(os.environ.get("LARGE_CHILD_S", "300"))
    while pending or running:
        while pending and len(running) < n_par:
            running.append(start(pending.pop(0)))
        time.sleep(0.5)
        for item in list(running):
            if item[0].poll() is None and time.time() - item[2] > limit:
                item[0].kill()  # recorded as a failure below: no RESULT line
                say(f"killed after {limit:.0f} s: {item[1]['kind']} {item[1].get('rowname')}")
            if item[0].poll() is not None:
                running.remove(item)
                finish(*item)
    say("")
    say(table(table_rows, ["row", "case", "past 2^31", "result", "detail"]))


# --------------------------------------------------------------------------------------- bad metadata (30)

def _deepgemm_schedule(ctx, next_n, P):
    """DeepGEMM's sm90 schedule format, from its description (shared/context/engine-call-sites.md): entry p =
    (q atom, 256-token split) where program p starts; atoms of 2 draft rows at next_n >= 2; every atom of sequence
    b has ceil(ctx[b, next_n - 1] / 256) splits; the total shared evenly, the last programs one more; entry P =
    (batch x atoms, 0)."""
    c = ctx.long().cpu()
    last = c[:, -1] if c.dim() == 2 else c
    atoms = 1 if next_n == 1 else -(-next_n // 2)
    splits = ((last.clamp_min(0) + 255) // 256).repeat_interleave(atoms).tolist()
    base, extra = divmod(sum(splits), P)
    rows, s = [], 0
    for p in range(P):
        acc, hit = 0, (len(splits), 0)
        for a, n in enumerate(splits):
            if s < acc + n:
                hit = (a, s - acc)
                break
            acc += n
        rows.append(hit)
        s += base + (1 if p >= P - extra else 0)
    rows.append((len(splits), 0))
    return torch.tensor(rows, dtype=torch.int32, device=ctx.device)


def _bad_schedules(ctx, next_n, sms):
    m, g = api(), torch.Generator().manual_seed(30)
    B = ctx.shape[0]
    meta = lambda c, n: m.get_paged_mqa_logits_metadata(c, 64, n)  # noqa: E731
    buf = torch.full((sms + 1, 2), -7, dtype=torch.int32, device=DEV)
    buf[: sms // 2 + 1] = _deepgemm_schedule(ctx, next_n, sms // 2)
    rnd = lambda lo, hi: torch.randint(lo, hi, (sms + 1, 2), generator=g, dtype=torch.int64).to(  # noqa: E731
        torch.int32).to(DEV)
    valid = {"own": meta(ctx, sms), "deepgemm": _deepgemm_schedule(ctx, next_n, sms),
             "deepgemm num_sms//2 slice": buf[: sms // 2 + 1], "from ctx.clamp(min=1)": meta(ctx.clamp(min=1), sms)}
    bad = {"smaller batch": meta(ctx[: B - 1], sms), "larger batch": meta(torch.cat([ctx, ctx]), sms),
           "large negative": rnd(-2 ** 31, -2 ** 20), "small random [-3, 4)": rnd(-3, 4),
           "large positive": rnd(2 ** 20, 2 ** 31 - 1), "reversed": meta(ctx, sms).flip(0).contiguous()}
    return valid, bad


def step_badmeta():
    step = "badmeta"
    say("\n== badmeta: foreign, stale and garbage schedules, block ids out of range: never a fault or a hang ==")
    import threading

    hang_s = float(os.environ.get("BADMETA_HANG_S", "120"))
    m = api()
    sms = m.get_num_sms() if GPU else 4
    B, H, D, blk = (8, 64, 128, 64) if GPU else (3, 8, 64, 64)
    errors = user_error_types()

    def guarded(name, fn):
        """fn() under a watchdog: a hang ends the process after recording it (the kernel cannot be stopped)."""
        timer = threading.Timer(hang_s, lambda: (record(step, name, "FAIL", f"hang: no return in {hang_s:.0f} s"),
                                                 say("RESULT: FAIL"), os._exit(3)))
        timer.start()
        try:
            out = fn()
            sync()
            return out
        finally:
            timer.cancel()

    # BADMETA_NEXT_N: the next_n values to run (default 1,2,4; under memcheck one is enough); --smoke: one
    next_ns = [int(x) for x in os.environ.get("BADMETA_NEXT_N", "1,2,4" if GPU else "2").split(",")]
    for next_n in next_ns:
        lens = [3000, 0, 700, 64, 1, 2049, 5000, 128] if GPU else [300, 0, 700]
        ctx = [[max(0, c - 3 + t) for t in range(next_n)] for c in lens[:B]]
        p = make_paged(B, next_n, H, D, blk, ctx if next_n > 1 else [c[-1] for c in ctx], 5000 if GPU else 800,
                       two_d=next_n > 1, seed=next_n)
        # the cache as it is (the Gluon row on sm90) and inside a buffer with a block stride TMA cannot describe
        # (4 bytes more per block: the portable row)
        nb, row = p["flat"].shape
        wide = torch.zeros(nb, row + 4, dtype=torch.uint8, device=DEV)
        wide[:, :row] = p["flat"]
        portable = torch.as_strided(wide, (nb, blk, 1, D + 4), (row + 4, D + 4, D + 4, 1))
        for kname, cache in (("dispatched", p["kv_cache"]), ("portable", portable))[: 2 if GPU else 1]:
            tag = f"next_n {next_n} {kname}"
            base = dict(p, kv_cache=cache)
            try:
                none = guarded(f"{tag}: schedule_meta None", lambda: call_paged(base, True, meta=None))
                ref, live = paged_ref_rows(base, list(range(B * next_n)))
                ok, msg = against_ref(none, ref, live, True, 1e-3)
                record(step, f"{tag}: schedule_meta None vs reference", "PASS" if ok else "FAIL", msg)
            except Exception as e:  # noqa: BLE001
                record(step, f"{tag}: schedule_meta None", "FAIL", first_line(e))
                continue
            valid, bad = _bad_schedules(p["ctx"], next_n, sms)
            for sname, sched in {**valid, **bad}.items():
                name = f"{tag}: schedule {sname}"
                try:
                    out = guarded(name, lambda: call_paged(base, True, meta=sched))
                    same = torch.equal(out, none)
                    record(step, name, "PASS" if same else "FAIL",
                           "bit for bit as schedule_meta=None" if same else f"{int((out != none).sum())} logits differ")
                except Exception as e:  # noqa: BLE001
                    record(step, name, "FAIL", first_line(e))
                try:
                    guarded(name + " (checked)", lambda: m.fp8_paged_mqa_logits(
                        base["q"], cache, base["w"], base["ctx"], base["bt"], sched, base["max_len"], True,
                        check_values=True))
                    record(step, name + " (checked)", "PASS" if sname in valid else "FAIL",
                           "accepted" if sname in valid else "not refused")
                except errors as e:
                    record(step, name + " (checked)", "FAIL" if sname in valid else "REFUSED", first_line(e))
                except Exception as e:  # noqa: BLE001
                    record(step, name + " (checked)", "FAIL", first_line(e))
            for vname, v in (("num_blocks", nb), ("num_blocks + 7", nb + 7), ("-1", -1), ("2^30", 2 ** 30),
                             ("-2^31", -2 ** 31), ("2^31 - 1", 2 ** 31 - 1)):
                bt = p["bt"].clone()
                bt[0, 0] = v
                bt[-1, :] = v
                name = f"{tag}: block ids {vname}"
                try:
                    out = guarded(name, lambda: call_paged(base, True, meta=None, bt=bt))
                    rows = list(range(B * next_n))
                    if kname == "portable" or not GPU:  # ids clamped into [0, num_blocks)
                        ref, live = paged_ref_rows(dict(base, bt=bt.clamp(0, nb - 1)), rows)
                        ok, msg = against_ref(out, ref, live, True, 1e-3)
                        msg = "as the ids clamped into [0, num_blocks): " + msg
                    else:  # the Gluon row: TMA's bounds (zeros, or a block the wrapped coordinate names)
                        mid = rows[next_n:-next_n]
                        ref, live = paged_ref_rows(base, mid)
                        ok, msg = against_ref(out[mid], ref, live, True, 1e-3)
                        _, live_all = paged_ref_rows(base, rows)
                        finite = bool(torch.isfinite(out[live_all]).all())
                        ok = ok and finite
                        msg = f"untouched sequences: {msg}; the others' live logits finite: {finite}"
                    record(step, name, "PASS" if ok else "FAIL", msg)
                except Exception as e:  # noqa: BLE001
                    record(step, name, "FAIL", first_line(e))
                try:
                    guarded(name + " (checked)", lambda: m.fp8_paged_mqa_logits(
                        base["q"], cache, base["w"], base["ctx"], bt, None, base["max_len"], True, check_values=True))
                    record(step, name + " (checked)", "FAIL", "not refused")
                except errors as e:
                    record(step, name + " (checked)", "REFUSED", first_line(e))
                except Exception as e:  # noqa: BLE001
                    record(step, name + " (checked)", "FAIL", first_line(e))


# ------------------------------------------------------------------------------------------------- main

STEPS = {"capture": step_capture, "hostcost": step_hostcost, "views": step_views, "engines": step_engines,
         "large": step_large, "badmeta": step_badmeta}


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--smoke"]
    if args and args[0] == "_large_child":
        return large_child(args[1])
    steps = args or list(STEPS)
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        say(f"unknown step(s) {unknown}; steps: {', '.join(STEPS)}")
        return 2
    if GPU and not torch.cuda.is_available():
        say("no CUDA device: run with --smoke on CPU")
        return 2
    say(f"gpu_checks {' '.join(steps)} on {torch.cuda.get_device_name() if GPU else 'cpu (smoke, interpreter)'}, "
        f"torch {torch.__version__}")
    for s in steps:
        t0 = time.time()
        try:
            STEPS[s]()
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            record(s, s, "FAIL", f"step crashed: {first_line(e)}")
        say(f"({s}: {time.time() - t0:.0f} s)")
    bad = [r for r in RESULTS if r["status"] in ("FAIL", "MISSING")]
    counts = {k: sum(r["status"] == k for r in RESULTS) for k in ("PASS", "REFUSED", "SKIP", "MISSING", "FAIL")}
    say("")
    say(f"gpu_checks {' '.join(steps)}: " + ", ".join(f"{v} {k}" for k, v in counts.items() if v))
    for r in bad[:25]:
        say(f"  {r['status']} [{r['step']}] {r['check']}: {r['detail']}")
    say("RESULT: " + ("PASS" if not bad else "FAIL"))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
