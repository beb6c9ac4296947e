#!/usr/bin/env bash
# Per-kernel device time shares on an H200 (the device machine), results under
# $OUT: bench/profile/kernel_times.cpp (a CUPTI injection library, built here
# by bench/profile/build.sh and carried in .profile/) records every kernel of
# a benchmark process; one table per case (<case>.txt, <case>.jsonl, the
# bench's <case>.log; decode cases also the last steps' timeline and where
# its time went, bench/profile/timeline.py: <case>.steps.txt), all in
# $OUT/profile.tgz (the device returns 8 files):
#   delta-rule      mstar-gpu-bench --delta-rule-only (decode b64, prefill 4096)
#   qwen-prefill    Qwen3.5 ~0.56B (bf16), 8 x 2048-token prompts, one step
#   qwen-decode     the same checkpoint, batch 64 decode
#   nemotron-*      Nemotron-H ~0.6B ("600m"), the same two shapes
#   nemotron-decode1  the same, batch 1 alone (256 tokens: the decode steps dominate)
#   nh056-decode64  issue 17's Nemotron-H 0.56B (bench/make_checkpoint.py), batch 64 alone
#   nh056-decode1   the same checkpoint, batch 1 alone (256 new tokens)
#   ssd-1row        mstar-gpu-bench --suite ssd at one 2,048-token row (h64 and h128; the
#                   sequential scan's cases too), as graphs
# and, where the machine has them, which of ncu / nsys / compute-sanitizer exist.
#   bash bench/h200_profile.sh [CASE...]   (default: all)
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
inject=$root/.profile/libmstar_kernel_times.so
cupti=$(cupti_lib_dir)
[[ -n $cupti ]] && export LD_LIBRARY_PATH=$cupti:$LD_LIBRARY_PATH
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "libcupti: ${cupti:-not found}"
  for t in ncu nsys compute-sanitizer; do echo "$t: $(command -v $t || ls /usr/local/cuda/bin/$t 2>/dev/null || echo absent)"; done
} | tee "$out/profile-env.txt"
cases=("$@")
((${#cases[@]})) || cases=(delta-rule qwen-prefill qwen-decode nemotron-prefill nemotron-decode)
work=$(mktemp -d)
profile() {  # NAME COMMAND...: the command under the injection library
  local name=$1
  shift
  CUDA_INJECTION64_PATH=$inject MSTAR_KERNEL_PROFILE=$work/$name.txt \
    MSTAR_KERNEL_PROFILE_JSON=$work/$name.jsonl MSTAR_KERNEL_TIMELINE=$work/$name.timeline.jsonl \
    "$@" >"$work/$name.log" 2>&1
  echo "== $name (exit $?)"
  head -14 "$work/$name.txt" 2>/dev/null | cut -c1-150 || tail -5 "$work/$name.log"
  # Decode cases: the last steps as they ran (chained kernels overlapping).
  if [[ $name == *decode* ]]; then
    python3 "$root/bench/profile/timeline.py" "$work/$name.timeline.jsonl" >"$work/$name.steps.txt" 2>&1
    head -24 "$work/$name.steps.txt" | cut -c1-150
  fi
}
ckpt_dir=$(mktemp -d)
checkpoint() {  # SIZE: a random checkpoint of bench/transformers_decode.py's SIZES, made once
  [[ -d $ckpt_dir/$1 ]] || python3 "$root/bench/transformers_decode.py" make-checkpoint --size "$1" \
    --out "$ckpt_dir/$1" >>"$out/profile-env.txt" 2>&1
  echo "$ckpt_dir/$1"
}
nh056() {  # issue 17's 0.56B checkpoint (bench/make_checkpoint.py), made once
  [[ -d $ckpt_dir/nh056 ]] || python3 "$root/bench/make_checkpoint.py" --size nemotron_h-0.56b \
    --out "$ckpt_dir/nh056" >>"$out/profile-env.txt" 2>&1
  echo "$ckpt_dir/nh056"
}
for c in "${cases[@]}"; do
  case $c in
    delta-rule)
      profile delta-rule "$bin/mstar-gpu-bench" --delta-rule-only --delta-batches 64 \
        --threshold-lengths 4096 --rounds 5 --json ;;
    qwen-prefill)
      profile qwen-prefill "$bin/mstar-bench-model-gpu" --model "$(checkpoint qwen3_5-0.5b)" \
        --batch 8 --prompt-len 2048 --new-tokens 2 --repeats 2 --json ;;
    qwen-decode)
      profile qwen-decode "$bin/mstar-bench-model-gpu" --model "$(checkpoint qwen3_5-0.5b)" \
        --batch 64 --new-tokens 64 --repeats 2 --json ;;
    nemotron-prefill)
      profile nemotron-prefill "$bin/mstar-bench-model-gpu" --model "$(checkpoint 600m)" \
        --batch 8 --prompt-len 2048 --new-tokens 2 --repeats 2 --json ;;
    nemotron-decode)
      profile nemotron-decode "$bin/mstar-bench-model-gpu" --model "$(checkpoint 600m)" \
        --batch 1 64 --new-tokens 64 --repeats 2 --json ;;
    nemotron-decode1)
      profile nemotron-decode1 "$bin/mstar-bench-model-gpu" --model "$(checkpoint 600m)" \
        --batch 1 --new-tokens 256 --repeats 2 --json ;;
    nh056-decode64)
      profile nh056-decode64 "$bin/mstar-bench-model-gpu" --model "$(nh056)" \
        --batch 64 --prompt-len 32 --new-tokens 128 --repeats 2 --json ;;
    nh056-decode1)
      profile nh056-decode1 "$bin/mstar-bench-model-gpu" --model "$(nh056)" \
        --batch 1 --prompt-len 32 --new-tokens 256 --repeats 2 --json ;;
    ssd-1row)
      profile ssd-1row "$bin/mstar-gpu-bench" --suite ssd --prefill-rows 1 --graphs --rounds 5 \
        --json ;;
    *) echo "h200_profile.sh: unknown case '$c'" >&2; exit 2 ;;
  esac
done
tar czf "$out/profile.tgz" -C "$work" .
