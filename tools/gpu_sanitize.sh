#!/usr/bin/env bash
# compute-sanitizer (memcheck, racecheck, synccheck) on small problems for every dispatch row of this GPU.
#   bash tools/gpu_sanitize.sh [memcheck] [racecheck] [synccheck]     (h200_check.sh's `sanitize` step)
# docs/GPU-PLAN.md ("tools/gpu_sanitize.sh") has the problems, the SAN_* variables, the output and the exit codes.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
PY=${PY:-python3}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LOGS=${SAN_LOGS:-/tmp/sanitize_logs}
rm -rf "$LOGS" && mkdir -p "$LOGS"
T0=$(date +%s)
BUDGET=${SAN_BUDGET_S:-240}
JOB_S=${SAN_JOB_S:-150}
NJOBS=${SAN_JOBS:-6}
TOOLS=${*:-memcheck racecheck synccheck}
REPORT=$OUT/sanitize.txt
left() { echo $((T0 + BUDGET - $(date +%s))); }
say() { echo "$*"; }

CS=${CS:-$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n1)}
if [ -z "$CS" ]; then
  say "sanitize: SKIP (compute-sanitizer not found)" | tee "$REPORT"
  exit 2
fi
say "compute-sanitizer: $CS ($("$CS" --version 2>/dev/null | grep -i version | head -1))"
# options this version knows (an unknown one would stop every run at its start)
CS_HELP=$("$CS" --help 2>&1)
CS_OPTS=()
knows() { [[ "$CS_HELP" == *"$1"* ]]; }
knows --target-processes && CS_OPTS+=(--target-processes application-only)
knows --report-api-errors && CS_OPTS+=(--report-api-errors no)  # torch's and triton's host API codes: not kernels
PRINT_OPTS=()  # memcheck, synccheck: the first reports are enough
knows --print-limit && PRINT_OPTS+=(--print-limit 50)
RACE_OPTS=()  # racecheck: every report, so that each source line it names is counted
knows --racecheck-report && RACE_OPTS+=(--racecheck-report all)
knows --print-limit && RACE_OPTS+=(--print-limit 100000)
say "options: ${CS_OPTS[*]} | memcheck, synccheck: ${PRINT_OPTS[*]} | racecheck: ${RACE_OPTS[*]}"

# rows of this GPU and the first small problem each holds for: lines "row|flags"
"$PY" - >"$LOGS/rows.txt" <<'EOF'
import json, os, subprocess, sys
SHAPES = {
    "prefill": [["--seq", "1024", "--heads", "64", "--dim", "128"], ["--seq", "1024", "--heads", "32", "--dim", "128"],
                ["--seq", "512", "--heads", "64", "--dim", "128"]],
    "paged": [["--paged", "--batch", "4", "--next-n", "2", "--context-len", "2048", "--heads", "64", "--dim", "128",
               "--block-size", "64"]],
}
if os.environ.get("SAN_SMOKE") == "1":  # a dry run of this script on CPU (toy problems, a fake sanitizer)
    SHAPES = {"prefill": [["--seq", "32", "--heads", "8", "--dim", "32"]] * 3,
              "paged": [["--paged", "--batch", "2", "--next-n", "2", "--context-len", "48", "--heads", "8", "--dim",
                         "64", "--block-size", "16"]]}
PREFER = {"gluon_ws_sm90": 0, "h64d128_sm90": 1, "tiled": 2}
def explain(flags, kernel=None):
    r = subprocess.run([sys.executable, "-m", "mqa_cli", "explain", "--json", *flags] + (["--kernel", kernel] if kernel else []),
                       capture_output=True, text=True)
    try:
        return json.loads(r.stdout)
    except Exception:
        return None
want = [r for r in os.environ.get("SAN_ROWS", "").replace(",", " ").split() if r]
for kind, shapes in SHAPES.items():
    d = explain(shapes[0])
    if d is None:
        print(f"# explain failed for {kind}", file=sys.stderr)
        continue
    for c in d["plan"]["candidates"]:
        conds = {x["name"]: x["ok"] for x in c["conditions"]}
        if not conds.get("target", True) or not conds.get("problem", True):
            continue
        row = c["kernel"]
        if want and row not in want:
            continue
        order = list(shapes)
        if row in PREFER:
            order = [shapes[PREFER[row]]] + [s for s in shapes if s is not shapes[PREFER[row]]]
        for flags in order:
            d2 = explain(flags, row)
            c2 = next((x for x in (d2 or {}).get("plan", {}).get("candidates", []) if x["kernel"] == row), None)
            if c2 is not None and c2["ok"]:
                print(f"{row}|{' '.join(flags)}")
                break
        else:
            print(f"# {row}: holds for none of the small problems", file=sys.stderr)
EOF
if [ ! -s "$LOGS/rows.txt" ]; then
  say "sanitize: no rows found (explain --json failed?)" | tee "$REPORT"
  exit 2
fi
say "rows and problems:"; sed 's/^/  /' "$LOGS/rows.txt"

# jobs: "tool|row|label|flags"; racecheck first (the slowest)
JOBS=$LOGS/jobs.txt
: >"$JOBS"
for tool in racecheck memcheck synccheck; do
  [[ " $TOOLS " == *" $tool "* ]] || continue
  while IFS='|' read -r row flags; do
    echo "$tool|$row|$row|$flags" >>"$JOBS"
  done <"$LOGS/rows.txt"
done
if [ "${SAN_EXTRA:-1}" = 1 ] && [[ " $TOOLS " == *" memcheck "* ]]; then
  while IFS='|' read -r row flags; do
    echo "memcheck|$row|$row no-clean|$flags --no-clean-logits" >>"$JOBS"
    echo "memcheck|$row|$row bf16|$flags --logits-dtype bf16" >>"$JOBS"
    [[ "$flags" == *"--paged"* ]] || echo "memcheck|$row|$row compressed|$flags --max-seqlen-k 600 --no-clean-logits" >>"$JOBS"
  done <"$LOGS/rows.txt"
fi

# the variants a row's table picks by problem size (why each: docs/GPU-PLAN.md). Lines: row|override|label|flags|tools
if [ "${SAN_VARIANTS:-1}" = 1 ]; then
  ALL="racecheck memcheck synccheck"
  SMALL="--paged --batch 4 --context-len 2048 --heads 64 --dim 128 --block-size 64"  # next_n 4 (N 256): MATH_WG 2
  LARGE="--paged --batch 32 --context-len 65536 --context-jitter 0 --heads 64 --dim 128 --block-size 64"
  VARIANTS=$(cat <<EOF
paged_ws_sm90||next_n 4|$SMALL --next-n 4|$ALL
paged_ws_sm90||next_n 3 parts|$SMALL --next-n 3|$ALL
paged_ws_sm90||next_n 6 parts|$SMALL --next-n 6|$ALL
paged_ws_sm90|MATH_WG=3,AHEAD=0|next_n 7 parts|$SMALL --next-n 7|$ALL
paged_ws_sm90||next_n 8 parts|$SMALL --next-n 8|$ALL
paged_ws_sm90|PTX_SLOTS=1|next_n 7 PTX_SLOTS|$SMALL --next-n 7|$ALL
paged_ws_sm90|PTX_SLOTS=1|next_n 2 PTX_SLOTS|$SMALL --next-n 2|$ALL
paged_ws_sm90|MATH_WG=4,STAGES=4,SUBS=1|next_n 2 four warpgroups|$SMALL --next-n 2|$ALL
paged_ws_sm90||large n1|$LARGE --next-n 1|memcheck synccheck
paged_ws_sm90||large n2|$LARGE --next-n 2|memcheck synccheck
paged_ws_sm90|PTX_SLOTS=1|large n1 PTX_SLOTS|$LARGE --next-n 1|memcheck synccheck
gluon_ws_sm90||H128|--seq 1024 --heads 128 --dim 128|$ALL
gluon_ws_sm90||H8 D64|--seq 1024 --heads 8 --dim 64|$ALL
gluon_ws_sm90||H16 D128|--seq 1024 --heads 16 --dim 128|$ALL
gluon_ws_sm90|TMA_STORE=1,kv_splits=2|tma_store x2 H8 D128|--seq 1024 --heads 8 --dim 128|$ALL
gluon_ws_sm90||H64 D64|--seq 1024 --heads 64 --dim 64|$ALL
gluon_ws_sm90|PTX_SLOTS=1|PTX_SLOTS H8 D128|--seq 1024 --heads 8 --dim 128|$ALL
gluon_ws_sm90|PTX_SLOTS=1|PTX_SLOTS H128|--seq 1024 --heads 128 --dim 128|$ALL
gluon_ws_sm90||compressed turns|--seq 1024 --heads 64 --dim 128 --max-seqlen-k 600 --no-clean-logits|$ALL
EOF
)
  for tool in $ALL; do  # racecheck first (the slowest)
    [[ " $TOOLS " == *" $tool "* ]] || continue
    while IFS='|' read -r row over label flags tools; do
      [[ " $tools " == *" $tool "* ]] || continue
      grep -q "^$row|" "$LOGS/rows.txt" && echo "$tool|$row${over:+:$over}|$row $label|$flags" >>"$JOBS"
    done <<<"$VARIANTS"
  done
fi
if [ -n "${SAN_ONLY:-}" ]; then  # a regex of job labels: only those jobs
  awk -F'|' -v re="$SAN_ONLY" '$3 ~ re' "$JOBS" >"$JOBS.only"; mv "$JOBS.only" "$JOBS"
fi

# warm the Triton cache without the sanitizer (all rows at once), so the checked runs only load kernels
say "warm-up: one plain run per job problem"
wpids=()
while IFS='|' read -r tool row label flags; do
  key=$(echo "$row $flags" | tr -c 'a-zA-Z0-9' '_')
  [ -e "$LOGS/warm_$key" ] && continue
  : >"$LOGS/warm_$key"
  # shellcheck disable=SC2086
  timeout 120 "$PY" -m mqa_cli run $flags --kernel "$row" --force --json >"$LOGS/warm_$key" 2>&1 &
  wpids+=($!)
done <"$JOBS"
for p in "${wpids[@]}"; do wait "$p"; done
say "warm-up done ($(($(date +%s) - T0)) s)"

run_job() {  # tool row label flags -> $LOGS/<tool>-<label>.{log,out,rc}
  local tool=$1 row=$2 label=$3 flags=$4
  local base=$LOGS/${tool}-$(echo "$label" | tr -c 'a-zA-Z0-9' '_')
  local lim=$JOB_S l
  l=$(( $(left) - 5 ))
  [ "$l" -lt "$lim" ] && lim=$l
  if [ "$lim" -lt 10 ]; then echo "no time" >"$base.rc"; return; fi
  local extra=("${CS_OPTS[@]}")
  if [ "$tool" = racecheck ]; then extra+=(${RACE_OPTS[@]+"${RACE_OPTS[@]}"}); else extra+=(${PRINT_OPTS[@]+"${PRINT_OPTS[@]}"}); fi
  local t0=$(date +%s)
  # shellcheck disable=SC2086
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout -k 10 "$lim" "$CS" --tool "$tool" ${extra[@]+"${extra[@]}"} \
    --log-file "$base.log" \
    "$PY" -m mqa_cli run $flags --kernel "$row" --force --json >"$base.out" 2>&1
  echo "$? $(( $(date +%s) - t0 ))" >"$base.rc"
}

say "sanitizer runs: $(wc -l <"$JOBS") jobs, $NJOBS at a time, each at most ${JOB_S} s, budget ${BUDGET} s"
running=0
while IFS='|' read -r tool row label flags; do
  while [ "$running" -ge "$NJOBS" ]; do wait -n; running=$((running - 1)); done
  run_job "$tool" "$row" "$label" "$flags" &
  running=$((running + 1))
done <"$JOBS"
wait

# racecheck: "count access file:line text [why]" per distinct (access, source line) its reports name
race_lines() {  # row log -> lines on stdout; exit 0 when every named line is one the kernel explains
  "$PY" - "$1" "$2" <<'PYEOF'
import collections, pathlib, re, sys
row, log = sys.argv[1].split(":")[0], pathlib.Path(sys.argv[2])
src = next(pathlib.Path("kernels").glob(f"*/{row}/kernel.py"), pathlib.Path("kernels") / row / "kernel.py")
lines = src.read_text().splitlines() if src.exists() else []
pat = re.compile(r"(Write|Read) Thread \([0-9,]+\) at [^ ]+ in ([A-Za-z0-9_./-]+\.py):([0-9]+)")
seen = collections.Counter((m.group(1), m.group(2), int(m.group(3)))
                           for m in pat.finditer(log.read_text(errors="replace") if log.exists() else ""))
unexplained = 0
for (acc, f, n), c in sorted(seen.items(), key=lambda kv: -kv[1]):
    text = lines[n - 1].strip() if f.endswith("kernel.py") and 0 < n <= len(lines) else ""
    nxt = lines[n].strip() if f.endswith("kernel.py") and 0 < n < len(lines) else ""
    why = ("the kernel's entry line" if text.startswith("def ") else
           "its warp_specialize call" if "warp_specialize(" in text else
           # triton 3.6 puts the table's write on the branch whose first statement is the call
           "the branch of its warp_specialize call" if text.endswith(":") and "warp_specialize(" in nxt else "")
    unexplained += not why
    print(f"  {c:7d} {acc:5s} {f}:{n}  {text[:60]}  [{why or 'NOT EXPLAINED'}]")
sys.exit(1 if unexplained or not seen else 0)
PYEOF
}

# the table
{
  echo "compute-sanitizer on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1); $(date -u +%F' '%H:%M) UTC"
  printf '| %-9s | %-26s | %-7s | %-5s | %-70s | %-6s |\n' tool run "exit" "s" "summary" result
  printf '|%s|\n' "-----------|----------------------------|---------|-------|------------------------------------------------------------------------|--------"
} >"$REPORT"
bad=0
RES=$LOGS/results.txt
: >"$RES"
while IFS='|' read -r tool row label flags; do
  base=$LOGS/${tool}-$(echo "$label" | tr -c 'a-zA-Z0-9' '_')
  rc="?"; secs="?"
  [ -f "$base.rc" ] && read -r rc secs <"$base.rc"
  summ=$(grep -h -E "ERROR SUMMARY|RACECHECK SUMMARY" "$base.log" 2>/dev/null | sed 's/^=* *//' | tr '\n' ' ' | cut -c1-70)
  errs=$(echo "$summ" | grep -oE "ERROR SUMMARY: [0-9]+" | grep -oE "[0-9]+$" | head -1)
  haz=$(echo "$summ" | grep -oE "RACECHECK SUMMARY: [0-9]+" | grep -oE "[0-9]+$" | head -1)
  ran=no
  grep -q '"kernel' "$base.out" 2>/dev/null && ran=yes
  result=PASS
  if [ "$rc" = "no" ] || [ "$rc" = "?" ]; then result=NOTRUN; summ="(not run: no time left)"
  elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then result=TIMEOUT
  elif [ -z "$summ" ]; then result=FAIL; summ="(no summary line; see the log)"
  elif [ "${errs:-0}" != 0 ]; then result=FAIL
  elif [ "${haz:-0}" != 0 ]; then
    if race_lines "$row" "$base.log" >"$base.lines"; then result=KNOWN; else result=FAIL; fi
  elif [ "$rc" != 0 ] || [ "$ran" != yes ]; then result=FAIL; summ="$summ (run exit $rc, kernel ran: $ran)"
  fi
  [ "$result" = PASS ] || [ "$result" = KNOWN ] || bad=$((bad + 1))
  printf '| %-9s | %-26s | %-7s | %-5s | %-70s | %-6s |\n' "$tool" "$label" "$rc" "$secs" "$summ" "$result" >>"$REPORT"
  echo "$result|$tool|$row|$label|$flags|$base" >>"$RES"
done <"$JOBS"
echo "sanitize: $(( $(wc -l <"$JOBS") - bad )) clean of $(wc -l <"$JOBS") runs, $(grep -c '^KNOWN|' "$RES") of them \
racecheck's known pattern only ($(($(date +%s) - T0)) s)" >>"$REPORT"
# racecheck: the source lines every run with hazards names, counted
while IFS='|' read -r result tool row label flags base; do
  [ -s "$base.lines" ] || continue
  { echo; echo "---- racecheck $label ($result): reports per (access, source line)"; cat "$base.lines"; } >>"$REPORT"
done <"$RES"
# the first lines of every report that is not clean, and the program's own last lines
while IFS='|' read -r result tool row label flags base; do
  if [ "$result" = PASS ] || [ "$result" = KNOWN ]; then continue; fi
  {
    echo
    echo "---- $result: $tool $label: python3 -m mqa_cli run $flags --kernel $row --force --json"
    grep -v -E "^\s*$" "$base.log" 2>/dev/null | head -60
    echo "-- program output (last lines):"
    tail -8 "$base.out" 2>/dev/null
  } >>"$REPORT"
done <"$RES"
cat "$REPORT"
[ "$bad" = 0 ]
