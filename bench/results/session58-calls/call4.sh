#!/usr/bin/env bash
# Session 58's fourth device call: the default rule's steps of 16 rows and more on the mma walk
# (bulk copies by grid) where rows_mma took them (walk_of, since this session), against the
# defaults until now (MSTAR_ATTN_MMA_BULK=0: cp.async and rows_mma from 16 rows, registers at
# head_dim 256): decode attention at 16 / 32 / 64 / 128 / 256 rows of 2,048 positions, both
# alternated twice, FlashInfer 0.2.5 beside them; the 0.56B at batch 16 and 64 (prompts of 32)
# and at batch 16 with prompts of 1,024; Qwen3.5 0.5B (head_dim 256) at batch 16 and 64; the
# host rule test, the bits test and the mma walk's tests.
# Pack: as call3 with call4.sh; run `CALL_LIMIT=280 bash .carry/call4.sh` carrying `.carry`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
rows="--rows 16 32 64 128 256 --prefill-rows 1 --rounds 5"
for rep in 1 2; do
  ATTN_SHAPES=$rows attn_setting "defaults$rep" MSTAR_NONE=0
  ATTN_SHAPES=$rows attn_setting "bulk0-$rep" MSTAR_ATTN_MMA_BULK=0
done
attn_table
ATTN_SHAPES="--rows 16 32 64 128 256 --prefill-rows 1" attn_flashinfer_carried "$here/fi"
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 2 "defaults bulk0" "16 64"
for rep in 1 2; do
  for mode in defaults bulk0; do
    (($(left) > 60)) || break
    f=$w/nh056-p1024-$mode-$rep.jsonl
    # shellcheck disable=SC2046  # the mode's switches split on purpose
    env $(envs_of $mode) timeout 60 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 16 \
      --prompt-len 1024 --new-tokens 64 --repeats 2 --json >"$f" 2>"$f.err"
    model_summary "$mode" "$f"
  done
done
if (($(left) > 100)); then
  checkpoint qwen qwen3_5-0.5b
  ab_runs qwen "defaults bulk0" "--batch 16 64 --new-tokens 64 --repeats 2"
fi
gpu_tests 'gpu_attention_fused_merge_host.*:gpu_attention_mma_bulk.*:every_walk/gpu_attention_walk.*/mma:every_walk_and_merge/gpu_attention_split_variant.*/mma_mfused' 60
finish call4
