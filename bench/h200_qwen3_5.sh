#!/usr/bin/env bash
# Qwen3.5 on an H200 (the device machine) in one call, results under $OUT:
#   1. the Qwen3.5 and delta-rule GPU tests (long prompts against the CPU
#      model included);
#   2. the ~0.56B random checkpoint (bench/transformers_decode.py's
#      qwen3_5-0.5b, bf16): decode tokens/s at batch 1 / 16 / 64 and prefill
#      time of long prompts at batch 1 / 8, mstar next to transformers (+ fla
#      from .whl/ when its wheels are there) on the same checkpoint;
#   3. with --kernels, mstar-gpu-bench --delta-rule-only (and, when
#      $carry/bin/mstar-gpu-bench-next exists, the same bench of another
#      build, e.g. a kernel branch) next to fla's kernels.
#   bash bench/h200_qwen3_5.sh [--kernels] [--quick]
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
kernels=0 new_tokens=64 repeats=3 lengths="1024 2048"
while (($#)); do
  case $1 in
    --kernels) kernels=1 ;;
    --quick) new_tokens=16 repeats=1 lengths=2048 ;;
    *) echo "h200_qwen3_5.sh: unknown argument '$1' (--kernels, --quick)" >&2; exit 2 ;;
  esac
  shift
done
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/env.txt"
if compgen -G "$root/.whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$root"/.whl/*.whl && export PYTHONPATH=/tmp/site
fi
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' \
  | tee -a "$out/env.txt"

echo "== GPU tests"
status=0
timeout 240 "$bin/mstar_gpu_tests" --gtest_filter='gpu_delta_rule.*:*qwen3_5*:*encoder*:*vision*' \
  >"$out/gpu-tests.log" 2>&1 || status=$?
echo "exit $status" | tee -a "$out/gpu-tests.log"
grep -E "^\[ (error|  FAILED|  PASSED|  SKIPPED) |Failure|measured|tests ran" "$out/gpu-tests.log"

echo "== Qwen3.5 ~0.56B end to end"
ckpt=$(mktemp -d)/q05
python3 "$root/bench/transformers_decode.py" make-checkpoint --size qwen3_5-0.5b --out "$ckpt" \
  | tee -a "$out/env.txt"
{
  "$bin/mstar-bench-model-gpu" --model "$ckpt" --batch 1 16 64 --new-tokens "$new_tokens" \
    --repeats "$repeats" --json
  for n in $lengths; do
    "$bin/mstar-bench-model-gpu" --model "$ckpt" --batch 1 8 --prompt-len "$n" --new-tokens 2 \
      --repeats "$repeats" --json
  done
} | tee "$out/mstar-e2e.jsonl"
{
  timeout 300 python3 "$root/bench/transformers_decode.py" decode --model "$ckpt" --device cuda \
    --dtype bfloat16 --batch 1 16 64 --new-tokens "$new_tokens" --repeats "$repeats" --json
  for n in $lengths; do
    timeout 200 python3 "$root/bench/transformers_decode.py" decode --model "$ckpt" --device cuda \
      --dtype bfloat16 --batch 1 8 --prompt-len "$n" --new-tokens 2 --repeats "$repeats" --json
  done
} | tee "$out/transformers-e2e.jsonl"

if ((kernels)); then
  echo "== delta rule kernels"
  timeout 110 "$bin/mstar-gpu-bench" --delta-rule-only --rounds 9 --json | tee "$out/ours.jsonl"
  if [[ -x $bin/mstar-gpu-bench-next ]]; then
    if [[ -x $bin/mstar_gpu_tests-next ]]; then
      timeout 120 "$bin/mstar_gpu_tests-next" --gtest_filter='gpu_delta_rule.*' \
        >"$out/gpu-tests-next.log" 2>&1
      echo "next: exit $?" | tee -a "$out/gpu-tests-next.log"
      grep -E "^\[ (error|  FAILED|  PASSED) |Failure|tests ran" "$out/gpu-tests-next.log"
    fi
    timeout 110 "$bin/mstar-gpu-bench-next" --delta-rule-only --rounds 9 --json \
      | tee "$out/ours-next.jsonl"
  fi
  timeout 200 python3 "$root/bench/fla_delta_rule.py" --json | tee "$out/fla.jsonl"
fi
exit "$status"
