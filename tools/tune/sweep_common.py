"""The steps the table-writing sweeps share: compile the candidates ahead, check a candidate before it is timed,
time a shape's checked candidates side by side, log as it goes, write the table module the configs read
(validated first, a copy under $OUT for a device run).

Check: the output poisoned with NaN, one launch, a sync, then the sweep's own comparison (prefill: exact -inf
pattern and relative error against the float32 reference; decode: live entries against it; top-k: the exact
set); a launch that raises (shared memory, registers, a layout the config refuses) is a result, not a crash.
Time: mqa_cli.bench.timing.side_by_side, each candidate one CUDA-graph replay after an L2 flush, in rounds of
alternating order; a candidate's time is its median over the rounds (docs/EXPERIMENTS.md, "How the sweeps time").
"""
from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path


def out_dir() -> Path:
    """$OUT (default /tmp/out), created: where a device run's files come back from."""
    p = Path(os.environ.get("OUT") or "/tmp/out")
    p.mkdir(parents=True, exist_ok=True)
    return p


class Log:
    """say(*parts): a line on stdout and in $OUT/name (opened at the first line), flushed as it is written (a
    device run cut short by its time limit still brings back what it measured)."""

    def __init__(self, name: str):
        self.name, self.file = name, None

    def __call__(self, *parts) -> None:
        line = " ".join(str(x) for x in parts)
        print(line, flush=True)
        self.file = self.file or open(out_dir() / self.name, "w")
        self.file.write(line + "\n")
        self.file.flush()


def jit_runner(cfg, a):
    """A launch of cfg's kernel with the LaunchArgs the API builds, through the JIT (so each override compiles)."""
    from mqa_cli.launch.common import jit_launch

    kern = cfg.jitted()
    return lambda: jit_launch(kern, cfg, a)


def decode_step(B: int, C: int, n: int, device: str, seed: int):
    """A decode step as the harness builds it (H 64, D 128, block 64): contexts uniform in [0.7C, 1.3C), a shuffled
    block table, 2-D context lengths [B, n] (row t of sequence b sees k < ctx_b - n + t + 1)."""
    import torch

    from mqa_cli.problem.paged import PagedSpec
    from mqa_cli.problem.paged_tensors import Paged, random_paged

    t = random_paged(PagedSpec(batch=B, next_n=n, context_len=C, context_jitter=0.3, block_size=64, seed=seed),
                     device=device)
    ctx = t.context_lens[:, None] - n + 1 + torch.arange(n, device=device, dtype=torch.int32)[None, :]
    return Paged(t.q, t.kv_cache, t.weights, ctx.clamp_min(0).to(torch.int32).contiguous(), t.block_table,
                 t.max_context_len)


def live_error(got, ref, clean: bool = False) -> tuple[float, str]:
    """(relative error of the live entries, problem or '') of decode logits against the float32 reference (-inf
    where dead); with clean, every entry past a row's end must be -inf."""
    import torch

    live = torch.isfinite(ref)
    g = got.float()
    if not torch.isfinite(g[live]).all():
        return float("inf"), "unwritten or non-finite live entries"
    den = ref[live].norm()
    err = ((g[live] - ref[live]).norm() / den).item() if den > 0 else 0.0
    if clean and not torch.isneginf(g[~live]).all():
        return err, "clean: dead entries not -inf"
    return err, ""


def check(run, out, compare) -> tuple[bool, float | None, str]:
    """(passed, relative error or None, what failed): out filled with NaN, run() once, a sync, then
    compare(out) -> (relative error, problem or ''); an exception from any of them fails the candidate."""
    import torch

    try:
        out.fill_(float("nan"))
        run()
        if out.is_cuda:
            torch.cuda.synchronize()
        err, problem = compare(out)
    except Exception as e:  # noqa: BLE001  (a config that does not fit is a result)
        return False, None, f"ERROR {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    return not problem, err, problem


ROUNDS = int(os.environ.get("SWEEP_ROUNDS", "4"))  # side-by-side timing rounds per shape, in every sweep


def side_by_side(calls: dict, rep_ms: int | None = None) -> tuple[dict, list]:
    """({key: median µs over the ROUNDS rounds}, the rounds) of the checked candidates timed side by side."""
    from mqa_cli.bench import timing

    if not calls:
        return {}, []
    kw = {"rounds": ROUNDS} if rep_ms is None else {"rounds": ROUNDS, "rep_ms": rep_ms}
    rounds_ = timing.side_by_side(calls, **kw)
    return {k: timing.median_in_rounds(rounds_, k) for k in calls}, rounds_


class Compiles:
    """Kernels compiled ahead in spawned worker processes (no interpreter, no GPU use) while the main process builds
    inputs, checks and times: compiling (1-3 s a config) dominates a sweep otherwise. A launch finds its kernel in
    Triton's cache; one whose compile failed or missed the cache compiles at launch."""

    def __init__(self, workers: int):
        from concurrent.futures import ProcessPoolExecutor
        from multiprocessing import get_context

        self.pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn")) if workers > 0 else None
        self.futures: dict = {}

    def submit(self, key, fn, *args) -> None:
        """fn(*args) in a worker, once per key (a kernel's name and launch options, at least)."""
        if self.pool is not None and key not in self.futures:
            self.futures[key] = self.pool.submit(fn, *args)

    def wait(self, keys=None, timeout: float = 600.0) -> str:
        """A line on how the compiles of keys (default: all) went, once they are done."""
        keys = list(self.futures) if keys is None else [k for k in keys if k in self.futures]
        if not keys:
            return ""
        t0 = time.time()
        bad = []
        for key in keys:
            try:
                self.futures[key].result(timeout)
            except Exception as e:  # noqa: BLE001  (the launch compiles it, or reports why it cannot)
                bad.append(f"{key}: {type(e).__name__}: {str(e)[:120]}")
        return (f"{len(keys)} compiled ahead (waited {time.time() - t0:.1f} s)"
                + (f"; {len(bad)} failed: {bad[:3]}" if bad else ""))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)


def load_table(path: Path, name: str = "CUDA_TUNED"):
    """The table `name` of the module at path ({} where the file is absent), and the module (or None)."""
    if not path.exists():
        return {}, None
    spec = importlib.util.spec_from_file_location(f"_table_{path.stem}_old", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return dict(getattr(mod, name, {})), mod


def merge_table(path: Path, entries: dict, check, doc: list[str], say, copy_as: str | None = None) -> Path:
    """Merge entries {key: (entry, comment) or None (the key goes)} into the table module at path, the other keys
    kept with the comment on their line; check(key, entry) raises for an entry its config refuses, so such a table
    is never written. Then write_table."""
    table, _ = load_table(path)
    comments = {}
    for line in path.read_text().splitlines() if table else []:
        s = line.strip()
        if s.startswith("(") and "#" in s:
            comments[s[:s.index(":")]] = s[s.index("#") + 1:].strip()
    rows = {key: (entry, comments.get(repr(key), "")) for key, entry in table.items()}
    for key, value in entries.items():
        if value is None:
            rows.pop(key, None)
        else:
            rows[key] = value
    for key, (entry, _) in rows.items():
        check(key, entry)
    body = ["CUDA_TUNED = {"] + [f"    {k!r}: {e!r},  # {c}" for k, (e, c) in sorted(rows.items())] + ["}"]
    return write_table(path, doc, body, say, copy_as)


def write_table(path: Path, doc: list[str], body: list[str], say, copy_as: str | None = None) -> Path:
    """Write the table module: its docstring (doc lines: the machine, date, versions and rule it was written by)
    and its body (`CUDA_TUNED = {...}` lines); with copy_as, the same text as $OUT/copy_as unless path is there."""
    text = '"""' + "\n".join(doc) + '"""\n\n' + "\n".join(body) + "\n"
    path.write_text(text)
    say(f"wrote {path}")
    if copy_as:
        copy = out_dir() / copy_as
        if copy.resolve() != path.resolve():
            copy.write_text(text)
            say(f"and its copy {copy}")
    return path
