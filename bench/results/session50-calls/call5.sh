#!/usr/bin/env bash
# Session 50's fifth call (the budget's last ~240 s): the SSD update releasing the next
# kernel once its state's loads are issued (MSTAR_SSD_RELEASE=loads) against the defaults, two
# rounds of the 0.56B at batch 1; the SSD update's tests under it.
# Pack as session 49's call1.sh says, with call5.sh; `CALL_LIMIT=70 bash .carry/call5.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 2 "defaults ssdrel" 1
if (($(left) > 12)); then
  export MSTAR_SSD_RELEASE=loads
  gpu_tests '*ssd_update*:*gated_norm_fold*' $(($(left) - 4))
  unset MSTAR_SSD_RELEASE
fi
finish call5
