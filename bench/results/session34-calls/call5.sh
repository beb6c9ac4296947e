#!/usr/bin/env bash
# Session 34's fifth call: main with the pools' keep fix (runtime::pool_memory) and the SSD default at
# variant 4: the P/D CUDA-IPC tests five times (their prefill child crashed at exit in the fourth
# call), the chunked SSD / model tests, the SSD bench on the default, the 0.56B prefill twice.
# After scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu; carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
timeout 90 "$bin/mstar_gpu_tests" --gtest_filter='*cuda_ipc*' --gtest_repeat=5 >"$out/ipc.log" 2>&1
echo "cuda ipc x5 exit $? ($((SECONDS - t0)) s)"; grep -cE "^\[       OK \] fixtures/gpu_pd" "$out/ipc.log"
grep -E "^\[  FAILED |Segmentation" "$out/ipc.log" | head -5
timeout 70 "$bin/mstar_gpu_tests" --gtest_filter='gpu_recurrent*:gpu_model*:*nemotron*:gpu_rank_processes.*' \
  >"$out/tests.log" 2>&1; echo "tests exit $? ($((SECONDS - t0)) s)"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED " "$out/tests.log" | head -8
timeout 30 "$bin/mstar-gpu-bench" --suite ssd --graphs --rounds 5 --json | grep '^{' >"$out/ssd.jsonl"
python3 -c "
import json,sys
for l in open('$out/ssd.jsonl'):
    r=json.loads(l)
    if 'sequential' not in r['case']: print(r['case'], '%.1f' % r['us_per_call'])"
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
for r in 1 2; do
  timeout 40 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 8 --prompt-len 2048 \
    --new-tokens 2 --repeats 3 --json | grep '^{' | sed "s/^{/{\"run\": $r, /" >>"$out/prefill.jsonl"
done
python3 -c "
import json
for l in open('$out/prefill.jsonl'):
    r=json.loads(l); print('prefill run', r['run'], 'batch', r['batch'], 'compute %.4f' % r['roofline_prefill']['compute_fraction'])"
echo "== done ($((SECONDS - t0)) s)"
tar czf "$final/call5.tgz" -C "$out" .
