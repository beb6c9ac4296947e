#!/usr/bin/env bash
# Session 33's first call (main with branch gated-fold merged): the GPU tests of the GEMV / norm forms and the
# models, the 0.56B batch-1 step with the folds off / on / the gated fold off, compute-sanitizer memcheck and
# racecheck over the kernels of session 32 (SSD update table, GEMV shapes, norm folds), then every roofline
# (bench/h200_roofline.sh, the 8B shape included).
# After scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu mstar-run; carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
echo "== GPU tests: linear, math, models"
timeout 150 "$bin/mstar_gpu_tests" --gtest_filter='gpu_linear.*:gpu_math.*:gpu_model*:gpu_qwen3_5*' \
  >"$out/gpu-tests.log" 2>&1; echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED " "$out/gpu-tests.log" | head -20
echo "== 0.56B batch 1, A/B ($((SECONDS - t0)) s)"
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" | tail -1 | cut -c1-100
run() { timeout 30 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 --prompt-len 32 --new-tokens 128 \
  --repeats 3 --json | grep '^{'; }
for r in 1 2; do
  MSTAR_FUSED_NORM=0 run | sed "s/^{/{\"run\": \"folds off $r\", /" >>"$out/b1.jsonl"
  MSTAR_GATED_FOLD=0 run | sed "s/^{/{\"run\": \"gated fold off $r\", /" >>"$out/b1.jsonl"
  run | sed "s/^{/{\"run\": \"folds on $r\", /" >>"$out/b1.jsonl"
done
rm -rf "$ck"
python3 - "$out/b1.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(r["run"], "step_ms %.4f" % r["step_ms"], "bw %.3f" % r["roofline_decode"]["bandwidth_fraction"],
          r.get("tokens_digest"))
PY
echo "== compute-sanitizer ($((SECONDS - t0)) s)"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
f='gpu_recurrent.every_ssd_update_variant*:gpu_linear.*:gpu_math.add_rms_norm*:gpu_math.gated_rms_norm*'
timeout 150 "$cs" --tool memcheck --error-exitcode 9 "$bin/mstar_gpu_tests" --gtest_filter="$f" \
  >"$out/memcheck.log" 2>&1; echo "memcheck exit $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/memcheck.log" | head -5
timeout 120 "$cs" --tool racecheck --error-exitcode 9 "$bin/mstar_gpu_tests" \
  --gtest_filter='gpu_linear.*gated*:gpu_linear.rms_norm_linear*:gpu_math.add_rms_norm*:gpu_math.gated_rms_norm*' \
  >"$out/racecheck.log" 2>&1; echo "racecheck exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$out/racecheck.log" | head -5
echo "== rooflines ($((SECONDS - t0)) s)"
mkdir -p "$out/roofline"
OUT=$out/roofline timeout 300 bash bench/h200_roofline.sh 2>&1 | grep -vE "^model " | cut -c1-400
echo "done ($((SECONDS - t0)) s)"
tar czf "$final/call1.tgz" -C "$out" .
