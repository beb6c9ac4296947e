#!/usr/bin/env bash
# Session 38's second call, with the norm forms v2 / v2 as defaults and call 1's two test fixes:
# every GPU test, the 0.56B at 64 rows, then the lean prefill (bench/h200_prefill_lean.sh) and
# the split-KV merges (bench/h200_split_merge.sh) without their tests, within 560 s.
# Carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out
t0=$SECONDS
left() { echo $((560 - (SECONDS - t0))); }
mkdir -p "$final/lean" "$final/split"
echo "== all GPU tests"
timeout 300 "$bin/mstar_gpu_tests" >"$final/tests.log" 2>&1
echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$final/tests.log"
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== 0.56B batch 64 x2, defaults ($((SECONDS - t0)) s)"
for rep in 1 2; do
  timeout 60 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 64 --prompt-len 32 \
    --new-tokens 128 --repeats 2 --json 2>/dev/null | grep '^{"batch' >>"$final/nh056-b64.jsonl"
done
python3 - "$final/nh056-b64.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(f"batch {r['batch']} step_ms {r['step_ms']:.4f}", round(r["roofline_decode"]["bandwidth_fraction"], 4), r.get("tokens_digest"))
PY
echo "== bench/h200_prefill_lean.sh"
OUT=$final/lean SKIP_GPU_TESTS=1 timeout "$(left)" bash bench/h200_prefill_lean.sh
echo "== bench/h200_split_merge.sh ($((SECONDS - t0)) s)"
OUT=$final/split SKIP_GPU_TESTS=1 timeout "$(left)" bash bench/h200_split_merge.sh
echo "== done ($((SECONDS - t0)) s)"
