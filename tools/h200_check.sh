#!/usr/bin/env bash
# One device call on the H200: the steps named (in the order given), each time-boxed so that the whole call
# ends inside H200_BUDGET_S (default 570 s), then a summary table.
#
#   bash scripts/h200_check.sh env install capture hostcost views large sanitize      # e.g.
#
# Steps
#   env       GPU, clocks, versions, compute-sanitizer, memory and disk, the dispatch rows of this GPU
#   install   pip install --no-deps --no-build-isolation -e . (wheels carried in .whl first, if any);
#             any later step that needs the package installs it when this step was not named
#   tests     python3 -m pytest -q -p no:cacheprovider tests -x   (the suite's GPU-side tests run here)
#   verify    mqa-logits verify --large; verify --paged --large; verify --kernel ROW --large for every
#             other prefill row of this GPU
#   capture hostcost views large
#             python3 scripts/gpu_checks.py STEP (one process each: a lost CUDA context stays in its step)
#   sanitize  bash scripts/gpu_sanitize.sh (memcheck, racecheck, synccheck x every row)
#   deepgemm  python3 scripts/deepgemm_tests.py: DeepGEMM's own test_attention.py cases against the API;
#             DeepGEMM put in place by the anchor's build part when `anchor` did not run before
#             (ANCHOR_STEPS=build bash .anchor/run.sh; needs .anchor carried), else its sources alone
#   bench     mqa-logits bench --suite seed, and --suite decode --graph
#   anchor    bash .anchor/run.sh (the side-by-side harness with DeepGEMM; needs .anchor carried)
#   pagedws   python3 scripts/paged_ws_experiment.py --check-only (the Gluon decode kernel through the API: 41 forms)
#   sweeps    the checked, timed sweeps that write kernels/{paged_ws_sm90,tiled,topk}/tuned.py (copied to $OUT)
#   pagedsweep  the decode kernel's sweep alone (scripts/paged_ws_experiment.py --write-table; table to $OUT)
#   gluonsweep  the Gluon prefill kernel's warpgroup layouts (scripts/sweep_gluon_prefill.py --write-table)
#   headsverify  scripts/verify_heads.py: every (heads, dim) the Gluon prefill table dispatches, in four forms
#             (causal clean; window without clean logits; compressed; bf16 logits), S 2048, one process
#   variants  each config variant in VARIANTS ("ROW:KEY=V,... HEADS DIM" entries separated by ';'; default: the
#             Gluon prefill options tma_store and chains) through `mqa-logits verify --seq 2048`, one process
#             each, so that a variant that faults loses only its own line (the sweeps check in one process)
#   ncu       Nsight Compute (--clock-control none) on one launch of each problem in NCU_PROBES (';'-separated
#             scripts/ncu_probe.py arguments; default two prefill head counts and two decode shapes): speed of
#             light, memory, warp stall and scheduler sections, to $OUT/ncu.txt
#   ncusrc    Nsight Compute's per-instruction warp-stall samples (SourceCounters) of one launch of each problem in
#             NCU_SRC_PROBES (default: decode B 8 and B 1, C 8K, next_n 1): the 40 SASS instructions where warps
#             waited most, to $OUT/ncu_source.txt (the full per-instruction CSV beside it, gzipped); NCU_CLOCK=base
#             profiles at the base clock (what the 700 W cap leaves under sustained load), default none
#   phases    python3 scripts/decode_phases.py ${PHASES_ARGS}: a small decode step's phases, by the SM clock the
#             kernel's STAMPS build reads in each program, beside DeepGEMM's time, to $OUT/phases.md
#   syncab    python3 scripts/sync_ab.py ${SYNCAB_ARGS}: two configs of the decode kernel side by side (default: slot
#             waits by triton and PTX_SLOTS; --a / --b their override keys), beside DeepGEMM
#   splitab   python3 scripts/decode_split_ab.py: decode through the API (split in the kernel / given) beside
#             DeepGEMM given its metadata, incl. B 4096 C 8K (DeepGEMM put in place as for `deepgemm`)
#   ceilings  python3 scripts/mma_ceiling.py (fp8 wgmma alone) and scripts/write_ceiling.py (fill, copy)
#   overlap   python3 scripts/overlap_probe.py: fp8 wgmma with the decode epilogue between them, 1-4 warpgroups, to
#             $OUT/overlap.txt (how much of the tensor rate an fp32 epilogue leaves)
#   heads     the head-count sweep (scripts/sweep_heads.py --write-table ${HEADS_ARGS}, e.g. HEADS_ARGS="--gluon-only
#             --shapes 8x64,8x128"): the portable kernel's table and the Gluon kernel's head-count keys, to $OUT
#   topk      the top-k sweep alone, with DeepGEMM's logits + torch.topk beside it (DeepGEMM put in place as
#             for `deepgemm`); writes kernels/topk/tuned.py (copied to $OUT)
# NAME+ starts a step in the background and goes on with the next (its output is printed at the end): for
# checks whose timings do not matter, e.g. `sanitize+ deepgemm` (never beside hostcost, bench or anchor).
# Env: H200_BUDGET_S (570); DGT_CASES (sample N cases per DeepGEMM test; default all, cut by the budget);
#      SAN_JOBS / SAN_JOB_S (gpu_sanitize.sh); LARGE_JOBS / LARGE_SKIP_BIG (gpu_checks.py large);
#      H200_SMOKE=1: a dry run on CPU (gpu_checks.py / deepgemm_tests.py --smoke).
# Output: stdout and $OUT/log.txt; $OUT/summary.txt (the table); per step: checks.jsonl (gpu_checks),
# sanitize.txt, deepgemm.txt, bench_seed.csv, bench_decode.csv, anchor.tgz (the harness's files). At most 8.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
REPO=$(pwd)
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=$(command -v python3)  # the image's python3 (with torch) is found first on PATH
export PY
T0=$(date +%s)
BUDGET=${H200_BUDGET_S:-570}
STEPS=${*:-env install tests verify pagedws capture hostcost views large sanitize bench}
SLOGS=/tmp/h200_steps
mkdir -p "$SLOGS"
SUMMARY=$SLOGS/summary.rows
: >"$SUMMARY"

# per-step cap (s) and the least time worth starting it with
declare -A CAP=([env]=60 [install]=120 [tests]=200 [verify]=180 [capture]=180 [hostcost]=120 [views]=150
                [large]=240 [sanitize]=260 [deepgemm]=560 [bench]=180 [anchor]=565 [pagedws]=160 [sweeps]=560 [topk]=300 [pagedsweep]=230 [gluonsweep]=400 [heads]=420 [headsverify]=300 [variants]=200 [ncu]=240 [ceilings]=90 [overlap]=160 [splitab]=200 [ncusrc]=200 [syncab]=300 [phases]=200)
declare -A MIN=([env]=5 [install]=20 [tests]=30 [verify]=30 [capture]=20 [hostcost]=20 [views]=20
                [large]=60 [sanitize]=60 [deepgemm]=60 [bench]=30 [anchor]=120 [pagedws]=30 [sweeps]=120 [topk]=60 [pagedsweep]=90 [gluonsweep]=90 [heads]=90 [headsverify]=60 [variants]=30 [ncu]=40 [ceilings]=20 [overlap]=40 [splitab]=40 [ncusrc]=40 [syncab]=40 [phases]=40)
# the line of each step's output that says how it went
declare -A KEY=([tests]='passed|failed|error' [verify]='passed, [0-9]+ failed' [capture]='^gpu_checks [a-z]+: '
                [hostcost]='worst eager|^gpu_checks [a-z]+: ' [views]='^gpu_checks [a-z]+: ' [large]='^gpu_checks [a-z]+: '
                [sanitize]='^sanitize:' [deepgemm]='^deepgemm tests:' [pagedws]='paged_ws correctness' [sweeps]='^wrote' [pagedsweep]='^wrote|budget reached' [gluonsweep]='^wrote|^H [0-9]+:|budget reached' [heads]='^wrote|budget' [headsverify]='^verify_heads' [variants]='^variants:' [ncu]='^ncu:' [ceilings]='TF/s|TB/s' [overlap]='^\| G 2 N 128 EPI 1 \|' [ncusrc]='^ncusrc:' [splitab]='differs|not importable|^\| 4096' [syncab]='differs|off the|not importable|^\| 128 \| 64K \| 2' [phases]='^graph replay' [topk]='^wrote|DeepGEMM' [bench]='' [anchor]='bench.* exit|DeepGEMM NOT')

left() { echo $((T0 + BUDGET - $(date +%s))); }
stamp() { echo; echo "=== $* (t=$(($(date +%s) - T0)) s, $(date -u +%H:%M:%S) UTC, $(left) s left)"; }
mqa() { "$PY" -m mqa_cli "$@"; }
export -f mqa

installed() { (cd /tmp && "$PY" -c "import mqa_cli, mqa_kernels, typer, tabulate" 2>/dev/null); }

# wheels carried in .whl fill gaps in the image, for every step (hence here, not inside a step)
if ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} && echo "wheels from .whl installed to /tmp/site"
fi

do_install() {
  if "$PY" -m pip install --no-deps --no-build-isolation -e . >"$SLOGS/pip.log" 2>&1; then
    echo "pip install -e .: OK"
  else
    echo "pip install -e . FAILED:"; tail -20 "$SLOGS/pip.log"; return 1
  fi
  (cd /tmp && "$PY" -c "import mqa_cli, mqa_kernels; print('mqa_cli', mqa_cli.__file__, '| mqa_kernels', mqa_kernels.__file__)")
}

step_env() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
  "$PY" -c "import sys, torch, triton; print('python', sys.version.split()[0], '| torch', torch.__version__, 'cuda', torch.version.cuda, '| triton', triton.__version__, '|', torch.cuda.get_device_name(), torch.cuda.get_device_properties(0).multi_processor_count, 'SMs')"
  CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n1)
  echo "compute-sanitizer: ${CS:-none} $([ -n "$CS" ] && "$CS" --version | grep -i version | head -1)"
  echo "cpus $(nproc); $(free -g | awk '/Mem:/ {print "memory " $2 " GiB total, " $7 " GiB available"}')"
  df -h /tmp /dev/shm 2>/dev/null | sed 's/^/  /'
  if installed; then
    "$PY" - <<'EOF'
import json, subprocess, sys
for flags in (["--seq", "4096"], ["--seq", "4096", "--heads", "32"], ["--seq", "512"],
              ["--paged", "--batch", "64", "--context-len", "8192"]):
    r = subprocess.run([sys.executable, "-m", "mqa_cli", "explain", "--json", *flags], capture_output=True, text=True)
    try:
        d = json.loads(r.stdout)
    except Exception:
        print("explain", *flags, "->", (r.stderr.strip().splitlines() or ["?"])[-1]); continue
    rows = [f"{c['kernel']}{'*' if c['kernel'] == d['plan']['selected'] else ''}{'' if c['ok'] else ' (no: ' + (c.get('ruled_out_by') or '') + ')'}"
            for c in d["plan"]["candidates"] if all(x["ok"] for x in c["conditions"] if x["name"] in ("target", "problem"))]
    print("rows at", " ".join(flags), ":", "; ".join(rows))
EOF
  fi
  return 0
}

step_tests() { "$PY" -m pytest -q -p no:cacheprovider tests -x || return 1; }  # (pytest's 2 = interrupted)

step_verify() {
  local rc=0
  mqa verify --large || rc=1
  mqa verify --paged --large || rc=1
  local rows
  rows=$("$PY" - <<'EOF'
import json, subprocess, sys
r = subprocess.run([sys.executable, "-m", "mqa_cli", "explain", "--json", "--seq", "4096"], capture_output=True, text=True)
d = json.loads(r.stdout)
print(" ".join(c["kernel"] for c in d["plan"]["candidates"] if c["kernel"] != d["plan"]["selected"]
               and all(x["ok"] for x in c["conditions"] if x["name"] in ("target", "problem"))))
EOF
)
  for k in $rows; do
    echo "--- verify --kernel $k --large"
    mqa verify --kernel "$k" --large || rc=1
  done
  return $rc
}

step_checks() { "$PY" scripts/gpu_checks.py "$1" ${H200_SMOKE:+--smoke} || return 1; }

step_sanitize() {
  SAN_BUDGET_S=$(( $1 - 10 )) bash scripts/gpu_sanitize.sh
  case $? in 0) return 0 ;; 2) return 99 ;; *) return 1 ;; esac
}

step_deepgemm() {
  local t=$1
  dg_env
  local root=${DG_ROOT:-/tmp/DeepGEMM}
  [ -f "$root/tests/test_attention.py" ] || root=$REPO/.anchor/DeepGEMM
  [ -f "$root/tests/test_attention.py" ] || root=""  # deepgemm_tests.py looks further, or says SKIP
  t=$(( t - ($(date +%s) - STEP_T0) ))
  DG_ROOT=$root DGT_BUDGET_S=$(( t - 40 )) "$PY" scripts/deepgemm_tests.py ${H200_SMOKE:+--smoke}
  case $? in 0) return 0 ;; 2) return 99 ;; *) return 1 ;; esac
}

step_bench() {
  local rc=0
  mqa bench --suite seed --csv "$OUT/bench_seed.csv" --force || rc=1
  mqa bench --suite decode --graph --csv "$OUT/bench_decode.csv" --force || rc=1
  return $rc
}

dg_env() {  # DeepGEMM importable in this shell (built or copied in place by the anchor kit when not yet there)
  if [ ! -d /tmp/DeepGEMM/deep_gemm ] && [ -f .anchor/run.sh ]; then
    echo "DeepGEMM into place: ANCHOR_STEPS=build bash .anchor/run.sh (log: $SLOGS/anchor_build.txt)"
    OUT=/tmp/anchor_build ANCHOR_STEPS=build ANCHOR_BUDGET_S=150 timeout 160 bash .anchor/run.sh >"$SLOGS/anchor_build.txt" 2>&1
    echo "anchor build exit $?"; grep -E "import deep_gemm|NOT available|FAILED" "$SLOGS/anchor_build.txt" | head -3
  fi
  [ -d /tmp/DeepGEMM/deep_gemm ] || { echo "DeepGEMM not in place (the steps run without it)"; return 0; }
  # as the kit runs it: its JIT compiles with nvcc and the system g++ (the image's other g++ breaks it)
  local nvcc
  nvcc=$(ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -n1)
  [ -n "$nvcc" ] && export CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
  export PATH=/usr/bin:/bin${CUDA_HOME:+:$CUDA_HOME/bin}:$PATH
  export DG_JIT_CACHE_DIR=/tmp/dg_jit_cache
  mkdir -p "$DG_JIT_CACHE_DIR"
  [ -f .anchor/prebuilt/dg_jit_cache.tgz ] && [ ! -d "$DG_JIT_CACHE_DIR/cache" ] && tar -xzf .anchor/prebuilt/dg_jit_cache.tgz -C "$DG_JIT_CACHE_DIR"
  export PYTHONPATH=/tmp/DeepGEMM${PYTHONPATH:+:$PYTHONPATH}
}

step_syncab() {  # the decode kernel's slot waits by triton and in PTX (PTX_SLOTS), beside DeepGEMM
  dg_env
  "$PY" scripts/sync_ab.py ${SYNCAB_ARGS:-} | tee "$OUT/syncab.md"
  return "${PIPESTATUS[0]}"
}

step_phases() {  # a small decode step's phases (the kernel's STAMPS build), beside DeepGEMM
  dg_env
  "$PY" scripts/decode_phases.py ${PHASES_ARGS:-} | tee "$OUT/phases.md"
  return "${PIPESTATUS[0]}"
}

step_splitab() {  # decode beside DeepGEMM through the API, split in the kernel and given
  dg_env
  "$PY" scripts/decode_split_ab.py ${SPLITAB_ARGS:-} | tee "$OUT/splitab.md"
  return "${PIPESTATUS[0]}"
}

step_topk() {  # the top-k sweep (writes kernels/topk/tuned.py) with DeepGEMM's logits + torch.topk beside it
  dg_env
  # shellcheck disable=SC2086
  "$PY" scripts/sweep_topk.py ${TOPK_ARGS:---write-table}  # e.g. TOPK_ARGS="--only paged": decode rows, no table
  local rc=$?
  cp kernels/topk/tuned.py "$OUT/topk_tuned.py"
  return $rc
}

step_pagedsweep() {  # the decode kernel's checked, timed sweep alone (writes kernels/paged_ws_sm90/tuned.py)
  PAGED_WS_BUDGET_S=$(( $1 - 30 )) "$PY" scripts/paged_ws_experiment.py --write-table
  local rc=$?
  cp kernels/paged_ws_sm90/tuned.py "$OUT/paged_ws_tuned.py"
  return $rc
}

step_gluonsweep() {  # the Gluon prefill kernel's warpgroup layouts (writes kernels/gluon_ws_sm90/tuned.py)
  GLUON_SWEEP_BUDGET_S=$(( $1 - 40 )) "$PY" scripts/sweep_gluon_prefill.py --write-table
  local rc=$?
  cp kernels/gluon_ws_sm90/tuned.py "$OUT/gluon_ws_tuned.py"
  return $rc
}

step_heads() {  # the head-count sweep: kernels/tiled/tuned.py and the Gluon kernel's head-count keys (copies: $OUT)
  # shellcheck disable=SC2086
  # an option a `variants` check failed is left out (a fault would end the sweep's process)
  local skip
  skip=$(sort -u "$SLOGS/variants_failed" 2>/dev/null | paste -sd, -)
  [ -n "$skip" ] && echo "heads: leaving out the options that failed their check: $skip"
  SWEEP_SKIP_OPTIONS=$skip SWEEP_BUDGET_S=$(( $1 - 60 )) "$PY" scripts/sweep_heads.py --write-table ${HEADS_ARGS:-}
}

export VARIANTS_DEFAULT="gluon_ws_sm90:TMA_STORE=1 8 64;gluon_ws_sm90:TMA_STORE=1 8 128;gluon_ws_sm90:TMA_STORE=1 64 128;\
gluon_ws_sm90:TMA_STORE=1 128 128;gluon_ws_sm90:CHAINS=4 64 64;gluon_ws_sm90:CHAINS=4 64 128;\
gluon_ws_sm90:CHAINS=4,BLOCK_Q=4 32 64"
step_variants() {  # each variant verified in its own process (a fault loses its line only)
  local ok=0 bad=0 v k h d rc
  : >"$SLOGS/variants_failed"
  IFS=';' read -ra vs <<<"${VARIANTS:-$VARIANTS_DEFAULT}"
  for v in "${vs[@]}"; do
    read -r k h d <<<"$v"
    timeout 90 "$PY" -m mqa_cli verify --kernel "$k" --heads "$h" --dim "$d" --seq 2048 --force >"$SLOGS/variant.txt" 2>&1
    rc=$?
    if [ "$rc" = 0 ]; then ok=$((ok + 1)); else
      bad=$((bad + 1))
      case $k in *TMA_STORE=1*) echo tma_store ;; esac >>"$SLOGS/variants_failed"
      case $k in *CHAINS=4*) echo chains ;; esac >>"$SLOGS/variants_failed"
    fi
    echo "variant $k H$h D$d: exit $rc | $(grep -vE '^\s*$' "$SLOGS/variant.txt" | tail -2 | tr '\n' ' ' | cut -c1-300)"
  done
  echo "variants: $ok passed, $bad failed"
  [ "$bad" = 0 ]
}

step_ncu() {  # hardware counters on one launch per probe (the 3rd: compiled, warm)
  local ncu probe n=0
  ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n1)
  [ -n "$ncu" ] || { echo "ncu: not found"; return 99; }
  IFS=';' read -ra probes <<<"${NCU_PROBES:-prefill 8 128;prefill 64 64;paged 8 8192 1;paged 128 65536 2}"
  for probe in "${probes[@]}"; do
    echo "===== ncu: $probe" | tee -a "$OUT/ncu.txt"
    # shellcheck disable=SC2086
    timeout 100 "$ncu" --clock-control none --target-processes all -k regex:mqa_logits --launch-skip 2 \
      --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
      --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
      "$PY" scripts/ncu_probe.py $probe >>"$OUT/ncu.txt" 2>&1 && n=$((n + 1))
    grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Registers Per|Warp Cycles Per Issued" \
      "$OUT/ncu.txt" | tail -6
  done
  echo "ncu: $n of ${#probes[@]} probes profiled"
  [ "$n" -gt 0 ]
}

step_ncusrc() {  # where warps wait, per SASS instruction (warp-state sampling), for latency-bound launches
  local ncu probe n=0 rep
  dg_env  # for dgpaged probes
  ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n1)
  [ -n "$ncu" ] || { echo "ncusrc: ncu not found"; return 99; }
  IFS=';' read -ra probes <<<"${NCU_SRC_PROBES:-paged 8 8192 1;paged 1 8192 1}"
  for probe in "${probes[@]}"; do
    rep=/tmp/ncusrc_$n
    echo "===== ncu source: $probe" | tee -a "$OUT/ncu_source.txt"
    # shellcheck disable=SC2086
    timeout 80 "$ncu" --clock-control "${NCU_CLOCK:-none}" --target-processes all -k regex:fp8_paged_mqa_logits\|mqa_logits_ws\|mqa_logits_gluon \
      --launch-skip 2 --launch-count 1 --section SpeedOfLight --section SourceCounters --section WarpStateStats \
      --section LaunchStats -f -o "$rep" "$PY" scripts/ncu_probe.py $probe \
      >>"$OUT/ncu_source.txt" 2>&1 || { echo "ncu failed on $probe"; continue; }
    "$ncu" -i "$rep.ncu-rep" --page details --section SpeedOfLight --section WarpStateStats --section LaunchStats \
      >>"$OUT/ncu_source.txt" 2>&1
    if "$ncu" -i "$rep.ncu-rep" --page source --csv --print-source sass >"$rep.csv" 2>"$rep.err"; then
      gzip -c "$rep.csv" >"$OUT/ncu_source_$n.csv.gz"
      "$PY" scripts/ncu_hot.py "$rep.csv" 40 | tee -a "$OUT/ncu_source.txt"
      n=$((n + 1))
    else
      echo "ncu --page source failed:"; head -5 "$rep.err" | tee -a "$OUT/ncu_source.txt"
    fi
  done
  echo "ncusrc: $n of ${#probes[@]} probes read per instruction"
  [ "$n" -gt 0 ]
}

step_ceilings() { "$PY" scripts/mma_ceiling.py && "$PY" scripts/write_ceiling.py; }

step_overlap() { timeout 150 "$PY" scripts/overlap_probe.py | tee "$OUT/overlap.txt"; }

step_headsverify() { "$PY" scripts/verify_heads.py; }  # every shape of the Gluon prefill table, four forms

step_sweeps() {  # the sweeps that write the tuned tables (each checks every candidate before timing it)
  local rc=0
  PAGED_WS_BUDGET_S=200 "$PY" scripts/paged_ws_experiment.py --write-table || rc=1
  SWEEP_BUDGET_S=150 "$PY" scripts/sweep_heads.py --write-table || rc=1
  dg_env
  "$PY" scripts/sweep_topk.py --write-table || rc=1
  cp kernels/paged_ws_sm90/tuned.py "$OUT/paged_ws_tuned.py"; cp kernels/tiled/tuned.py "$OUT/tiled_tuned.py"
  cp kernels/topk/tuned.py "$OUT/topk_tuned.py"
  return $rc
}

step_anchor() {
  [ -f .anchor/run.sh ] || { echo "anchor: SKIP (.anchor not carried)"; return 99; }
  rm -rf /tmp/anchor_out
  OUT=/tmp/anchor_out ANCHOR_BUDGET_S=$(( $1 - 10 )) bash .anchor/run.sh
  local rc=$?
  [ "$rc" = 0 ] || rc=1
  tar -czf "$OUT/anchor.tgz" -C /tmp/anchor_out --exclude='_C*.so' . 2>/dev/null
  if [ "$(stat -c %s "$OUT/anchor.tgz" 2>/dev/null || echo 0)" -gt 15000000 ]; then
    tar -czf "$OUT/anchor.tgz" -C /tmp/anchor_out --exclude='_C*.so' --exclude='dg_jit_cache.tgz' .
  fi
  ls -la "$OUT/anchor.tgz"
  return $rc
}

step_fn() {  # name t -> the command line of the step
  case $1 in
    env) echo "step_env" ;;
    install) echo "do_install" ;;
    tests) echo "step_tests" ;;
    verify) echo "step_verify" ;;
    capture|hostcost|views|large) echo "step_checks $1" ;;
    sanitize) echo "step_sanitize $2" ;;
    deepgemm) echo "step_deepgemm $2" ;;
    bench) echo "step_bench" ;;
    pagedws) echo "$PY scripts/paged_ws_experiment.py --check-only" ;;
    sweeps) echo "step_sweeps" ;;
    topk) echo "step_topk" ;;
    pagedsweep) echo "step_pagedsweep $2" ;;
    gluonsweep) echo "step_gluonsweep $2" ;;
    heads) echo "step_heads $2" ;;
    headsverify) echo "step_headsverify" ;;
    variants) echo "step_variants" ;;
    ncu) echo "step_ncu" ;;
    splitab) echo "step_splitab" ;;
    syncab) echo "step_syncab" ;;
    phases) echo "step_phases" ;;
    ncusrc) echo "step_ncusrc" ;;
    ceilings) echo "step_ceilings" ;;
    overlap) echo "step_overlap" ;;
    anchor) echo "step_anchor $2" ;;
  esac
}

finish_step() {  # name rc seconds -> a summary row
  local s=$1 rc=$2 dt=$3 res key=""
  case $rc in
    0) res=PASS ;;
    124|137) res=TIMEOUT ;;
    99) res=SKIP ;;
    *) res=FAIL ;;
  esac
  if [ -n "${KEY[$s]:-}" ]; then
    key=$(grep -E "${KEY[$s]}" "$SLOGS/$s.txt" | tail -3 | awk 'NR > 1 {printf " || "} {printf "%s", $0}' | cut -c1-220)
  fi
  echo "$s|$res|$rc|$dt|$key" >>"$SUMMARY"
  echo "--- $s: $res (exit $rc, ${dt} s)"
}

BG_NAMES=()
BG_PIDS=()
run_step() {  # name rest [bg]: time-box it, log it, record a summary row; bg: start it and go on
  local s=$1 rest=$2 bg=${3:-}
  local l cap t fn rc
  l=$(left)
  cap=${CAP[$s]:-120}
  if [ -n "$bg" ]; then t=$(( l - 10 )); else t=$(( l - rest )); fi
  [ "$t" -gt "$cap" ] && t=$cap
  stamp "$s (up to ${t} s${bg:+, in the background: its output comes at the end})"
  if [ "$t" -lt "${MIN[$s]:-20}" ]; then
    echo "$s: SKIP (only ${t} s left for it)"
    echo "$s|SKIP|-|0|no time left" >>"$SUMMARY"
    return
  fi
  STEP_T0=$(date +%s)
  export STEP_T0 T0 BUDGET SLOGS REPO
  export -f step_env do_install step_tests step_verify step_checks step_sanitize step_deepgemm step_bench step_anchor step_sweeps step_topk step_pagedsweep step_gluonsweep step_heads step_headsverify step_variants step_ncu step_ceilings step_overlap step_splitab step_syncab step_phases step_ncusrc dg_env installed left
  fn=$(step_fn "$s" "$t")
  if [ -n "$bg" ]; then
    ( timeout -k 10 "$t" bash -c "$fn" >"$SLOGS/$s.txt" 2>&1; echo "$? $(( $(date +%s) - STEP_T0 ))" >"$SLOGS/$s.rc" ) &
    BG_NAMES+=("$s")
    BG_PIDS+=($!)
    return
  fi
  # the step runs in a subshell under timeout; its output goes to the log and to its own file
  timeout -k 10 "$t" bash -c "$fn" 2>&1 | tee "$SLOGS/$s.txt"
  rc=${PIPESTATUS[0]}
  finish_step "$s" "$rc" $(( $(date +%s) - STEP_T0 ))
}

wait_background() {
  local i s rc dt
  for i in "${!BG_PIDS[@]}"; do
    s=${BG_NAMES[$i]}
    stamp "waiting for $s (background)"
    wait "${BG_PIDS[$i]}"
    echo "----- output of $s:"
    cat "$SLOGS/$s.txt"
    read -r rc dt <"$SLOGS/$s.rc" || { rc=1; dt=0; }
    finish_step "$s" "$rc" "$dt"
  done
}

main() {
  echo "h200_check: steps: $STEPS; budget ${BUDGET} s; OUT=$OUT; $(date -u +%F' '%H:%M:%S) UTC"
  local arr=($STEPS) i s rest bg
  for s in "${arr[@]}"; do
    [ -n "${CAP[${s%+}]:-}" ] || { echo "unknown step '$s' (steps: ${!CAP[*]}; NAME+ runs it in the background)"; exit 2; }
  done
  for i in "${!arr[@]}"; do
    s=${arr[$i]%+}
    bg=""
    [ "${arr[$i]}" != "$s" ] && bg=1
    if [ "$s" != env ] && [ "$s" != install ] && [ "$s" != anchor ] && ! installed; then
      stamp "install (needed by $s)"
      do_install || { echo "the package does not install: the remaining steps cannot run"; }
    fi
    rest=0  # keep the least time of every later foreground step
    for s2 in "${arr[@]:$((i + 1))}"; do [ "${s2%+}" = "$s2" ] && rest=$(( rest + ${MIN[$s2]:-20} )); done
    run_step "$s" "$rest" "$bg"
  done
  wait_background
  stamp "summary"
  {
    printf '| %-9s | %-7s | %-4s | %-5s | %s\n' step result exit s "key line"
    printf '|%s|\n' "-----------|---------|------|-------|------------------------------------------------------------"
    while IFS='|' read -r s res rc dt key; do
      printf '| %-9s | %-7s | %-4s | %-5s | %s\n' "$s" "$res" "$rc" "$dt" "$key"
    done <"$SUMMARY"
    echo "total $(($(date +%s) - T0)) s; files in \$OUT: $(ls "$OUT" | tr '\n' ' ')"
  } | tee "$OUT/summary.txt"
  [ "$(ls "$OUT" | wc -l)" -le 8 ] || echo "WARNING: more than 8 files in \$OUT; the device tool brings back 8"
  ! grep -q -E '\|(FAIL|TIMEOUT)\|' "$SUMMARY"
}

main 2>&1 | tee -a "$OUT/log.txt"
exit "${PIPESTATUS[0]}"
