#!/usr/bin/env bash
# One device call: the steps named, in order, each time-boxed inside H200_BUDGET_S, then a summary table; under
# the triton H200_TRITON names (from a carried bundle).
#   bash tools/h200_check.sh env install anchor capture views engines large+ sanitize+ deepgemm
# docs/GPU-PLAN.md ("tools/h200_check.sh") has every step, the environment, the bundles and the output files.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
REPO=$(pwd)
export PYTHONUNBUFFERED=1
PY=$(command -v python3)  # the image's python3 (with torch) is found first on PATH
export PY

# wheels carried in .whl fill gaps in the image, for every step (hence here, not inside a step)
if ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} && echo "wheels from .whl installed to /tmp/site"
fi

triton_version() { (cd /tmp && "$PY" -c "import triton; print(triton.__version__)" 2>/dev/null); }

# the triton of this call: the image's, or H200_TRITON's bundle ahead of it (its header: ../shared/tools/triton-bundle.sh)
use_triton() {  # VERSION -> exported PYTHONPATH, TRITON_PTXAS_PATH, TRITON_CACHE_DIR; exit 2 when it cannot
  local want=$1 have bundle dir
  have=$(triton_version)
  if [ -n "$want" ] && [ "$want" != "$have" ]; then
    local tb=${H200_BUNDLES:-.tb}
    bundle=$(ls "$tb/$want/triton-$want.tar.xz" "$tb/triton-$want.tar.xz" 2>/dev/null | head -n1)
    if [ -z "$bundle" ]; then
      echo "H200_TRITON=$want: no bundle at $tb/$want/triton-$want.tar.xz (build it with ../shared/tools/triton-bundle.sh"
      echo "and name .tb/$want in the call's carry: docs/GPU-PLAN.md); the image has triton ${have:-none}"
      exit 2
    fi
    dir=/tmp/tb-$want
    if [ ! -f "$dir/triton/__init__.py" ]; then
      mkdir -p "$dir" && tar -xJf "$bundle" -C "$dir" || { echo "could not unpack $bundle"; exit 2; }
    fi
    export PYTHONPATH=$dir${PYTHONPATH:+:$PYTHONPATH}
    local wheel_ptxas=${bundle%/*}/ptxas-sm90.xz  # tools/carry.sh: the ptxas the release's wheel compiles sm90 with
    if [ -z "${TRITON_PTXAS_PATH:-}" ] && [ -s "$wheel_ptxas" ]; then
      [ -x "$dir/ptxas-sm90" ] || { xz -dc "$wheel_ptxas" >"$dir/ptxas-sm90" && chmod +x "$dir/ptxas-sm90"; } \
        || { echo "could not unpack $wheel_ptxas"; exit 2; }
      export TRITON_PTXAS_PATH=$dir/ptxas-sm90 TRITON_PTXAS_BLACKWELL_PATH=$dir/ptxas-sm90
    fi
    if [ ! -x "$dir/triton/backends/nvidia/bin/ptxas" ]; then  # the bundle leaves ptxas out: the device's CUDA has it
      TRITON_PTXAS_PATH=${TRITON_PTXAS_PATH:-$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | head -n1)}
      export TRITON_PTXAS_PATH
    fi
    if [ ! -x "$dir/triton/backends/nvidia/bin/ptxas-blackwell" ]; then  # 3.9 compiles sm90+ with ptxas-blackwell
      TRITON_PTXAS_BLACKWELL_PATH=${TRITON_PTXAS_BLACKWELL_PATH:-${TRITON_PTXAS_PATH:-$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | head -n1)}}
      export TRITON_PTXAS_BLACKWELL_PATH
    fi
    have=$(triton_version)
    if [ "$have" != "$want" ]; then
      echo "H200_TRITON=$want: python3 imports triton ${have:-none} after unpacking $bundle"; exit 2
    fi
    echo "triton $have from $bundle (unpacked to $dir; ptxas ${TRITON_PTXAS_PATH:-of the bundle})"
  fi
  export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/triton-cache-${have:-none}}
  TRITON_VERSION=${have:-none}
  export TRITON_VERSION
}
use_triton "${H200_TRITON:-}"
export OUT=${OUT:-/tmp/out}/$TRITON_VERSION
mkdir -p "$OUT"
T0=$(date +%s)
BUDGET=${H200_BUDGET_S:-570}
STEPS=${*:-env install verify gpu hostcost sanitize}
SLOGS=/tmp/h200_steps/$TRITON_VERSION
mkdir -p "$SLOGS"
SUMMARY=$SLOGS/summary.rows
: >"$SUMMARY"

# per-step cap (s) and the least time worth starting it with
declare -A CAP=([env]=60 [install]=120 [verify]=180 [gpu]=560 [capture]=180 [hostcost]=120 [views]=150
                [large]=240 [sanitize]=260 [deepgemm]=560 [anchor]=565 [topk]=300 [pagedsweep]=230 [gluonsweep]=400 [heads]=420 [engines]=200 [badmeta]=200 [badmetamc]=420 [forms]=300 [ab]=400)
declare -A MIN=([env]=5 [install]=20 [verify]=30 [gpu]=60 [capture]=20 [hostcost]=20 [views]=20
                [large]=60 [sanitize]=60 [deepgemm]=60 [anchor]=120 [topk]=60 [pagedsweep]=90 [gluonsweep]=90 [heads]=90 [engines]=30 [badmeta]=30 [badmetamc]=60 [forms]=60 [ab]=40)
# the line of each step's output that says how it went
declare -A KEY=([verify]='passed, [0-9]+ failed' [gpu]='passed|failed|error'
                [capture]='passed|failed|error' [hostcost]='worst eager|^gpu_checks [a-z]+: ' [views]='passed|failed|error'
                [large]='passed|failed|error' [engines]='passed|failed|error' [badmeta]='passed|failed|error'
                [badmetamc]='ERROR SUMMARY|passed|failed|error' [sanitize]='^sanitize:' [deepgemm]='^deepgemm tests:' [pagedsweep]='^wrote|budget reached' [gluonsweep]='^wrote|^H [0-9]+:|budget reached' [heads]='^wrote|budget' [forms]='differs|off the|refused|not importable|^\| 1x32768|^\| 128 \| 64K \| 2' [ab]='differs|off the|not importable' [topk]='wrote|budget' [anchor]='bench.* exit|DeepGEMM NOT')

left() { echo $((T0 + BUDGET - $(date +%s))); }
stamp() { echo; echo "=== $* (t=$(($(date +%s) - T0)) s, $(date -u +%H:%M:%S) UTC, $(left) s left)"; }
mqa() { "$PY" -m mqa_cli "$@"; }
export -f mqa

installed() { (cd /tmp && "$PY" -c "import mqa_cli, mqa_kernels, typer, tabulate" 2>/dev/null); }

step_install() {
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
  local ptxas=${TRITON_PTXAS_PATH:-$(cd /tmp && "$PY" -c "import os, triton; print(os.path.join(os.path.dirname(triton.__file__), 'backends', 'nvidia', 'bin', 'ptxas'))" 2>/dev/null)}
  echo "triton $TRITON_VERSION at $(cd /tmp && "$PY" -c "import triton; print(triton.__file__)" 2>/dev/null); ptxas $ptxas: $("$ptxas" --version 2>/dev/null | tail -1)"
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

# the file of tests/gpu each check step runs (exported: the steps run in child shells)
export GPU_FILE_capture=test_capture GPU_FILE_views=test_views GPU_FILE_engines=test_engines GPU_FILE_large=test_large \
  GPU_FILE_badmeta=test_bad_schedules

step_gpu() {  # the card's checks, as tests: junit and a summary under $OUT
  dg_env ready  # DeepGEMM's schedule format and its own cases, when the anchor already put it in place
  # shellcheck disable=SC2086  (GPU_PYTEST_ARGS: more pytest arguments, e.g. -k "not deepgemm")
  eval "set -- ${GPU_PYTEST_ARGS:-}"
  # eight workers: the suite is bound by compiling kernels on the host (H100, 2026-12-07: 79 s; one process had
  # not finished in 417 s)
  OMP_NUM_THREADS=2 "$PY" -m pytest -m gpu -q -p no:cacheprovider -rfEs -n "${GPU_WORKERS:-8}" tests/gpu \
    --junitxml="$OUT/gpu-junit.xml" "$@" | tee "$SLOGS/gpu.pytest"
  local rc=${PIPESTATUS[0]}
  { grep -E '^(FAILED|ERROR|SKIPPED)' "$SLOGS/gpu.pytest" | cut -c1-300; tail -1 "$SLOGS/gpu.pytest"; } >"$OUT/gpu-summary.txt"
  return "$rc"
}

step_checks() {  # one file of tests/gpu (capture views engines large badmeta), or hostcost's measurement
  if [ "$1" = hostcost ]; then "$PY" tools/gpu_checks.py hostcost || return 1; return 0; fi
  [ "$1" = engines ] && dg_env ready
  local f=GPU_FILE_$1
  "$PY" -m pytest -m gpu -q -p no:cacheprovider -rfE "tests/gpu/${!f}.py" || return 1
}

step_badmetamc() {  # the bad-schedule tests under memcheck: nothing read or written outside the tensors
  local cs
  cs=${CS:-$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n1)}
  [ -n "$cs" ] || { echo "badmetamc: SKIP (compute-sanitizer not found)"; return 99; }
  BADMETA_NEXT_N=${BADMETA_MC_NEXT_N:-2} \
    "$cs" --tool memcheck --report-api-errors no --print-limit 20 "$PY" -m pytest -m gpu -q -p no:cacheprovider \
    tests/gpu/test_bad_schedules.py
}

step_sanitize() {
  SAN_BUDGET_S=$(( $1 - 10 )) bash tools/gpu_sanitize.sh
  case $? in 0) return 0 ;; 2) return 99 ;; *) return 1 ;; esac
}

step_deepgemm() {
  local t=$1
  dg_env
  local root=${DG_ROOT:-/tmp/DeepGEMM}
  [ -f "$root/tests/test_attention.py" ] || root=$REPO/.anchor/DeepGEMM
  [ -f "$root/tests/test_attention.py" ] || root=""  # deepgemm_tests.py looks further, or says SKIP
  t=$(( t - ($(date +%s) - STEP_T0) ))
  DG_ROOT=$root DGT_BUDGET_S=$(( t - 40 )) "$PY" tools/deepgemm_tests.py
  case $? in 0) return 0 ;; 2) return 99 ;; *) return 1 ;; esac
}

anchor_kit() {  # .anchor from .anchor-kit/deepgemm.tar.xz when the kit came packed (it fits a call with a bundle)
  if [ ! -f .anchor/run.sh ] && [ -f .anchor-kit/deepgemm.tar.xz ]; then
    mkdir -p .anchor && tar -xJf .anchor-kit/deepgemm.tar.xz -C .anchor && echo "anchor kit unpacked into .anchor"
  fi
  [ -f .anchor/run.sh ]
}

dg_env() {  # DeepGEMM importable in this shell (built or copied in place by the anchor kit when not yet there;
  # `dg_env ready`: only if it is there already)
  if [ ! -d /tmp/DeepGEMM/deep_gemm ] && [ "${1:-}" != ready ] && anchor_kit; then
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

step_forms() {  # the API's call forms side by side with DeepGEMM's (prefill, then decode)
  dg_env
  local rc=0
  OUT=$SLOGS "$PY" tools/ab.py prefill | tee "$OUT/forms.md"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  # shellcheck disable=SC2086
  OUT=$SLOGS "$PY" tools/ab.py decode --forms "${FORMS_DECODE:-none,given}" ${FORMS_DECODE_ARGS:-} | tee -a "$OUT/forms.md"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  return $rc
}

step_ab() {  # the A/Bs of tools/ab.py in AB_ARGS, AB_ARGS2, AB_ARGS3 (CSVs stay in the step logs; tables: ab.md, ab2.md, ab3.md)
  [ -n "${AB_ARGS:-}" ] || { echo "ab: set AB_ARGS (tools/ab.py's arguments)"; return 99; }
  dg_env
  local rc=0 n v args
  for n in "" 2 3; do
    v=AB_ARGS$n
    args=${!v:-}
    [ -n "$args" ] || continue
    eval "set -- $args"
    OUT=$SLOGS "$PY" tools/ab.py "$@" | tee "$OUT/ab$n.md"
    [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  done
  return $rc
}

step_topk() {  # the top-k sweep (writes kernels/topk/tuned.py, copied to $OUT)
  # shellcheck disable=SC2086
  "$PY" tools/tune/sweep_topk.py ${TOPK_ARGS:---write-table}  # e.g. TOPK_ARGS="--only paged": decode rows, no table
}

step_pagedsweep() {  # the decode kernel's checked, timed sweep alone (writes kernels/decode/paged_ws_sm90/tuned.py + copy)
  PAGED_WS_BUDGET_S=$(( $1 - 30 )) "$PY" tools/tune/paged_ws_experiment.py --write-table
}

step_gluonsweep() {  # the Gluon prefill kernel's warpgroup layouts (writes kernels/prefill/gluon_ws_sm90/tuned.py + copy)
  GLUON_SWEEP_BUDGET_S=$(( $1 - 40 )) "$PY" tools/tune/sweep_gluon_prefill.py --write-table
}

step_heads() {  # the head-count sweep: kernels/prefill/tiled/tuned.py and the Gluon kernel's head-count keys (copies: $OUT)
  # shellcheck disable=SC2086
  SWEEP_BUDGET_S=$(( $1 - 60 )) "$PY" tools/tune/sweep_heads.py --write-table ${HEADS_ARGS:-}
}

step_anchor() {
  anchor_kit || { echo "anchor: SKIP (neither .anchor nor .anchor-kit/deepgemm.tar.xz carried)"; return 99; }
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

step_fn() {  # name t -> the command line of the step: step_NAME T, else step_checks NAME (one file of tests/gpu)
  if declare -F "step_$1" >/dev/null; then echo "step_$1 $2"; else echo "step_checks $1"; fi
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
  [ -n "$BESIDE" ] && key="[timed beside $BESIDE: not for comparison] $key"
  echo "$s|$res|$rc|$dt|$key" >>"$SUMMARY"
  echo "--- $s: $res (exit $rc, ${dt} s)"
}

BG_NAMES=()
BG_PIDS=()
# the steps whose figures are times: one that starts while a background step still runs is marked in its row
# (2026-12-02: an `ab` beside the sanitizer pass moved by up to 16 %)
TIMED=" ab forms anchor topk pagedsweep gluonsweep heads hostcost "
BESIDE=""
beside_background() {  # -> the background steps still running, space-separated
  local i out=""
  for i in "${!BG_PIDS[@]}"; do kill -0 "${BG_PIDS[$i]}" 2>/dev/null && out+="${BG_NAMES[$i]} "; done
  echo "${out% }"
}
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
  export STEP_T0 T0 BUDGET SLOGS REPO OUT
  export -f $(compgen -A function)  # every step and helper, for the child bash that runs the step
  fn=$(step_fn "$s" "$t")
  if [ -n "$bg" ]; then
    ( timeout -k 10 "$t" bash -c "$fn" >"$SLOGS/$s.txt" 2>&1; echo "$? $(( $(date +%s) - STEP_T0 ))" >"$SLOGS/$s.rc" ) &
    BG_NAMES+=("$s")
    BG_PIDS+=($!)
    return
  fi
  if [[ "$TIMED" == *" $s "* ]]; then
    BESIDE=$(beside_background)
    [ -z "$BESIDE" ] || echo "WARNING: $s is timed while $BESIDE runs in the background: its figures are not for comparison"
  fi
  # the step runs in a subshell under timeout; its output goes to the log and to its own file
  timeout -k 10 "$t" bash -c "$fn" 2>&1 | tee "$SLOGS/$s.txt"
  rc=${PIPESTATUS[0]}
  finish_step "$s" "$rc" $(( $(date +%s) - STEP_T0 ))
  BESIDE=""  # the background steps' own rows, written at the end, are not marked
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
  echo "h200_check: steps: $STEPS; triton $TRITON_VERSION; budget ${BUDGET} s; OUT=$OUT; $(date -u +%F' '%H:%M:%S) UTC"
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
      step_install || { echo "the package does not install: the remaining steps cannot run"; }
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
    echo "triton $TRITON_VERSION; total $(($(date +%s) - T0)) s; files in \$OUT ($OUT): $(ls "$OUT" | tr '\n' ' ')"
  } | tee "$OUT/summary.txt"
  [ "$(find "${OUT%/*}" -type f | wc -l)" -le 8 ] || echo "WARNING: more than 8 files under ${OUT%/*}; the device tool brings back 8"
  ! grep -q -E '\|(FAIL|TIMEOUT)\|' "$SUMMARY"
}

main 2>&1 | tee -a "$OUT/log.txt"
exit "${PIPESTATUS[0]}"
