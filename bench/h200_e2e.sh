#!/usr/bin/env bash
# Everything GPU in one run on an H200 (the device machine), results under
# $OUT (default: ./h200-out):
#   1. mstar_gpu_tests: every CUDA kernel against the CPU reference, the pools
#      on device arenas, the model's greedy tokens against the fixtures;
#   2. mstar-gpu-bench: d2d copy bandwidth, then decode attention, the SSD
#      update and page pack/unpack as ratios of it;
#   3. end-to-end decode tokens/s of a random checkpoint (default: ~100M-parameter
#      Nemotron-H; --size names another of bench/transformers_decode.py's sizes,
#      e.g. qwen3_5-0.5b) at batch 1, 16 and 64: mstar (mstar-bench-model-gpu)
#      next to transformers (bench/transformers_decode.py) on the same checkpoint
#      and GPU, and the ratio table (e2e-table.md).
# The binaries are built on the Debian host (sm_90) and carried with the
# shared libraries the device lacks: scripts/pack-device.sh makes .carry/.
#
#   bash bench/h200_e2e.sh [--quick] [--size NAME]
#     --quick: fewer tokens and repeats; --size: the checkpoint (default 100m)
set -euo pipefail
source "$(dirname "$0")/device_env.sh"
new_tokens=128 repeats=3 size=100m
while (($#)); do
  case $1 in
    --quick) new_tokens=32 repeats=1 ;;
    --size) size=$2; shift ;;
    *) echo "h200_e2e.sh: unknown argument '$1' (--quick, --size NAME)" >&2; exit 2 ;;
  esac
  shift
done

# At most 8 files come back from the device: keep the count low.
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/env.txt"
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' \
  | tee -a "$out/env.txt"

echo "== GPU tests"
run_gpu_tests

echo "== kernel bandwidth"
"$bin/mstar-gpu-bench" --json | tee "$out/gpu-bench.jsonl"

echo "== end-to-end decode"
ckpt=$(mktemp -d)/$size
python3 "$root/bench/transformers_decode.py" make-checkpoint --size "$size" --out "$ckpt" | tee -a "$out/env.txt"
"$bin/mstar-run" --model "$ckpt" --device cuda --max-tokens 16 --prompt "The pools hold" 2>&1 | tee -a "$out/env.txt"
"$bin/mstar-bench-model-gpu" --model "$ckpt" --batch 1 16 64 --new-tokens "$new_tokens" \
  --repeats "$repeats" --json | tee "$out/mstar-e2e.jsonl"
"$bin/mstar-bench-model-gpu" --model "$ckpt" --batch 1 16 64 --new-tokens "$new_tokens" \
  --repeats "$repeats" --no-cuda-graphs --json | tee "$out/mstar-e2e-no-graphs.jsonl"
python3 "$root/bench/transformers_decode.py" decode --model "$ckpt" --device cuda --dtype bfloat16 \
  --batch 1 16 64 --new-tokens "$new_tokens" --repeats "$repeats" --json | tee "$out/transformers-e2e.jsonl"
python3 "$root/bench/e2e_table.py" "$out/mstar-e2e.jsonl" "$out/transformers-e2e.jsonl" \
  --out "$out/e2e-table.md"
