#!/usr/bin/env bash
# Session 58's sixth device call, on the final binaries: decode attention at 1 / 4 / 8 / 16 /
# 64 / 256 rows of 2,048 positions under the defaults (bulk copies by grid, the mma walk from
# 16 rows) and those before (MSTAR_ATTN_MMA_BULK=0), FlashInfer 0.2.5 beside them; the 0.56B at
# batch 1 (issue 17's batch-1 roofline goal) and 64; the attention host tests.
# Pack: as call3 with call6.sh; run `CALL_LIMIT=200 bash .carry/call6.sh` carrying `.carry`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
attn_rounds "--rows 1 4 8 16 64 256 --prefill-rows 1 --rounds 5" "defaults MSTAR_NONE=0" \
  "bulk0- MSTAR_ATTN_MMA_BULK=0"
attn_table
ATTN_SHAPES="--rows 1 4 8 16 64 256 --prefill-rows 1" attn_flashinfer_carried "$here/fi"
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 2 "defaults bulk0" "1 64"
gpu_tests 'gpu_attention.*:gpu_attention_fused_merge_host.*' 30
finish call6
