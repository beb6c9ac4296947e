#!/usr/bin/env bash
# The gated delta rule on an H200 (the device machine), results under $OUT
# (default ./h200-out): the rule's and Qwen3.5's GPU tests, then
# mstar-gpu-bench --delta-rule-only (decode, 4,096-token prefill chunked and
# scanned, the threshold sweep) and flash-linear-attention's Triton kernels on
# the same shapes (bench/fla_delta_rule.py; its wheels under .whl/).
#   bash bench/h200_delta_rule.sh [CARRY]   (CARRY: scripts/pack-device.sh's
#   bin/ and libs.tar.xz plus fla_delta_rule.py; default .carry)
set -uo pipefail
carry=$(cd "${1:-.carry}" && pwd)
out=${OUT:-$PWD/h200-out}
mkdir -p "$out"
if [[ ! -d $carry/lib ]]; then tar xJf "$carry/libs.tar.xz" -C "$carry"; fi
export LD_LIBRARY_PATH=$carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export MSTAR_FIXTURES_DIR=$PWD/tests/fixtures MSTAR_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/env.txt"
echo "== GPU tests"
timeout 120 "$carry/bin/mstar_gpu_tests" --gtest_filter='gpu_delta_rule.*:*qwen3_5*' >"$out/gpu-tests.log" 2>&1
echo "exit $?" | tee -a "$out/gpu-tests.log"
grep -E "^\[ (error|  FAILED|  PASSED|  SKIPPED) |Failure|tests ran" "$out/gpu-tests.log"
echo "== mstar-gpu-bench"
timeout 110 "$carry/bin/mstar-gpu-bench" --delta-rule-only --rounds 9 --threshold-lengths 32 64 96 128 192 256 512 1024 --json | tee "$out/ours.jsonl"
echo "== fla"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' \
  | tee -a "$out/env.txt"
timeout 200 python3 "$carry/fla_delta_rule.py" --json --prefill-only | tee "$out/fla.jsonl"
