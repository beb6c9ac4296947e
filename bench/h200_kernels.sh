#!/usr/bin/env bash
# Our kernels against the libraries one would pick instead, same shapes, same
# machine (issue 17), on an H200 (the device machine), results under $OUT:
#   ours.jsonl        mstar-gpu-bench --suite kernels17: decode and causal
#                     prefill paged attention, the SSD scan and update and the
#                     causal conv on Nemotron-H ~0.6B / 8B Mamba-2 shapes
#   baselines.jsonl   bench/baselines_h200.py: PyTorch SDPA (flash, cuDNN,
#                     efficient), FlashInfer 0.2.5's paged decode and prefill
#                     (its JIT modules compiled here for sm_90a in the
#                     background, ~4 min on the dev VM's 2 cores; or the ones
#                     bench/baselines_prebuilt.sh packed, where carried),
#                     mamba-ssm's Triton kernels, causal-conv1d
#                     (forward and update compiled here for sm_90 in the
#                     background while the rest runs, ~40 s on 2 cores of the
#                     dev VM; reported absent if it does not build) and
#                     PyTorch's conv
#   kernels-table.md  bench/kernels_table.py's join of the two
#   flashinfer-build.log, cc1d-build.log
# Needs scripts/pack-device.sh mstar-gpu-bench (.carry) and
# bench/baselines_wheels.sh (.whl-baselines), both carried.
#   bash bench/h200_kernels.sh
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
whl=$root/.whl-baselines
src=/tmp/baselines-src
mkdir -p "$src"
for a in "$whl"/*.tar.gz; do tar xzf "$a" -C "$src"; done
mamba_src=$(echo "$src"/mamba_ssm-*)
cc1d_src=$(echo "$src"/causal_conv1d-*)
fi_src=$(echo "$src"/flashinfer_python-*)
fi_cache=/tmp/flashinfer_build
fi_args=(--flashinfer-src "$fi_src" --flashinfer-cache "$fi_cache")
for a in "$whl"/flashinfer-*-ops-*.tar.xz; do
  [[ -f $a ]] || continue
  mkdir -p /tmp/flashinfer-prebuilt && tar xJf "$a" -C /tmp/flashinfer-prebuilt
  fi_args+=(--flashinfer-prebuilt /tmp/flashinfer-prebuilt/ops)
done
export PATH=/usr/local/cuda/bin:$PATH
if ! python3 -c 'import einops' 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$whl"/einops-*.whl &&
    export PYTHONPATH=/tmp/site
fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
  ls "$whl"
} | tee "$out/env.txt"
# causal-conv1d's extension compiles on the CPUs while the GPU runs the rest.
ext=/tmp/causal_conv1d_build
MAX_JOBS=4 timeout 300 python3 "$root/bench/baselines_h200.py" --build causal-conv1d \
  --causal-conv1d-src "$cc1d_src" --ext-dir "$ext" >"$out/cc1d-build.log" 2>&1 &
build=$!
# So do FlashInfer's modules (decode, fa2 and fa3 prefill, page; fa3 the
# longest, ~170 s of one core here).
MAX_JOBS=${FI_JOBS:-8} timeout 420 python3 "$root/bench/baselines_h200.py" --json --build flashinfer \
  "${fi_args[@]}" >"$out/flashinfer-build.log" 2>&1 &
fi_build=$!
echo "== mstar-gpu-bench --suite kernels17"
timeout 150 "$bin/mstar-gpu-bench" --suite kernels17 --rounds 7 --json | tee "$out/ours.jsonl"
echo "== baselines: attention, ssd"
common=(--json --mamba-src "$mamba_src" --causal-conv1d-src "$cc1d_src" --ext-dir "$ext")
timeout 280 python3 "$root/bench/baselines_h200.py" "${common[@]}" --parts attention,ssd \
  | tee "$out/baselines.jsonl"
wait "$build"
echo "causal-conv1d build exit $?" | tee -a "$out/cc1d-build.log" "$out/env.txt"
echo "== baselines: conv"
timeout 100 python3 "$root/bench/baselines_h200.py" "${common[@]}" --parts conv \
  | tee -a "$out/baselines.jsonl"
wait "$fi_build"
echo "flashinfer build exit $?" | tee -a "$out/flashinfer-build.log" "$out/env.txt"
grep '^{' "$out/flashinfer-build.log" | tee -a "$out/baselines.jsonl"
echo "== baselines: flashinfer"
timeout 150 python3 "$root/bench/baselines_h200.py" --json --parts flashinfer "${fi_args[@]}" \
  | tee -a "$out/baselines.jsonl"
python3 "$root/bench/kernels_table.py" "$out/ours.jsonl" "$out/baselines.jsonl" \
  >"$out/kernels-table.md"
cat "$out/kernels-table.md"
