#!/usr/bin/env bash
# Every source line compute-sanitizer's racecheck names for a decode kernel, counted (gpu_sanitize.sh prints only a
# report's first lines): so that a known pattern (the warp_specialize entry line) can be told from a new hazard.
# Usage (GPU machine, repository root): bash scripts/racecheck_lines.sh NEXT_N:KERNEL[:KEY=V,...] ...
#   e.g. bash scripts/racecheck_lines.sh 2:paged_ws_sm90 2:paged_ws_sm90:PTX_SLOTS=1
# Problem: B 4, C 2048, H 64, D 128, block 64 (gpu_sanitize.sh's paged problem).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
CS=${CS:-$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n1)}
[ -n "$CS" ] || { echo "racecheck_lines: compute-sanitizer not found"; exit 2; }
P="--paged --batch 4 --context-len 2048 --heads 64 --dim 128 --block-size 64 --force --json"
for job in "$@"; do
  n=${job%%:*}; k=${job#*:}
  echo "== racecheck next_n $n --kernel $k: reports per (access, source line)"
  timeout "${RACE_JOB_S:-120}" "$CS" --tool racecheck --racecheck-report all --print-limit 1000000 \
    python3 -m mqa_cli run $P --next-n "$n" --kernel "$k" 2>&1 \
    | grep -oE "(Write|Read) Thread \([0-9,]+\) at [^ ]+ in [a-z_]+\.py:[0-9]+|RACECHECK SUMMARY.*" \
    | sed -E 's/ Thread \([0-9,]+\) at [^ ]+ in / at /' | sort | uniq -c
done
