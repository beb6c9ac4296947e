#!/usr/bin/env bash
# Session 50's fourth call: the 0.56B's batch-1 timeline under the new defaults (the one-wave
# pick on). Pack as session 49's call1.sh says, with call4.sh; `CALL_LIMIT=100 bash .carry/call4.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
checkpoint nh056 nemotron_h-0.56b
timeline_of defaults
grep -E "gemv|ssd_update|attend|merge|plan" "$w/nh056-decode1-defaults.launches.txt" | sed -n 1,16p
finish call4
