#!/usr/bin/env bash
# An earlier commit of this project, importable beside the checkout as mqa_cli_base / mqa_kernels_base, so that
# tools/ab.py --beside times the two builds interleaved in one process (an A/B of a change on the card, with the
# same DeepGEMM column beside both).
#
#   bash tools/base_tree.sh REV DIR      # e.g. 46ab58c .base  (then carry DIR; ab.py prefill|decode --beside DIR)
set -euo pipefail
rev=$1 dir=$2
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rm -rf "$dir" && mkdir -p "$dir"
git archive "$rev" mqa_cli kernels | tar -x -C "$dir"
mv "$dir/mqa_cli" "$dir/mqa_cli_base" && mv "$dir/kernels" "$dir/mqa_kernels_base"
find "$dir" -name '*.py' -print0 | xargs -0 sed -i -E 's/\bmqa_kernels\b/mqa_kernels_base/g; s/\bmqa_cli\b/mqa_cli_base/g'
echo "$rev" > "$dir/REV"
echo "base tree $(git rev-parse --short "$rev") in $dir (import mqa_cli_base)"
