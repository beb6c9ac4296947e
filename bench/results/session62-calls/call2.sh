#!/usr/bin/env bash
# Session 62's second device call (the same warm H100 as call1, typed as the run's command):
# the handoff's step timeline. Run from the repository root with call1's `.carry` (common.sh
# beside it) and `.profile/libmstar_kernel_times.so` carried.
source .carry/common.sh >/dev/null 2>&1
checkpoint nh056 nemotron_h-0.56b
timeline_of handoff
sed -n 1,30p "$w/nh056-decode1-handoff.launches.txt"
finish call2
