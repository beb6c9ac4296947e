#!/usr/bin/env bash
# Session 32's fifth call: the GPU tests of what changed since the fourth (the GEMV launch-shape table, add_rms_norm
# held in registers, Qwen3.5's batch-1 norm fold), then Nemotron-H 0.56B decode at batch 1 under every GEMV shape
# (MSTAR_GEMV_VARIANT), Qwen3.5 ~0.56B at batch 1 with the fold off and on, a CUPTI profile of the 0.6B decode
# at 1 and 64 rows (bench/h200_profile.sh nemotron-decode), then the 0.56B at 64 / 256 rows.
# After scripts/pack-device.sh mstar_gpu_tests mstar-bench-model-gpu and bash bench/profile/build.sh;
# carry .carry .profile.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
echo "== GPU tests of the changes"
timeout 90 "$bin/mstar_gpu_tests" --gtest_filter='gpu_linear.*:gpu_math.*:gpu_model*:gpu_qwen3_5*:*cuda_ipc*' \
  >"$out/gpu-tests.log" 2>&1; echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED " "$out/gpu-tests.log" | head -12
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" | tail -1 | cut -c1-120
for v in 0 1 2 3 4 5; do
  MSTAR_GEMV_VARIANT=$v timeout 25 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 --prompt-len 32 \
    --new-tokens 128 --repeats 3 --json | grep '^{' | sed "s/^{/{\"gemv_variant\": $v, /" >>"$out/nh056-gemv.jsonl"
done
echo "== qwen ($((SECONDS - t0)) s)"
python3 bench/transformers_decode.py make-checkpoint --size qwen3_5-0.5b --out "$ck/qwen" >/dev/null 2>&1; echo "checkpoint exit $?"
for f in 0 1; do
  MSTAR_FUSED_NORM=$f timeout 30 "$bin/mstar-bench-model-gpu" --model "$ck/qwen" --batch 1 --prompt-len 32 \
    --new-tokens 128 --repeats 3 --json | grep '^{' | sed "s/^{/{\"fused\": $f, /" >>"$out/qwen-b1.jsonl"
done
echo "== profile ($((SECONDS - t0)) s)"
mkdir -p "$out/profile"
OUT=$out/profile timeout 70 bash bench/h200_profile.sh nemotron-decode 2>&1 | cut -c1-160 | head -40
echo "== 64 / 256 rows ($((SECONDS - t0)) s)"
timeout 40 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 64 256 --prompt-len 32 \
  --new-tokens 128 --repeats 3 --json | grep '^{' >"$out/nh056-b64-256.jsonl"
rm -rf "$ck"
python3 - "$out" <<'PY'
import json, sys
for f in ("nh056-gemv.jsonl", "nh056-b64-256.jsonl", "qwen-b1.jsonl"):
    try:
        lines = open(sys.argv[1] + "/" + f).readlines()
    except OSError:
        continue
    for l in lines:
        r = json.loads(l); rd = r.get("roofline_decode", {})
        print(f, "gemv", r.get("gemv_variant", "-"), "fused", r.get("fused", "-"), "batch", r.get("batch"),
              "step_ms %.4f" % r.get("step_ms", 0), "bw %.3f" % rd.get("bandwidth_fraction", 0), r.get("tokens_digest"))
PY
echo "done ($((SECONDS - t0)) s)"
tar czf "$final/call5.tgz" -C "$out" .
