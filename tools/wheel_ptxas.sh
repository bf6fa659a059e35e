#!/usr/bin/env bash
# The ptxas a triton release compiles sm90 with, packed for a device call: its wheel's ptxas, or its
# ptxas-blackwell where that release's get_ptxas() returns it for every arch (3.9 on). The device image's
# CUDA ptxas (13.0) is not what an engine that installs the wheel runs, and the SASS differs.
#
#   bash tools/wheel_ptxas.sh VERSION OUT.xz       # TRITON_SITE=<site-packages with triton VERSION> skips the download
set -euo pipefail
ver=${1:?usage: wheel_ptxas.sh VERSION OUT.xz}
out=${2:?usage: wheel_ptxas.sh VERSION OUT.xz}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
site=${TRITON_SITE:-}
if [ -z "$site" ]; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 312 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$work/whl" "triton==$ver"
  site=$work/site
  python3 - "$work"/whl/triton-*.whl "$site" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        if name.startswith("triton/backends/nvidia/") and (name.endswith("compiler.py") or "/bin/ptxas" in name):
            z.extract(name, sys.argv[2])
PY
fi
nv=$site/triton/backends/nvidia
have=$(grep -o '^__version__ = .*' "$site/triton/__init__.py" 2>/dev/null | tr -d "\"' " | cut -d= -f2 || true)
[ -z "$have" ] || [ "$have" = "$ver" ] || { echo "wheel_ptxas: $site holds triton $have, not $ver"; exit 2; }
# which binary: the body of get_ptxas(arch) in that release's nvidia backend
body=$(sed -n '/^def get_ptxas(/,/^def /p' "$nv/compiler.py")
if grep -q 'ptxas_blackwell if' <<<"$body" || ! grep -q 'ptxas_blackwell' <<<"$body"; then bin=ptxas; else bin=ptxas-blackwell; fi
[ -f "$nv/bin/$bin" ] || { echo "wheel_ptxas: no $nv/bin/$bin"; exit 2; }
mkdir -p "$(dirname "$out")"
xz -6 -T2 -c "$nv/bin/$bin" > "$out.part" && mv "$out.part" "$out"
echo "wheel_ptxas: triton $ver compiles sm90 with $bin ($(chmod +x "$nv/bin/$bin"; "$nv/bin/$bin" --version | tail -1)) -> $out ($(stat -c %s "$out") bytes)"
