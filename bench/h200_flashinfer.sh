#!/usr/bin/env bash
# Our paged attention against FlashInfer 0.2.5 and PyTorch SDPA (issue 17) in
# one device call of under 10 minutes, results under $OUT:
#   flashinfer-build.log  bench/baselines_h200.py --build flashinfer: its four
#                         JIT modules compiled for sm_90a on the device's CPUs
#                         (MAX_JOBS 8, FI_JOBS) in the background, bounded 420 s, while
#                         the GPU runs the rest; FI_BUILD=0 skips it
#   ours.jsonl            mstar-gpu-bench --suite attention --rows 1 4 16 64
#                         256 --prefill-rows 1 8 --graphs --rounds 5
#   baselines.jsonl       the SDPA part (--parts attention) on the same shapes,
#                         the build's lines, then the FlashInfer part (the
#                         modules built here, else those bench/flashinfer_
#                         prebuilt.sh packed, where carried)
#   kernels-table.md      bench/kernels_table.py's join; attention.png where
#                         matplotlib imports
# Worst case (every timeout): 425 s build wait + 150 s FlashInfer + the table.
# Needs scripts/pack-device.sh mstar-gpu-bench (.carry; bin/ or bins.tar.xz)
# and bench/baselines_wheels.sh (.whl-baselines), both carried.
#   bash bench/h200_flashinfer.sh
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
if [[ -f $carry/bins.tar.xz && ! -x $bin/mstar-gpu-bench ]]; then
  tar xJf "$carry/bins.tar.xz" -C "$carry"
fi
export PYTHONUNBUFFERED=1 PATH=/usr/local/cuda/bin:$PATH
t0=$SECONDS
step() { echo "== [$((SECONDS - t0)) s] $*"; }
whl=$root/.whl-baselines
src=/tmp/baselines-src
mkdir -p "$src"
tar xzf "$whl"/flashinfer_python-0.2.5.tar.gz -C "$src"
fi_args=(--flashinfer-src "$src/flashinfer_python-0.2.5" --flashinfer-cache /tmp/flashinfer_build)
for a in "$whl"/flashinfer-*-ops-*.tar.xz; do
  [[ -f $a ]] || continue
  mkdir -p /tmp/flashinfer-prebuilt && tar xJf "$a" -C /tmp/flashinfer-prebuilt
  fi_args+=(--flashinfer-prebuilt /tmp/flashinfer-prebuilt/ops)
  echo "prebuilt FlashInfer modules: $(basename "$a")"
done
shapes=(--rows 1 4 16 64 256 --prefill-rows 1 8 --rounds 5)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__)'
  nvcc --version | tail -1
  nproc
} | tee "$out/env.txt"
build=
if [[ ${FI_BUILD:-1} != 0 ]]; then
  step "FlashInfer build in the background (MAX_JOBS ${FI_JOBS:-8}, at most 420 s)"
  MAX_JOBS=${FI_JOBS:-8} timeout 420 python3 "$root/bench/baselines_h200.py" --json --build flashinfer \
    "${fi_args[@]}" >"$out/flashinfer-build.log" 2>&1 &
  build=$!
fi
step "ours: mstar-gpu-bench --suite attention --graphs"
timeout 180 "$bin/mstar-gpu-bench" --suite attention "${shapes[@]}" --graphs --json \
  | tee "$out/ours.jsonl"
step "SDPA (--parts attention)"
timeout 120 python3 "$root/bench/baselines_h200.py" --json --parts attention "${shapes[@]}" \
  | tee "$out/baselines.jsonl"
if [[ -n $build ]]; then
  step "waiting for the FlashInfer build"
  wait "$build"
  echo "flashinfer build exit $? ($((SECONDS - t0)) s)" | tee -a "$out/flashinfer-build.log"
  grep '^{' "$out/flashinfer-build.log" | tee -a "$out/baselines.jsonl"
fi
step "FlashInfer (--parts flashinfer)"
timeout 150 python3 "$root/bench/baselines_h200.py" --json --parts flashinfer "${shapes[@]}" \
  "${fi_args[@]}" | tee -a "$out/baselines.jsonl"
step "table"
python3 "$root/bench/kernels_table.py" "$out/ours.jsonl" "$out/baselines.jsonl" \
  >"$out/kernels-table.md"
cat "$out/kernels-table.md"
if python3 -c 'import matplotlib' 2>/dev/null; then
  python3 "$root/bench/plot_attention.py" "$out/ours.jsonl" "$out/baselines.jsonl" \
    --out "$out/attention.png" 2>&1 | tail -3
fi
step "done"
