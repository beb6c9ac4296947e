#!/usr/bin/env bash
# Session 62's fourth device call, for an H200 only (issue 17's batch-1 goal, unmeasured on one
# since session 51): the final binaries' 0.56B at batch 1 (three rounds) and the attention rows
# against FlashInfer 0.2.5; on any other card it stops after naming it. Pack as call1's header
# says (with call4.sh); run `CALL_LIMIT=200 bash .carry/call4.sh` carrying `.carry`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "$card"
[[ $card == *H200* ]] || exit 0
source "$here/common.sh"
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 3 "defaults" "1"
if (($(left) > 90)); then
  attn_rows_against_flashinfer "$here/fi"
fi
finish call4
