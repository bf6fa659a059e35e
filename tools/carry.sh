#!/usr/bin/env bash
# Here, before a device call: the ignored files that call carries, built once, and the size the call would send.
#
#   bash tools/carry.sh [VERSION]      # e.g. 3.8.0; none: the image's triton (3.6.0), no bundle
#
# - .anchor-kit/deepgemm.tar.xz: ../shared/anchors/deepgemm packed (31 MB as files, about 2 MB packed), which
#   tools/h200_check.sh unpacks into .anchor on the device (the harness, DeepGEMM's tests and its schedule format);
# - .tb/VERSION/triton-VERSION.tar.xz: ../shared/tools/triton-bundle.sh's bundle (about 43 MiB; about 6 minutes on
#   two shared CPUs), which h200_check.sh unpacks when H200_TRITON=VERSION;
# - .tb/VERSION/ptxas-sm90.xz: the ptxas that release's wheel compiles sm90 with (3.8: its ptxas, CUDA 12.9; 3.9:
#   its ptxas-blackwell, 13.4), which the bundle leaves out. With it the device compiles as an engine's install
#   does, not with the image's CUDA 13.0 ptxas (8.6 / 12.1 MiB packed; 3.9's call then sends about 59 MiB).
# Prints the `carry` list for the run tool and the total it sends (tracked and untracked-not-ignored files plus the
# carried ones) against the 64 MiB a call may carry. Both paths are in .gitignore: they never reach a commit.
# Env: SHARED (default ../shared, the folder beside the checkout); TRITON_SITE (a site-packages folder holding that
# triton release, to take its ptxas from instead of downloading the wheel); WHEEL_PTXAS=0 (leave the ptxas out:
# the device's is used).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ver=${1:-}
shared=${SHARED:-../shared}
carry=(.anchor-kit)
if [ ! -s .anchor-kit/deepgemm.tar.xz ]; then
  [ -f "$shared/anchors/deepgemm/run.sh" ] || { echo "no anchor kit at $shared/anchors/deepgemm"; exit 2; }
  mkdir -p .anchor-kit
  tar -C "$shared/anchors/deepgemm" -cf - . | xz -6 -T2 > .anchor-kit/deepgemm.tar.xz.part
  mv .anchor-kit/deepgemm.tar.xz.part .anchor-kit/deepgemm.tar.xz
fi
if [ -n "$ver" ]; then
  if [ ! -s ".tb/$ver/triton-$ver.tar.xz" ]; then
    bash "$shared/tools/triton-bundle.sh" "$ver" ".tb/$ver"
  fi
  tar -tJf ".tb/$ver/triton-$ver.tar.xz" "triton/__init__.py" >/dev/null  # it unpacks
  if [ "${WHEEL_PTXAS:-1}" = 1 ] && [ ! -s ".tb/$ver/ptxas-sm90.xz" ]; then
    bash tools/wheel_ptxas.sh "$ver" ".tb/$ver/ptxas-sm90.xz"
  fi
  carry+=(".tb/$ver")
fi
tree=$(git ls-files -co --exclude-standard -z | xargs -0 -r stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
extra=$(du -cb "${carry[@]}" | tail -1 | cut -f1)
total=$((tree + extra))
printf 'carry: ["%s"]\n' "$(IFS=,; echo "${carry[*]}" | sed 's/,/", "/g')"
awk -v t="$total" -v w="$tree" -v c="$extra" 'BEGIN {m = 1048576; printf "sends %.1f MiB (working tree %.1f, carried %.1f) of the 64 MiB a call may carry\n", t / m, w / m, c / m}' 
[ "$total" -le $((64 * 1048576)) ] || { echo "over the limit: carry less"; exit 1; }
echo "device command: ${ver:+H200_TRITON=$ver }bash tools/h200_check.sh ...   (docs/GPU-PLAN.md)"
