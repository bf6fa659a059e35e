#!/usr/bin/env bash
# One device call that installs the project, checks and times what is named (default: all).
# Usage on the GPU machine: bash scripts/h200_check.sh [env] [verify] [bench] [sweep] [dump] [gluon] [paged]
# Results go to $OUT (the device tool brings them back) and to stdout.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
steps=${*:-env verify bench sweep dump gluon paged}
log() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
for step in $steps; do
  case $step in
    env)
      log env
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
      python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
      mqa-logits explain --heads 64 --dim 128 --seq 8192 | tee "$OUT/explain_h200.txt"
      mqa-logits explain --heads 64 --dim 128 --seq 8192 --json > "$OUT/explain_h200.json" ;;
    verify)
      log verify
      mqa-logits verify --large | tee "$OUT/verify.txt"
      for k in tiled h64d128_sm90 $(mqa-logits explain --json | python -c "import json,sys; print(' '.join(r['kernel'] for r in json.load(sys.stdin)['plan']['candidates'] if r['kernel'].startswith('gluon')))"); do
        mqa-logits verify --kernel "$k" --force | tee "$OUT/verify_$k.txt" | tail -1
      done ;;
    bench)
      log bench
      ks=$(mqa-logits explain --json | python -c "import json,sys; print(','.join(r['kernel'] for r in json.load(sys.stdin)['plan']['candidates'] if r['kernel'] in ('tiled','h64d128_sm90') or r['kernel'].startswith('gluon')))")
      mqa-logits bench --suite seed --kernels "$ks" --csv "$OUT/bench_seed.csv" --plot "$OUT/bench_seed.png" --force | tee "$OUT/bench_seed.txt"
      mqa-logits bench --suite seed --kernels "$ks" --no-clean-logits | tee "$OUT/bench_seed_noclean.txt"
      mqa-logits bench --suite seed | tee "$OUT/bench_seed_dispatch.txt" ;;
    sweep)
      log sweep
      python scripts/sweep_prefill.py --quick | tee "$OUT/sweep.txt" ;;
    dump)
      log dump
      mqa-logits run --heads 64 --dim 128 --seq 8192 --dump-asm --dump-dir /tmp/dumps --force | tee "$OUT/run_dump_asm.txt" ;;
    gluon)
      log gluon
      [ -f scripts/gpu_gluon_check.py ] && python scripts/gpu_gluon_check.py | tee "$OUT/gluon_stdout.txt" ;;
    paged)
      log paged
      mqa-logits verify --paged | tee "$OUT/verify_paged.txt"
      [ -f scripts/gpu_paged_check.py ] && python scripts/gpu_paged_check.py | tee "$OUT/paged_stdout.txt"
      mqa-logits bench --suite decode | tee "$OUT/bench_decode.txt" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
