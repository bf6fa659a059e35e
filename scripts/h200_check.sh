#!/usr/bin/env bash
# One device call that installs the project, checks and times what is named (default: all).
# Usage on the GPU machine: bash scripts/h200_check.sh [env] [verify] [bench] [sweep] [sweep_paged] [dump] [gluon] [paged] [paged_check]
# Results go to $OUT (the device tool brings them back) and to stdout.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# The device tool brings back at most 8 files: everything printed goes to one report, plus CSV/PNG files.
exec > >(tee -a "$OUT/report.txt") 2>&1
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
# Wheels carried in .whl (see docs/PERFORMANCE.md) fill gaps in the image; then the project itself.
if ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
$PY -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
$PY -c "import typer, tabulate, rich, safetensors, mqa_cli" || exit 1
mqa-logits() { $PY -m mqa_cli "$@"; }
steps=${*:-env verify bench sweep dump gluon paged}
log() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
for step in $steps; do
  case $step in
    env)
      log env
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
      $PY -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
      mqa-logits explain --heads 64 --dim 128 --seq 8192 ;;
    verify)
      log verify
      mqa-logits verify --large
      for k in gluon_ws_sm90 h64d128_sm90 gluon_sm90 tiled; do
        echo "--- verify --kernel $k --large"
        mqa-logits verify --kernel "$k" --large | tail -9
      done ;;
    bench)
      log bench
      ks=${BENCH_KERNELS:-gluon_ws_sm90,h64d128_sm90,tiled}
      mqa-logits bench --suite seed --kernels "$ks" --csv "$OUT/bench_seed.csv" --plot "$OUT/bench_seed.png" --force
      mqa-logits bench --suite seed --kernels "$ks" --no-clean-logits
      mqa-logits bench --suite seed ;;
    sweep)
      log sweep
      $PY scripts/sweep_prefill.py --quick ;;
    sweep_paged)
      log sweep_paged
      $PY scripts/sweep_paged.py ;;
    dump)
      log dump
      mqa-logits run --heads 64 --dim 128 --seq 8192 --dump-asm --dump-dir /tmp/dumps --force ;;
    gluon)
      log gluon
      $PY scripts/gpu_gluon_ws_check.py ;;
    paged)
      log paged
      mqa-logits verify --paged --large
      mqa-logits bench --suite decode --no-clean-logits --csv "$OUT/bench_decode.csv" --force
      mqa-logits bench --paged --batch 64 --context-len 65536 --next-n 1 --context-jitter 0.3 ;;
    paged_check)
      log paged_check
      $PY scripts/gpu_paged_check.py --quick ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
