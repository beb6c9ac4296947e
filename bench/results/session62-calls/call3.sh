#!/usr/bin/env bash
# Session 62's third device call: decode attention at 32-256 rows (2,048 positions, 32 q / 8 kv
# heads, D 128), where the mma walk reads 0.98-0.99 of FlashInfer 0.2.5's time on an H100
# (session 58's call4) and the split rule never splits: forced splits of every row
# (MSTAR_ATTN_SPLITS=2 / 3 / 4; the fused merge, more and shorter blocks, so less of a last
# wave) against the defaults, two rounds alternated, FlashInfer in the same call; then the
# final binaries' 0.56B at batch 1 (three rounds). Pack as call1's header says (with
# call3.sh in place of call1.sh); run `CALL_LIMIT=280 bash .carry/call3.sh` carrying `.carry`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "$card"
shapes="--rows 32 64 128 256 --prefill-rows 1 --rounds 3"
attn_rounds "$shapes" "defaults MSTAR_NONE=0" "splits2 MSTAR_ATTN_SPLITS=2" \
  "splits3 MSTAR_ATTN_SPLITS=3" "splits4 MSTAR_ATTN_SPLITS=4"
attn_table
ATTN_SHAPES="--rows 32 64 128 256 --prefill-rows 1" attn_flashinfer_carried "$here/fi"
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 3 "defaults" "1"
finish call3
