#!/usr/bin/env bash
# Session 51's second call: the new defaults (the SSD update releases the next kernel once its
# state's loads are issued, MSTAR_SSD_RELEASE=loads; entry 12 removed). The GEMV and SSD update
# tests (the focused ones: call1's `*ssd_update*` filter ran the whole variant sweep), then
# three rounds of the 0.56B at batch 1, defaults against the release at the start and against
# the pick off; the 8B shape (its 128 heads, 24 Mamba layers) defaults against `start`; the
# defaults' step timeline. Pack as session 50's README says, with call2.sh;
# `CALL_LIMIT=450 bash .carry/call2.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
gpu_tests 'gpu_linear.every_gemv*:gpu_linear.the_one_wave_pick*:gpu_recurrent.ssd_update*:gpu_recurrent.ssd_scan_and_update*:gpu_model*' 150
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 3 "defaults ssdstart wpicknone" 1
(($(left) > 100)) && timeline_of defaults
if (($(left) > 120)); then
  checkpoint nh8b nemotron_h-8b
  ab_runs nh8b "defaults ssdstart" "--batch 1 --new-tokens 64 --repeats 2"
fi
finish call2
