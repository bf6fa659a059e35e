"""Side by side on the GPU, each call checked before it is timed: configs of one Gluon kernel, or the API's call
forms beside DeepGEMM's.

    python3 tools/ab.py configs --row gluon_ws_sm90 --variants "PTX_SLOTS=0;PTX_SLOTS=1" [--only TEXT,...] [--heads-dims H:D,...]
    python3 tools/ab.py configs --row paged_ws_sm90 --variants "PTX_SLOTS=0;PTX_SLOTS=1" [--shapes B:C,...] [--next-n 1,2]
    python3 tools/ab.py decode [--shapes B:C,...] [--next-n 1,2] [--forms none,given]
    python3 tools/ab.py prefill [--only TEXT,...]
    python3 tools/ab.py drafts [--shapes B:C,...] [--next-n 3,6]

Every call is checked before it is timed, side by side in rounds of alternating order; decode, prefill and drafts
take --smoke (tiny shapes on the CPU, no timing). A Markdown table on stdout, a CSV under $OUT; exit 1 when a
check failed. docs/GPU-PLAN.md ("tools/ab.py") says what each mode runs and how it times.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "tune"))  # sweep_common.py: the sweeps' launch and decode-step builders
import sweep_common  # noqa: E402
OUT = Path(os.environ.get("OUT") or "/tmp/out")
REL_TOL = 2e-3
COPY_TBS = 4.3
DECODE_SHAPES = ((1, 8192), (8, 8192), (64, 8192), (128, 8192), (8, 65536), (64, 65536), (128, 65536), (4096, 8192))
DRAFTS_SHAPES = tuple((b, c) for c in (8192, 65536) for b in (8, 32, 64, 128))
ROWS = ("gluon_ws_sm90", "paged_ws_sm90")
FORMS = ("none", "given", "half")
DTYPES = {"fp32": None, "bf16": None}  # filled with torch dtypes in main (no torch import at module load)
DEV = "cuda"  # "cpu" with --smoke


# ------------------------------------------------------------------------------------------------ shared parts

def deep_gemm():
    """deep_gemm when it imports here, else None (its columns stay empty) and a line saying why."""
    try:
        import deep_gemm as dg

        return dg
    except Exception as e:  # noqa: BLE001  (not in place on this machine)
        print(f"DeepGEMM not importable: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}")
        return None


def dg_paged(dg, q, t, ctx, block_table, maxlen: int, sms: int, dtype):
    """DeepGEMM's paged call on (q, t's cache) given its own metadata, as vLLM calls it on sm90."""
    meta = dg.get_paged_mqa_logits_metadata(ctx, 64, sms)
    return lambda: dg.fp8_fp4_paged_mqa_logits((q, None), t.kv_cache, t.weights, ctx, block_table, meta, maxlen,
                                               clean_logits=False, logits_dtype=dtype)


def base_module(folder: str | None):
    """mqa_cli_base from a tree tools/base_tree.sh wrote (an earlier commit, timed beside this checkout), or None."""
    if not folder:
        return None
    sys.path.insert(0, str(Path(folder).resolve()))
    import mqa_cli_base

    print(f"beside: mqa_cli_base from {mqa_cli_base.__file__} (commit {(Path(folder) / 'REV').read_text().strip()})")
    return mqa_cli_base


def clock_power() -> str:
    """'MHz, W' as NVML reads them now (the card's state after a shape's timings), or '-'."""
    try:
        import torch

        return f"{torch.cuda.clock_rate()}, {torch.cuda.power_draw() / 1000:.0f}"
    except Exception:  # noqa: BLE001  (no NVML here)
        return "-"


def rel_err(got, ref) -> float:
    """||got - ref|| / ||ref|| in float64."""
    return float((got - ref).double().norm() / ref.double().norm().clamp_min(1e-30))


def variants(text: str) -> list[str]:
    """'A;B;...' -> ['A', 'B', ...] (an empty entry is the table's config); at least two."""
    out = [v.strip() for v in text.split(";")]
    if len(out) < 2:
        raise SystemExit(f"--variants needs two or more entries separated by ';', got {text!r}")
    return out


def shapes(text: str) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in s.split(":")) for s in text.split(",") if s]


def measure_copy_tbs() -> float:
    """This card's device-to-device copy rate (TB/s, bytes read plus written; 1 GiB, median of do_bench): the
    ceiling a decode step's bytes are held against, measured in the same call as the times it divides."""
    global COPY_TBS
    if DEV == "cuda":
        import torch
        import triton

        src = torch.empty(1 << 30, dtype=torch.uint8, device=DEV)
        dst = torch.empty_like(src)
        ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=50, rep=300, return_mode="median")
        COPY_TBS = 2 * src.numel() / (ms * 1e-3) / 1e12
        del src, dst
        torch.cuda.empty_cache()
    return COPY_TBS


def copy_pct(ctx, B: int, n: int, maxlen: int, us: float, dim: int = 128, out_bytes: int = 4) -> float:
    """% of this card's copy rate (measure_copy_tbs) for a decode step of `us`: each sequence's cache (fp8 rows +
    fp32 scales) up to its largest row end (ctx [B, n]) read once, and the [B * n, maxlen] logits written."""
    nbytes = int(ctx.long().max(dim=1).values.sum()) * (dim + 4) + B * n * maxlen * out_bytes
    return nbytes / (us * 1e-6) / (COPY_TBS * 1e12) * 100


def timed(calls: dict, rounds: int) -> tuple[dict, callable]:
    """The calls side by side: ({name: median µs}, ratio(a, b) = median of the rounds' a / b)."""
    from mqa_cli.bench import timing

    if DEV == "cpu":  # --smoke: each call once, no timing
        r = [{k: (f(), 1.0)[1] for k, f in calls.items()} for _ in range(2)]
        return {k: 1.0 for k in calls}, (lambda a, b: timing.ratio_in_rounds(r, a, b))
    r = timing.side_by_side(calls, rounds=rounds)
    return {k: timing.median_in_rounds(r, k) for k in calls}, (lambda a, b: timing.ratio_in_rounds(r, a, b))


class Report:
    """A Markdown table on stdout and the same rows in $OUT/ab_<mode>_<dtype>.csv."""

    def __init__(self, mode: str, header: list[str]):
        OUT.mkdir(parents=True, exist_ok=True)
        self.f = open(OUT / f"ab_{mode}.csv", "w", newline="")
        self.csv = csv.writer(self.f)
        self.csv.writerow(header)
        self.bad = 0
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header), flush=True)

    def row(self, cells: list, failed: bool = False) -> None:
        self.bad += bool(failed)
        print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)
        self.csv.writerow(cells)
        self.f.flush()


# ------------------------------------------------------------------------------------------------- configs

def configs_prefill(args, names: list[str]) -> int:
    import torch

    from mqa_cli.check.reference import compress_logits, reference_logits
    from mqa_cli.check.verify import compare
    from mqa_cli.launch import families as launchers
    from mqa_cli.errors import UserError
    from mqa_cli.plan.overrides import apply_overrides, key_values
    from mqa_cli.problem import matrix, source
    from mqa_cli.problem.prefill import ProblemSpec
    from mqa_cli.problem.suites import longest_row
    from mqa_kernels.prefill.gluon_ws_sm90.config import OVERRIDE_KEYS, gluon_ws_sm90_config

    units = torch.cuda.get_device_properties(0).multi_processor_count
    rep = Report("configs", ["shape", "layout", *(f"µs {n or 'table'}" for n in names),
                             *(f"{n or 'table'} / first" for n in names[1:]), "checks"])
    extra = [matrix.BenchShape(f"1x8192 causal H{h} D{d}", ProblemSpec(batch=1, seq=8192, heads=int(h), dim=int(d)))
             for h, d in (x.split(":") for x in args.heads_dims.split(",") if x)]
    for b in list(matrix.SUITES["seed"]) + list(matrix.SUITES["heads"]) + extra:
        if args.only and not any(x in b.name for x in args.only.split(",")):
            continue
        prob = source.from_spec(b.spec)
        t = prob.materialise("cuda")
        # the form: the shape's own (clean), no clean logits, or compressed to its longest row (vLLM 0.33's call)
        clean = b.spec.clean_logits and args.form == "clean"
        M = longest_row(b.spec) if args.form == "compressed" else 0
        cfgs, outs, notes, runs = {}, {}, [], {}
        for i, text in enumerate(names):  # keyed by position: a variant may be named twice (the control)
            kv = key_values(text) if text else {}
            try:
                cfg = gluon_ws_sm90_config(heads=t.heads, dim=t.dim, S=t.S, N=t.N, clean=clean, compressed=M > 0,
                                           units=units, override={k: v for k, v in kv.items() if k in OVERRIDE_KEYS})
                # any other key is a constexpr or launch option set as given (as `dump` sets it): SMALL_REGS=24
                cfg = apply_overrides(cfg, {k: str(v) for k, v in kv.items() if k not in OVERRIDE_KEYS})
            except (ValueError, UserError) as e:
                notes.append(f"{text}: {e}"[:80])
                continue
            out = launchers.output_for(t, cfg, M)
            out.fill_(float("nan"))
            runs[i] = (lambda cfg=cfg, out=out: launchers.run(t, cfg, out, max_seqlen_k=M))
            runs[i]()
            torch.cuda.synchronize()
            cfgs[i], outs[i] = cfg, out
        if 0 not in cfgs:  # not a shape this kernel's table takes
            rep.row([b.name, "-", *["-"] * (2 * len(names) - 1), "; ".join(notes)])
            continue
        ref = reference_logits(t)
        cmp = compare(outs[0], compress_logits(ref, t.ks, t.ke, M) if M else ref, clean, rel_tol=REL_TOL)
        ok = cmp.ok
        notes.append(f"first vs reference {'ok' if cmp.ok else 'WRONG'} ({cmp.rel_error:.1e})")
        for i in cfgs:
            if i and not torch.equal(torch.nan_to_num(outs[i], nan=7.0), torch.nan_to_num(outs[0], nan=7.0)):
                notes.append(f"{names[i]} differs from the first")
                ok = False
        us, ratio = timed({i: runs[i] for i in cfgs}, args.rounds) if ok else ({}, None)
        c = cfgs[0].constexprs
        rep.row([b.name, f"{(c['Q_GROUPS'], c['KV_GROUPS'])} N {c['BLOCK_Q'] * t.heads}",
                 *(f"{us[i]:.1f}" if i in us else "-" for i in range(len(names))),
                 *(f"{ratio(i, 0):.3f}" if i in us else "-" for i in range(1, len(names))), "; ".join(notes)],
                failed=not ok)
        del t, outs
        torch.cuda.empty_cache()
    return 1 if rep.bad else 0


def configs_decode(args, names: list[str]) -> int:
    import torch

    import mqa_cli
    from mqa_cli.check.paged_reference import reference_paged
    from mqa_cli.launch.paged_ws_sm90 import paged_ws_sm90_args
    from mqa_cli.plan.build import slot_offsets, with_schedule
    from mqa_cli.plan.overrides import key_values
    from mqa_kernels.decode.paged_ws_sm90.config import paged_ws_sm90_config

    dg = deep_gemm()
    sms = mqa_cli.get_num_sms()
    rep = Report("configs", ["B", "C", "next_n", "config", *(f"µs {n or 'table'}" for n in names),
                             *(f"{n or 'table'} / first" for n in names[1:]), "DeepGEMM µs", "first / DG",
                             "first % of 4.3 TB/s", "check", "MHz, W"])
    for B, C in shapes(args.shapes):
        for n in (int(x) for x in args.next_n.split(",")):
            t = sweep_common.decode_step(B, C, n, DEV, seed=B + C)
            ctx, maxlen = t.context_lens, t.max_context_len
            calls, outs, name = {}, {}, ""
            for i, text in enumerate(names):
                kv = key_values(text) if text else {}
                read = not kv.pop("SELF_SCHEDULE", True)  # SELF_SCHEDULE=0: the schedule given, as the engines do
                cfg = paged_ws_sm90_config(heads=64, dim=128, next_n=n, block_size=64, batch=B,
                                           max_context_len=maxlen, clean=False, units=sms, override=kv or None)
                cfg, _ = slot_offsets(with_schedule(cfg, not read))  # a PTX_SLOTS build's offsets, as the plan's
                name = name or cfg.name
                out = torch.full((B * n, maxlen), float("nan"), device="cuda")
                meta = mqa_cli.get_paged_mqa_logits_metadata(ctx, 64, sms) if read else None
                calls[i] = sweep_common.jit_runner(cfg, paged_ws_sm90_args(t, cfg, out, meta))
                outs[i] = out
            if dg is not None and n <= 2:  # DeepGEMM runs next_n 1-2 on sm90
                calls["dg"] = dg_paged(dg, t.q, t, ctx, t.block_table, maxlen, sms, torch.float32)
            for k, f in calls.items():
                r = f()
                if k == "dg":
                    outs["dg"] = r
            torch.cuda.synchronize()
            live = torch.arange(maxlen, device="cuda")[None, :] < ctx.reshape(-1, 1)
            base, notes = outs[0][live], []
            for i in range(1, len(names)):
                if not torch.equal(outs[i][live], base):
                    notes.append(f"{names[i]} differs from the first!")
            if B * n * maxlen < args.reference_below:
                rel = rel_err(base, reference_paged(t, dtype=torch.float32, clean_logits=True)[live])
                check = f"ref {rel:.1e}"
                if not rel < REL_TOL:
                    notes.append("off the reference!")
            else:
                check = "bitwise"
            if "dg" in outs and not rel_err(outs["dg"][live], base) < REL_TOL:
                notes.append("differs from DeepGEMM!")
            us, ratio = timed(calls, args.rounds)
            d = us.get("dg")
            rep.row([B, f"{C // 1024}K", n, name.split("_NEXT_N_")[-1][:60], *(f"{us[i]:.2f}" for i in range(len(names))),
                     *(f"{ratio(i, 0):.3f}" for i in range(1, len(names))), "-" if d is None else f"{d:.2f}",
                     "-" if d is None else f"{ratio(0, 'dg'):.3f}", f"{copy_pct(ctx, B, n, maxlen, us[0]):.1f}",
                     " ".join([check, *notes]), clock_power()], failed=bool(notes))
            del t, outs, calls
            torch.cuda.empty_cache()
    return 1 if rep.bad else 0


# --------------------------------------------------------------------------------------------------- forms

def decode_forms(args) -> int:
    import torch

    import mqa_cli

    forms = [f for f in args.forms.split(",") if f]
    unknown = sorted(set(forms) - set(FORMS))
    if unknown:
        raise SystemExit(f"unknown forms {unknown}; choose from {', '.join(FORMS)}")
    dg = deep_gemm()
    sms = mqa_cli.get_num_sms()
    dtype = DTYPES[args.dtype]
    base = base_module(args.beside)
    rep = Report(f"decode_{args.dtype}", ["B", "C", "next_n", "logits", *(f"µs {f}" for f in forms),
                                          *(f"{f} / DG" for f in forms),
                                          *(c for f in forms for c in ((f"{f} / base", f"base {f} / DG") if base
                                                                       else ())),
                                          "DeepGEMM µs",
                                          f"{forms[0]} % of {COPY_TBS:.2f} TB/s", "DG % of copy", "checks", "MHz, W"])
    for B, C in shapes(args.shapes):
        for n in (int(x) for x in args.next_n.split(",")):
            t = sweep_common.decode_step(B, C, n, DEV, seed=B + C)
            ctx, maxlen = t.context_lens, t.max_context_len
            programs = {"none": 0, "given": sms, "half": max(1, sms // 2)}  # 0: no schedule given
            calls, outs, notes = {}, {}, []
            for f in forms:
                for name, mod in ((f, mqa_cli), (f"base {f}", base)):  # the same form through the earlier commit
                    if mod is None:
                        continue
                    meta = mod.get_paged_mqa_logits_metadata(ctx, 64, programs[f]) if programs[f] else None
                    call = (lambda m=meta, mod=mod: mod.fp8_paged_mqa_logits(
                        t.q, t.kv_cache, t.weights, ctx, t.block_table, m, maxlen, clean_logits=False,
                        logits_dtype=dtype))
                    try:
                        outs[name] = call()
                        calls[name] = call
                    except Exception as e:  # noqa: BLE001  (a form the API refuses is a result)
                        notes.append(f"{name} refused: {type(e).__name__}: {str(e)[:80]}")
            if dg is not None and n in (1, 2, 4):  # next_n 4: DeepGEMM 2.8.1's multicast on num_sms // 2 ranges
                try:
                    calls["dg"] = dg_paged(dg, t.q, t, ctx, t.block_table, maxlen, sms // (2 if n == 4 else 1), dtype)
                    outs["dg"] = calls["dg"]()
                except RuntimeError as e:  # 54e2261 runs next_n 1-2 only
                    calls.pop("dg", None)
                    notes.append(f"DeepGEMM refused: {str(e)[-60:]}")
            if DEV == "cuda":
                torch.cuda.synchronize()
            live = torch.arange(maxlen, device=DEV)[None, :] < ctx.reshape(-1, 1)
            first = next((f for f in forms if f in outs), None)
            for f in outs:
                if f != "dg" and f != first and not torch.equal(outs[f][live], outs[first][live]):
                    notes.append(f"{f} differs from {first}!")
            if first and "dg" in outs and not rel_err(outs["dg"][live], outs[first][live]) < REL_TOL * (
                    1 if dtype == torch.float32 else 4):
                notes.append("differs from DeepGEMM!")
            us, ratio = timed(calls, args.rounds) if calls else ({}, None)
            d = us.get("dg")
            ob = torch.finfo(dtype).bits // 8
            rep.row([B, f"{C // 1024}K", n, args.dtype, *(f"{us[f]:.2f}" if f in us else "-" for f in forms),
                     *(f"{ratio(f, 'dg'):.3f}" if f in us and d else "-" for f in forms),
                     *(c for f in forms for c in ((f"{ratio(f, 'base ' + f):.3f}" if f in us else "-",
                                                   f"{ratio('base ' + f, 'dg'):.3f}" if f in us and d else "-")
                                                  if base else ())),
                     "-" if d is None else f"{d:.2f}",
                     f"{copy_pct(ctx, B, n, maxlen, us[first], out_bytes=ob):.1f}" if first in us else "-",
                     "-" if d is None else f"{copy_pct(ctx, B, n, maxlen, d, out_bytes=ob):.1f}",
                     "; ".join(notes) or "ok", clock_power()], failed=any(x.endswith("!") for x in notes))
            del t, outs, calls
            if DEV == "cuda":
                torch.cuda.empty_cache()
    return 1 if rep.bad else 0


def drafts(args) -> int:
    import torch

    import mqa_cli

    dg = deep_gemm()
    sms = mqa_cli.get_num_sms()
    dtype = DTYPES[args.dtype]
    rep = Report(f"drafts_{args.dtype}", ["B", "C", "next_n", "logits", "µs native", "µs flattened",
                                          "flattened / native", "DG flattened µs", "DG flattened / native",
                                          f"native % of {COPY_TBS:.2f} TB/s", "checks", "MHz, W"])
    for B, C in shapes(args.shapes):
        for n in (int(x) for x in args.next_n.split(",")):
            t = sweep_common.decode_step(B, C, n, DEV, seed=B + C)
            ctx, maxlen, H, D = t.context_lens, t.max_context_len, t.q.shape[2], t.q.shape[3]
            # vLLM's flattened rows: one per draft token, its own context length, its sequence's block table row
            q1, ctx1 = t.q.reshape(B * n, 1, H, D), ctx.reshape(B * n, 1)
            bt1 = t.block_table.repeat_interleave(n, dim=0)
            meta = mqa_cli.get_paged_mqa_logits_metadata(ctx, 64, sms)
            meta1 = mqa_cli.get_paged_mqa_logits_metadata(ctx1, 64, sms)
            calls = {"native": lambda: mqa_cli.fp8_fp4_paged_mqa_logits(
                         (t.q, None), t.kv_cache, t.weights, ctx, t.block_table, meta, maxlen, logits_dtype=dtype),
                     "flattened": lambda: mqa_cli.fp8_fp4_paged_mqa_logits(
                         (q1, None), t.kv_cache, t.weights, ctx1, bt1, meta1, maxlen, logits_dtype=dtype)}
            if dg is not None:  # DeepGEMM on sm90 runs next_n 1, 2, 4: vLLM flattens the rest to next_n 1
                calls["dg"] = dg_paged(dg, q1, t, ctx1, bt1, maxlen, sms, dtype)
            outs = {k: f() for k, f in calls.items()}
            if DEV == "cuda":
                torch.cuda.synchronize()
            live = torch.arange(maxlen, device=DEV)[None, :] < ctx1
            base, notes = outs["native"][live], []
            tol = REL_TOL * (1 if dtype == torch.float32 else 4)
            for k in ("flattened", "dg"):
                if k in outs:
                    e = rel_err(outs[k][live], base)
                    notes.append(f"{k} {'bitwise' if torch.equal(outs[k][live], base) else f'{e:.1e}'}"
                                 + ("" if e < tol else " differs from native!"))
            if B * n * maxlen < args.reference_below:
                from mqa_cli.check.paged_reference import reference_paged

                e = rel_err(base.double(), reference_paged(t, dtype=torch.float32, clean_logits=True)[live].double())
                notes.append(f"ref {e:.1e}" + ("" if e < tol else " off the reference!"))
            del outs
            us, ratio = timed(calls, args.rounds)
            d = us.get("dg")
            ob = torch.finfo(dtype).bits // 8
            rep.row([B, f"{C // 1024}K", n, args.dtype, f"{us['native']:.2f}", f"{us['flattened']:.2f}",
                     f"{ratio('flattened', 'native'):.3f}", "-" if d is None else f"{d:.2f}",
                     "-" if d is None else f"{ratio('dg', 'native'):.3f}",
                     f"{copy_pct(ctx, B, n, maxlen, us['native'], out_bytes=ob):.1f}", "; ".join(notes),
                     clock_power()], failed=any(x.endswith("!") for x in notes))
            del t, calls
            if DEV == "cuda":
                torch.cuda.empty_cache()
    return 1 if rep.bad else 0


def prefill_forms(args) -> int:
    import torch

    import mqa_cli
    from mqa_cli.check.reference import compress_logits, reference_logits
    from mqa_cli.problem import matrix
    from mqa_cli.problem.suites import longest_row
    from mqa_cli.problem.tensors import random_prefill

    dg = deep_gemm()
    forms = ("clean", "noclean", "compressed")
    dtype = DTYPES[args.dtype]
    base = base_module(args.beside)
    rep = Report(f"prefill_{args.dtype}", ["shape", "logits", "max_seqlen_k", *(f"µs {f}" for f in forms),
                                           *(f"{f} / DG" for f in forms),
                                           *(c for f in forms for c in ((f"{f} / base", f"base {f} / DG") if base
                                                                        else ())),
                                           "compressed / ours noclean", "checks", "MHz, W"])
    benches = matrix.SUITES["seed"]
    if DEV == "cpu":  # --smoke: one tiny causal shape and one ratio-4 shape
        from types import SimpleNamespace

        from mqa_cli.problem.prefill import ProblemSpec

        benches = [SimpleNamespace(name="smoke 1x40 causal", spec=ProblemSpec(seq=40, heads=8, dim=32)),
                   SimpleNamespace(name="smoke 2x32 ratio 4", spec=ProblemSpec(batch=2, seq=32, ratio=4, heads=8,
                                                                               dim=32))]
    for b in benches:
        if args.only and not any(x in b.name for x in args.only.split(",")):
            continue
        t = random_prefill(b.spec, device=DEV)
        M = longest_row(b.spec)
        kv = (t.kv, t.kv_scales)

        def three(prefix, fn, q):  # the three forms through fn's keywords
            kws = {"clean": {"clean_logits": True}, "noclean": {"clean_logits": False},
                   "compressed": {"clean_logits": False, "max_seqlen_k": M}}
            return {prefix + f: (lambda k=k: fn(q, kv, t.weights, t.ks, t.ke, logits_dtype=dtype, **k))
                    for f, k in kws.items()}

        # SGLang's calls (clean or not, full width) and vLLM 0.33 / 0.34's compressed call, each as the engine
        # passes its arguments; the earlier commit's build and DeepGEMM 54e2261 take the same three through keywords
        # (54e2261's fp8_fp4_* names take logits_dtype; its legacy fp8_* names do not)
        calls = three("", mqa_cli.fp8_mqa_logits, t.q)
        calls["compressed"] = lambda: mqa_cli.fp8_fp4_mqa_logits((t.q, None), kv, t.weights, t.ks, t.ke, M,
                                                                 logits_dtype=dtype)
        calls.update(three("base ", base.fp8_mqa_logits, t.q) if base is not None else {})
        calls.update(three("dg ", dg.fp8_fp4_mqa_logits, (t.q, None)) if dg is not None else {})
        rows = torch.randperm(t.S, generator=torch.Generator().manual_seed(0))[:64].to(DEV)
        sub = type(t)(t.q[rows], t.kv, t.kv_scales, t.weights[rows], t.ks[rows], t.ke[rows])
        full_ref = reference_logits(sub)
        refs = {"clean": full_ref, "noclean": full_ref, "compressed": compress_logits(full_ref, sub.ks, sub.ke, M)}
        notes = []
        for name, fn in calls.items():
            f = name.split()[-1]
            got = fn()[rows].float()
            if got.shape != refs[f].shape:
                notes.append(f"{name}: shape {tuple(got.shape)}!")
                continue
            live = torch.isfinite(refs[f])
            e = rel_err(got[live], refs[f][live])
            if not e < REL_TOL * (1 if dtype == torch.float32 else 4) or (f == "clean" and not torch.isneginf(got[~live]).all()):
                notes.append(f"{name} off the reference ({e:.1e})!")
        us, ratio = timed(calls, args.rounds)
        rep.row([b.name, args.dtype, M, *(f"{us[f]:.1f}" for f in forms),
                 *(f"{ratio(f, 'dg ' + f):.3f}" if dg is not None else "-" for f in forms),
                 *(c for f in forms for c in ((f"{ratio(f, 'base ' + f):.3f}",
                                               f"{ratio('base ' + f, 'dg ' + f):.3f}" if dg is not None else "-")
                                              if base else ())),
                 f"{ratio('compressed', 'noclean'):.3f}", "; ".join(notes) or "ok", clock_power()],
                failed=bool(notes))
        del t, calls
        if DEV == "cuda":
            torch.cuda.empty_cache()
    return 1 if rep.bad else 0


# ---------------------------------------------------------------------------------------------------- main

def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("configs", help="configs of one Gluon kernel, its table's config with override keys")
    c.add_argument("--row", choices=ROWS, required=True)
    c.add_argument("--variants", required=True, help="override-key sets separated by ';' (K=V,...), the first the base")
    c.add_argument("--only", default=None, help="prefill: comma-separated texts, shapes whose name holds one")
    c.add_argument("--heads-dims", default="", help="prefill: more 1x8192 causal shapes, H:D,... (e.g. 16:256,128:64)")
    c.add_argument("--form", choices=("clean", "noclean", "compressed"), default="clean",
                   help="prefill: the output form timed (compressed: [S, longest row], vLLM 0.33's call)")
    d = sub.add_parser("decode", help="the API's decode forms beside DeepGEMM")
    d.add_argument("--forms", default="none,given", help=f"comma-separated, of {', '.join(FORMS)}")
    p = sub.add_parser("prefill", help="the API's prefill forms (clean, no clean, compressed) beside DeepGEMM")
    p.add_argument("--only", default=None, help="comma-separated texts: seed shapes whose name holds one")
    f = sub.add_parser("drafts", help="vLLM's speculative decode step, native next_n against flattened rows")
    for x, shapes_, next_n in ((c, DECODE_SHAPES, "1,2"), (d, DECODE_SHAPES, "1,2"), (f, DRAFTS_SHAPES, "3,6")):
        x.add_argument("--shapes", default=",".join(f"{b}:{c_}" for b, c_ in shapes_), help="decode B:C pairs")
        x.add_argument("--next-n", default=next_n)
    for x in (c, f):
        x.add_argument("--reference-below", type=int, default=2 ** 25,
                       help="check against the float32 reference when B*next_n*max_len is below this")
    for x in (c, d, p, f):
        x.add_argument("--rounds", type=int, default=6, help="timing rounds, the order reversed every round")
    for x in (d, p, f):
        x.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU (interpreter), no timing")
        x.add_argument("--dtype", choices=tuple(DTYPES), default="fp32", help="the logits' dtype (logits_dtype=)")
    for x in (d, p):
        x.add_argument("--beside", default=None, help="a tree from tools/base_tree.sh: the same calls through that "
                       "earlier commit, interleaved (columns FORM / base)")
    return ap


def main(argv=None) -> int:
    global DEV
    args = parser().parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if getattr(args, "smoke", False):
        DEV = "cpu"
        from mqa_cli.launch import interpreter

        interpreter.enable_if_no_gpu(note=False)
    import torch
    import triton

    DTYPES.update(fp32=torch.float32, bf16=torch.bfloat16)
    copy = measure_copy_tbs()
    print(f"{torch.cuda.get_device_name() if DEV == 'cuda' else 'cpu (smoke: the interpreter)'}, triton {triton.__version__}, torch {torch.__version__}: ab {args.mode} "
          f"(µs: graph replay after an L2 flush, median of the rounds; copy rate measured here: {copy:.2f} TB/s)")
    if args.mode == "configs":
        names = variants(args.variants)
        return configs_prefill(args, names) if args.row == "gluon_ws_sm90" else configs_decode(args, names)
    return {"decode": decode_forms, "prefill": prefill_forms, "drafts": drafts}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
