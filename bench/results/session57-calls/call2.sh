#!/usr/bin/env bash
# Session 57's second device call: the mma decode walk gathering its tiles with bulk copies
# (MSTAR_ATTN_MMA_BULK=1: one cp.async.bulk a K or V row on a barrier a stage, in place of
# sixteen 16-byte cp.async a lane) against the defaults: decode attention at 1 / 4 / 8 / 16
# rows of 2,048 positions and one row of 160, both settings alternated twice; FlashInfer
# 0.2.5's decode on the same machine (as call1); the 0.56B at batch 1 both ways (the same
# digest is the same bits); the bits test (bulk against cp.async, one pass and split); the
# mma walk's attention tests with bulk copies on; racecheck and memcheck over its decode
# test with them on; Nsight Compute over the 4-row split launch with them on.
# Pack: as call1 with call2.sh (`rm -rf .carry && PACK_XZ=1 scripts/pack-device.sh
# mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu && cp bench/device_calls.sh
# bench/results/session57-calls/{common.sh,call2.sh} .carry/ && rm -rf .carry/bin .carry/lib
# && mkdir -p .carry/fi && cp <slim sdist> .whl-baselines/flashinfer-*-ops-*.tar.xz .carry/fi/`,
# the slim sdist being flashinfer_python-0.2.5.tar.gz without 3rdparty/ and tests/);
# run `CALL_LIMIT=270 bash .carry/call2.sh` carrying `.carry`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
rows="--rows 1 4 8 16 --prefill-rows 1 --rounds 5"
for rep in 1 2; do
  ATTN_SHAPES=$rows attn_setting "defaults$rep" MSTAR_NONE=0
  ATTN_SHAPES=$rows attn_setting "bulk$rep" MSTAR_ATTN_MMA_BULK=1
  ATTN_SHAPES="--rows 1 --context 160 --prefill-rows 1 --rounds 9" attn_setting "ctx160-defaults$rep" MSTAR_NONE=0
  ATTN_SHAPES="--rows 1 --context 160 --prefill-rows 1 --rounds 9" attn_setting "ctx160-bulk$rep" MSTAR_ATTN_MMA_BULK=1
done
attn_table
ATTN_SHAPES="--rows 1 4 8 16 --prefill-rows 1" attn_flashinfer_carried "$here/fi"
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 2 "defaults bulk1" 1
gpu_tests 'gpu_attention_mma_bulk.*:gpu_attention_fused_merge_host.*' 60
MSTAR_ATTN_MMA_BULK=1 gpu_tests 'every_walk/gpu_attention_walk.*/mma:every_walk_and_merge/gpu_attention_split_variant.*/mma_*:every_split_walk/gpu_attention_fused_merge.*/mma' 90
MSTAR_ATTN_MMA_BULK=1 sanitize_tests 'every_walk/gpu_attention_walk.decode_matches_the_cpu/mma' 40
ncu_attention ncu-bulk4 attend_decode_mma 4 2 "--rows 4 --prefill-rows 1" MSTAR_ATTN_MMA_BULK=1
finish call2
