#!/usr/bin/env bash
# The first call after session 37 (which had no device time): every GPU test (session 36's
# upload_qkv and session 37's norm forms, fused split merge and the workspace's counters, the
# refactored block merge and norm bodies have never run on a GPU), the 0.56B at 64 rows three
# times (the spread of the roofline fraction) and where its 64-row decode step goes (the CUPTI
# timeline). Nsight Compute over decode attention at 64 / 4 rows: call3 (README.md here).
# After PACK_XZ=1 scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu;
# carry .carry .profile.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
timeout 330 "$bin/mstar_gpu_tests" >"$out/tests.log" 2>&1
echo "== tests: exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$out/tests.log"
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== 0.56B batch 64 x3 ($((SECONDS - t0)) s)"
for rep in 1 2 3; do
  timeout 60 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 64 --prompt-len 32 \
    --new-tokens 128 --repeats 2 --json 2>/dev/null | grep '^{"batch' >>"$out/nh056-b64.jsonl"
done
python3 - "$out/nh056-b64.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(f"batch {r['batch']} step_ms {r['step_ms']:.4f}", round(r["roofline_decode"]["bandwidth_fraction"], 4))
PY
echo "== timeline 64 rows ($((SECONDS - t0)) s)"
OUT=$out/prof timeout 60 bash bench/h200_profile.sh nh056-decode64 2>&1 | grep -A 40 "steps: span"
echo "== done ($((SECONDS - t0)) s)"
mkdir -p "$final"
cp "$out/tests.log" "$out/nh056-b64.jsonl" "$final/"
tar czf "$final/call1.tgz" -C "$out" prof
ls -la "$final"
