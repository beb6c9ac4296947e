#!/usr/bin/env bash
# Session 61's second device call (the same warm H100 as call1, written there as /tmp/c2.sh):
# the defaults' step timeline beside foldlate's, on one machine. Run `CALL_LIMIT=150 bash
# call2.sh` from the repository root with call1's `.carry` (common.sh beside it) and
# `.profile/libmstar_kernel_times.so` carried.
source .carry/common.sh
nvidia-smi --query-gpu=name --format=csv,noheader
checkpoint nh056 nemotron_h-0.56b
timeline_of defaults
timeline_of foldlate
finish call2
