#!/usr/bin/env bash
# Session 49's last call (the budget's last ~200 s): the chain mode `tail` (as `wave`, and
# in a grid of more than one wave the last wave's blocks release the next kernel at their
# start: the in_proj's, the MLP up's and the LM head's tails) against the default `wave`,
# two rounds of the 0.56B at batch 1 (the same digest expected).
# Pack as call1.sh says, with call7.sh; `CALL_LIMIT=60 bash .carry/call7.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
checkpoint nh056 nemotron_h-0.56b
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
nh056_rounds 3 "defaults chaintail" 1
finish call7
