#!/usr/bin/env bash
# Issue 18 on the two-GPU machine (device kind nvidia-h200-x2), results under $OUT:
#   gpu-tests.log    mstar_gpu_tests' tests that want two GPUs (tensor parallel over NCCL,
#                    ranks as processes over NCCL, the NCCL group, P/D over CUDA IPC) and
#                    the one-GPU ones beside them
#   allreduce.jsonl  mstar-bench-allreduce: the NCCL group's all-reduce at Nemotron-H's
#                    sizes (nccl-tests' algorithm / bus bandwidth) against a GPU 0 -> 1 peer
#                    copy of the same bytes timed in the same run
#   tp.jsonl         mstar-bench-model-gpu on the 8B shape at tensor parallel 1 and 2
#                    (ranks as threads, rank r on cuda:r, NCCL between them): decode at
#                    batch 1 / 64, and 2,048-token prompts at batch 1 / 8
# Needs scripts/pack-device.sh mstar_gpu_tests mstar-bench-allreduce mstar-bench-model-gpu
# (.carry, binaries unpacked under .carry/bin).
#   bash bench/h200x2_parallel.sh
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0  # multicast can take the host's GPUs out of service
nvidia-smi -L
echo "== GPU tests"
timeout 300 "$bin/mstar_gpu_tests" --gtest_filter='gpu_tensor_parallel.*:gpu_nccl.*:gpu_rank_processes.*:*cuda_ipc*' \
  >"$out/gpu-tests.log" 2>&1
echo "exit $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED " "$out/gpu-tests.log" | head -20
echo "== all-reduce"
timeout 120 "$bin/mstar-bench-allreduce" --json >"$out/allreduce.jsonl" 2>&1
echo "exit $?"; cut -c1-220 "$out/allreduce.jsonl"
echo "== 8B shape at tensor parallel 1 and 2"
ck=$(mktemp -d)
python3 "$root/bench/make_checkpoint.py" --size nemotron_h-8b --out "$ck/nh8b" 2>&1 | tail -1 | cut -c1-120
for tp in 1 2; do
  timeout 200 "$bin/mstar-bench-model-gpu" --model "$ck/nh8b" --tensor-parallel "$tp" --batch 1 64 \
    --prompt-len 32 --new-tokens 64 --repeats 2 --json 2>&1 | grep '^{' >>"$out/tp.jsonl"
  timeout 200 "$bin/mstar-bench-model-gpu" --model "$ck/nh8b" --tensor-parallel "$tp" --batch 1 8 \
    --prompt-len 2048 --new-tokens 2 --repeats 2 --json 2>&1 | grep '^{' >>"$out/tp.jsonl"
done
rm -rf "$ck"
python3 - "$out/tp.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print("tp", r.get("tensor_parallel"), "batch", r["batch"], "prompt", r["prompt_len"],
          "decode tok/s %.1f" % (r["decode_tokens_per_s"] or 0), "step_ms %.3f" % (r["step_ms"] or 0),
          "t1_s", r.get("t1_s"))
PY
