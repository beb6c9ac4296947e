#!/usr/bin/env bash
# Session 56's third device call: the mma decode walk on two stages a warp
# (MSTAR_ATTN_MMA_STAGES=2: three blocks an SM at D 128 rather than two, after call1's Nsight
# Compute found 8 warps an SM, 0.19 eligible) against the defaults. Decode attention at 1 / 4 /
# 8 rows of 2,048 positions and one row of 160, both settings alternated twice; 4 rows at 4 / 8
# / 12 / 16 splits both ways; the 0.56B at batch 1 both ways (the same digest is the same
# bits); its bits test (two stages against three, one pass and split); the mma walk's
# attention tests with the switch on; racecheck over its decode test
# with the switch on. Pack: as call1 (`rm -rf .carry
# && PACK_XZ=1 scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu &&
# cp bench/device_calls.sh bench/results/session56-calls/{common.sh,call3.sh} .carry/ && rm -rf
# .carry/bin .carry/lib`); run `CALL_LIMIT=260 bash .carry/call3.sh` carrying `.carry`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
for rep in 1 2; do
  ATTN_SHAPES="--rows 1 4 8 --prefill-rows 1 --rounds 5" attn_setting "defaults$rep" MSTAR_NONE=0
  ATTN_SHAPES="--rows 1 4 8 --prefill-rows 1 --rounds 5" attn_setting "stages2-$rep" MSTAR_ATTN_MMA_STAGES=2
  ATTN_SHAPES="--rows 1 --context 160 --prefill-rows 1 --rounds 9" attn_setting "ctx160-defaults$rep" MSTAR_NONE=0
  ATTN_SHAPES="--rows 1 --context 160 --prefill-rows 1 --rounds 9" attn_setting "ctx160-stages2-$rep" MSTAR_ATTN_MMA_STAGES=2
done
# At 4 rows the rule gives 8 splits on three stages (2 blocks an SM) and 12 on two (3 an SM):
# the split counts swept under both.
for n in 4 8 12 16; do
  ATTN_SHAPES="--rows 4 --prefill-rows 1 --rounds 5" attn_setting "splits$n" MSTAR_ATTN_SPLITS=$n
  ATTN_SHAPES="--rows 4 --prefill-rows 1 --rounds 5" attn_setting "stages2-splits$n" \
    MSTAR_ATTN_MMA_STAGES=2 MSTAR_ATTN_SPLITS=$n
done
attn_table
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 1 "defaults stages2" 1
gpu_tests 'gpu_attention_mma_stages.*:gpu_attention_fused_merge_host.*' 60
MSTAR_ATTN_MMA_STAGES=2 gpu_tests 'every_walk/gpu_attention_walk.*/mma:every_walk_and_merge/gpu_attention_split_variant.*/mma_*:every_split_walk/gpu_attention_fused_merge.*/mma' 90
MSTAR_ATTN_MMA_STAGES=2 sanitize_tests 'every_walk/gpu_attention_walk.decode_matches_the_cpu/mma' 40
finish call3
