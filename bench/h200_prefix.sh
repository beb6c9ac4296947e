#!/usr/bin/env bash
# On the GPU machine (after scripts/pack-device.sh mstar_gpu_tests
# mstar-bench-prefix): every GPU test (the recurrent pool's checkpoint slots
# live in the device arenas), then hybrid prefix reuse on the 100M
# checkpoint (bench/transformers_decode.py make-checkpoint) with the prefix
# cache on against off, in the same run: multi-turn sessions and a shared
# system prompt, hit rate of shareable tokens and mean TTFT. Results in
# $OUT (prefix-h200.jsonl, gpu-tests.log, env.txt).
set -euo pipefail
source "$(dirname "$0")/device_env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/env.txt"
gpu_tests=0
run_gpu_tests || gpu_tests=1
ckpt=$(mktemp -d)/nemotron_h_100m
python3 "$root/bench/transformers_decode.py" make-checkpoint --size 100m --out "$ckpt" |
  tee -a "$out/env.txt"
"$bin/mstar-bench-prefix" --model "$ckpt" --device cuda --sessions 16 --turns 4 \
  --user-tokens 64 --output-tokens 64 --system-tokens 1024 --requests 64 --wave 16 \
  --pages 1200 --rounds 2 --json | tee "$out/prefix-h200.jsonl"
exit "$gpu_tests"
