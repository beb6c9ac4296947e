#!/usr/bin/env bash
# Session 58's third device call: the mma walk's copies chosen by each launch's grid (bulk
# copies where a launch has a block for every three SMs, `bulk_pays` in
# kernels/cuda/attention_decode_mma.cu; the default since this session) against cp.async
# everywhere (MSTAR_ATTN_MMA_BULK=0, the default until now) and bulk copies everywhere (=1):
# decode attention at 1 / 4 / 8 / 16 rows of 2,048 positions, one row of 160, 512 and 1,024
# (either side of the threshold), each setting alternated twice; FlashInfer 0.2.5 on the same
# machine; the 0.56B at batch 1 by grid and with cp.async (one row of at most 160 positions:
# cp.async either way, the same digest); the bits test (bulk, cp.async and by grid) and the
# attention tests under the default; racecheck and memcheck over the bits test. Also the mma
# walk at 16 / 32 / 64 rows against rows_mma (the default there).
# Pack: `rm -rf .carry && PACK_XZ=1 scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench
# mstar-bench-model-gpu && cp bench/device_calls.sh bench/results/session58-calls/{common.sh,call3.sh}
# .carry/ && rm -rf .carry/bin .carry/lib && mkdir -p .carry/fi && cp <slim sdist>
# .whl-baselines/flashinfer-*-ops-*.tar.xz .carry/fi/` (the slim sdist: flashinfer_python-0.2.5.tar.gz
# without 3rdparty/ and tests/); run `CALL_LIMIT=270 bash .carry/call3.sh` carrying `.carry`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
rows="--rows 1 4 8 16 --prefill-rows 1 --rounds 5"
for rep in 1 2; do
  for s in "defaults MSTAR_NONE=0" "cp MSTAR_ATTN_MMA_BULK=0" "bulk MSTAR_ATTN_MMA_BULK=1"; do
    set -- $s
    ATTN_SHAPES=$rows attn_setting "$1$rep" "$2"
    for ctx in 160 512 1024; do
      ATTN_SHAPES="--rows 1 --context $ctx --prefill-rows 1 --rounds 9" \
        attn_setting "ctx$ctx-$1$rep" "$2"
    done
  done
done
# The mma walk (now with bulk copies by grid) at 16 / 32 / 64 rows, where rows_mma takes
# them by default (session 36's rule), against that default.
for rep in 1 2; do
  ATTN_SHAPES="--rows 16 32 64 --prefill-rows 1 --rounds 5" attn_setting "ctx2048-rowsmma$rep" MSTAR_NONE=0
  ATTN_SHAPES="--rows 16 32 64 --prefill-rows 1 --rounds 5" attn_setting "ctx2048-mma$rep" \
    MSTAR_ATTN_DECODE_WALK=3
done
attn_table
ATTN_SHAPES="--rows 1 4 8 16 --prefill-rows 1" attn_flashinfer_carried "$here/fi"
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 2 "defaults bulk0" 1
gpu_tests 'gpu_attention_mma_bulk.*:gpu_attention_fused_merge_host.*' 60
gpu_tests '*attention*' 150
sanitize_tests 'gpu_attention_mma_bulk.*' 40
finish call3
