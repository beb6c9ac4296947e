#!/usr/bin/env bash
# Session 53's third device call (optional, after call1 on the same warm machine and carry):
# Nsight Compute over the split launches with each switch on, against session 52's call4 pass
# with them off: rows_mma at 64 rows with MSTAR_ATTN_ROWS_MMA_LAST_WARP=1 (session 52: 2.70
# TB/s, warps at the block barrier 7.8 of every 20 cycles) and the mma walk at 4 rows with
# MSTAR_ATTN_MMA_COPIES_FIRST=1 (session 52: 1.22 TB/s, L1TEX scoreboard the top stall), two
# launches each, without graphs. `CALL_LIMIT=240 bash .carry/call3.sh` (copy it into .carry
# beside call1.sh).
set -uo pipefail
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
# -s 4 as session 52's call4: launches 5-6 are the split case's.
ncu_attention ncu-rows64-lastwarp rows_mma 4 2 "--rows 64 --prefill-rows 1" \
  MSTAR_ATTN_ROWS_MMA_LAST_WARP=1
ncu_attention ncu-mma4-copies attend_decode_mma 4 2 "--rows 4 --prefill-rows 1" \
  MSTAR_ATTN_MMA_COPIES_FIRST=1
finish call3
