#!/usr/bin/env bash
# Session 57's first device call: session 56's call3 (never run) widened. The mma decode
# walk on two stages a warp (MSTAR_ATTN_MMA_STAGES=2: three D-128 blocks an SM rather than
# two, after session 56's Nsight Compute page of the 4-row split launch: 8 warps an SM, 0.19
# eligible, 1.25 TB/s) against the defaults: decode attention at 1 / 4 / 8 / 16 / 64 / 256
# rows of 2,048 positions and one row of 160, both settings alternated twice; 4 rows at
# 8 / 12 / 16 splits both ways; FlashInfer 0.2.5's decode on the same machine, same shapes
# (its modules compiled here by bench/flashinfer_prebuilt.sh, carried in .carry/fi); the
# 0.56B at batch 1 both ways (the same digest is the same bits); the bits test (two stages
# against three, one pass and split); the mma walk's attention tests with the switch on;
# racecheck and memcheck over its decode test with the switch on.
# Pack: `rm -rf .carry && PACK_XZ=1 scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench
# mstar-bench-model-gpu && cp bench/device_calls.sh bench/results/session57-calls/{common.sh,call1.sh}
# .carry/ && rm -rf .carry/bin .carry/lib && mkdir -p .carry/fi && cp
# .whl-baselines/flashinfer_python-0.2.5.tar.gz .whl-baselines/flashinfer-*-ops-*.tar.xz .carry/fi/`;
# run `CALL_LIMIT=280 bash .carry/call1.sh` carrying `.carry`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
rows="--rows 1 4 8 16 64 256 --prefill-rows 1 --rounds 5"
for rep in 1 2; do
  ATTN_SHAPES=$rows attn_setting "defaults$rep" MSTAR_NONE=0
  ATTN_SHAPES=$rows attn_setting "stages2-$rep" MSTAR_ATTN_MMA_STAGES=2
  ATTN_SHAPES="--rows 1 --context 160 --prefill-rows 1 --rounds 9" attn_setting "ctx160-defaults$rep" MSTAR_NONE=0
  ATTN_SHAPES="--rows 1 --context 160 --prefill-rows 1 --rounds 9" attn_setting "ctx160-stages2-$rep" MSTAR_ATTN_MMA_STAGES=2
done
# At 4 rows the rule gives 8 splits on three stages (2 blocks an SM) and 12 on two (3 an SM).
for n in 8 12 16; do
  ATTN_SHAPES="--rows 4 --prefill-rows 1 --rounds 5" attn_setting "splits$n" MSTAR_ATTN_SPLITS=$n
  ATTN_SHAPES="--rows 4 --prefill-rows 1 --rounds 5" attn_setting "stages2-splits$n" \
    MSTAR_ATTN_MMA_STAGES=2 MSTAR_ATTN_SPLITS=$n
done
attn_table
# FlashInfer: attn_flashinfer reads $root/.whl-baselines; the carried copy is in .carry/fi.
if compgen -G "$here/fi/flashinfer-*-ops-*.tar.xz" >/dev/null; then
  rm -rf "$root/.whl-baselines" && mkdir -p "$root/.whl-baselines" && cp "$here"/fi/* "$root/.whl-baselines/"
  ATTN_SHAPES="--rows 1 4 8 16 64 256 --prefill-rows 1" attn_flashinfer
  python3 bench/results/session52-calls/attn_table.py "$w/attn.jsonl" "$w/fi.jsonl" |
    tee "$w/attn-fi-table.txt"
fi
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 2 "defaults stages2" 1
gpu_tests 'gpu_attention_mma_stages.*:gpu_attention_fused_merge_host.*' 60
MSTAR_ATTN_MMA_STAGES=2 gpu_tests 'every_walk/gpu_attention_walk.*/mma:every_walk_and_merge/gpu_attention_split_variant.*/mma_*:every_split_walk/gpu_attention_fused_merge.*/mma' 90
MSTAR_ATTN_MMA_STAGES=2 sanitize_tests 'every_walk/gpu_attention_walk.decode_matches_the_cpu/mma' 40
finish call1
