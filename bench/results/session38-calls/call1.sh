#!/usr/bin/env bash
# Session 38's first call (the first GPU time since session 36): every GPU test (session 36's
# upload_qkv, session 37's norm forms, fused split merge, lean prefill, the block merge's new sum
# and the split workspace's counters have never run on a GPU), the norm tests again with the
# later forms as defaults, the 0.56B at 64 rows three times, then bench/h200_small.sh's benches
# while the call's 560 s last. After PACK_XZ=1 scripts/pack-device.sh mstar_gpu_tests
# mstar-gpu-bench mstar-bench-model-gpu; carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out
t0=$SECONDS
left() { echo $((560 - (SECONDS - t0))); }
echo "== all GPU tests"
timeout 300 "$bin/mstar_gpu_tests" >"$final/tests.log" 2>&1
echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$final/tests.log"
echo "== norm tests, MSTAR_GATED_NORM_WARP=v2 MSTAR_ADD_NORM_VARIANT=v4"
MSTAR_GATED_NORM_WARP=v2 MSTAR_ADD_NORM_VARIANT=v4 timeout 60 "$bin/mstar_gpu_tests" \
  --gtest_filter='gpu_norm_variants.*:gpu_math.*norm*:gpu_linear.*norm*:gpu_model_fused_norms.*' \
  >"$final/tests-v2v4.log" 2>&1
echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[  PASSED  \] [0-9]+ tests|^\[  FAILED" "$final/tests-v2v4.log"
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== 0.56B batch 64 x3 ($((SECONDS - t0)) s)"
for rep in 1 2 3; do
  timeout 60 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 64 --prompt-len 32 \
    --new-tokens 128 --repeats 2 --json 2>/dev/null | grep '^{"batch' >>"$final/nh056-b64.jsonl"
done
python3 - "$final/nh056-b64.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(f"batch {r['batch']} step_ms {r['step_ms']:.4f}", round(r["roofline_decode"]["bandwidth_fraction"], 4))
PY
echo "== bench/h200_small.sh benches ($((SECONDS - t0)) s, $(left) s left)"
mkdir -p "$final/small"
OUT=$final/small SKIP_GPU_TESTS=1 timeout "$(left)" bash bench/h200_small.sh
echo "== done ($((SECONDS - t0)) s)"
