#!/usr/bin/env bash
# Session 61's fourth device call: the final binaries (both of call1's switches removed) at the
# defaults, the 0.56B at batch 1, three rounds; on an H200 (issue 17's batch-1 goal, unmeasured
# there since session 51) also the attention rows against FlashInfer 0.2.5. Pack as call1's
# header says (with call4.sh); run `CALL_LIMIT=170 bash .carry/call4.sh` carrying `.carry` and
# `.profile/libmstar_kernel_times.so`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "$card"
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 3 "defaults" "1"
if [[ $card == *H200* ]] && (($(left) > 100)); then
  attn_rows_against_flashinfer "$here/fi"
fi
finish call4
