#!/usr/bin/env bash
# Session 35's first call: main at the session's start (58afff9 + the 8B lines of h200_roofline.sh):
# every roofline, now with the 8B shape's decode at batch 256 and its 2,048-token prefill at 1 / 8.
# After scripts/pack-device.sh mstar-gpu-bench mstar-bench-model-gpu mstar-run; carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
bash bench/h200_roofline.sh 2>&1 | tee "$out/roofline.log" | cut -c1-400
echo "== done ($((SECONDS - t0)) s)"
tar czf "$final/call1.tgz" -C "$out" .
