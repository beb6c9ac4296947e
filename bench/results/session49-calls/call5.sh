#!/usr/bin/env bash
# Session 49's fifth call: `wave` (the default) against `late` once more, on an H200 if one
# comes; under it, the narrow products on entry 7 (eight pieces a lane: the out_proj's
# whole 4,096-wide row loaded before its wait, since its one-wave grid is resident at
# once) and short attention chunks with the fused merge; Qwen3.5 0.5B (call4 ran out of
# time before it); the fastest's timeline.
# Pack as call1.sh says, with call5.sh; `CALL_LIMIT=170 bash .carry/call5.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
checkpoint nh056 nemotron_h-0.56b
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
modes="defaults chainlate split7 chunk32merge2"
nh056_rounds 2 "$modes" 1
best=$(fastest_modes 1 "$modes")
echo "== Qwen3.5 0.5B at batch 1 ($((SECONDS - t0)) s)"
if (($(left) > 70)); then
  checkpoint qwen qwen3_5-0.5b
  ab_runs qwen "defaults chainlate" "--batch 1 --new-tokens 128 --repeats 3"
fi
echo "== timeline of $best ($((SECONDS - t0)) s)"
if (($(left) > 40)); then
  timeline_of "$best"
  grep -E "gemv|ssd_update|attend|merge" "$w/nh056-decode1-$best.launches.txt" | sed -n 1,14p
fi
finish call5
