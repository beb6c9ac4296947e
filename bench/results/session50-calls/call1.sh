#!/usr/bin/env bash
# Session 50's first call (session 49's call7, written then): the chain mode
# `tail` (as `wave`, and in a grid of more than one wave the last wave's blocks release the
# next kernel at their start: the in_proj's, the MLP up's and the LM head's tails) against
# the default `wave`, three rounds of the 0.56B at batch 1 (the same digest expected; on an
# H200 this is also the figure under `wave`), the fastest's timeline, then every GPU test
# under the default in the time left.
# Pack as call1.sh says, with call1.sh; `CALL_LIMIT=540 bash .carry/call1.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
checkpoint nh056 nemotron_h-0.56b
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
nh056_rounds 3 "defaults chaintail" 1
best=$(fastest_modes 1 "defaults chaintail")
echo "== timeline of $best ($((SECONDS - t0)) s)"
(($(left) > 60)) && timeline_of "$best"
echo "== every GPU test ($((SECONDS - t0)) s)"
(($(left) > 60)) && gpu_tests '*' $(($(left) - 20))
grep "^\[ RUN" "$w/tests.log" | tail -1
finish call1
