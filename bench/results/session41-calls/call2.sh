#!/usr/bin/env bash
# Session 41's second call: the staged GEMV (kernels/cuda/gemv.cu's gemv_staged_kernel: a narrow
# product's rows bulk-copied whole into shared memory, entry 5's walk). The GEMV, model and
# Qwen3.5 GPU tests; compute-sanitizer memcheck and racecheck over the narrow-product tests; then
# the 0.56B at batch 1 / 4 under MSTAR_GEMV_STAGED_MAX_K=0 (off) / 4096 / 8192 (default),
# alternating, and batch 64 once each. Everything under $OUT/call2.tgz.
# After PACK_XZ=1 scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu;
# carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out
w=$(mktemp -d)
t0=$SECONDS
left() { echo $((540 - (SECONDS - t0))); }
echo "== GPU tests: linear, math, model, Qwen3.5, norms"
timeout 200 "$bin/mstar_gpu_tests" --gtest_filter='gpu_linear.*:gpu_math.*:gpu_model*:gpu_qwen3_5.*:gpu_norm_variants.*' \
  >"$w/tests.log" 2>&1
echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$w/tests.log"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  timeout 90 "$cs" --tool $tool --error-exitcode 9 "$bin/mstar_gpu_tests" \
    --gtest_filter='gpu_linear.every_gemv_shape*:gpu_linear.gated_rms_norm_linear_equals*' >"$w/$tool.log" 2>&1
  echo "== $tool: exit $? ($((SECONDS - t0)) s)"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^\[  PASSED|^\[  FAILED" "$w/$tool.log" | head -4
done
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
summary() {  # MODE FILE
  python3 - "$1" "$2" <<'PY'
import json, sys
for l in open(sys.argv[2]):
    if l.startswith("{"):
        r = json.loads(l); d = r["roofline_decode"]
        print(f"{sys.argv[1]:6} b{r['batch']:<3} step {r['step_ms']*1000:7.1f} us  roofline {d['bandwidth_fraction']:.3f}  busy {r['device_busy_us_median']:.1f} us  digest {r['tokens_digest']}")
PY
}
echo "== 0.56B batch 1 / 4 ($((SECONDS - t0)) s)"
for rep in 1 2 3; do
  for k in 0 4096 8192; do
    (($(left) > 30)) || break
    f=$w/nh056-$k-$rep.jsonl
    MSTAR_GEMV_STAGED_MAX_K=$k timeout 60 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" \
      --batch 1 4 --prompt-len 32 --new-tokens 128 --repeats 3 --json >"$f" 2>"$f.err"
    summary "$k" "$f"
  done
done
echo "== 0.56B batch 64 ($((SECONDS - t0)) s)"
for k in 0 8192; do
  (($(left) > 30)) || break
  f=$w/nh056-b64-$k.jsonl
  MSTAR_GEMV_STAGED_MAX_K=$k timeout 60 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" \
    --batch 64 --prompt-len 32 --new-tokens 128 --repeats 2 --json >"$f" 2>"$f.err"
  summary "$k" "$f"
done
rm -rf "$ck"
tar czf "$final/call2.tgz" -C "$w" .
echo "== done ($((SECONDS - t0)) s)"
