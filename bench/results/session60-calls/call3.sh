#!/usr/bin/env bash
# Session 60's third device call: after call2 (16 MB of out_proj prefetches beside the SSD
# update slowed the update 1.4 us a layer), the update releasing the out_proj later, so that
# its state and input reads meet an HBM the out_proj's first weight loads do not share:
# MSTAR_SSD_RELEASE `sums` (once its sums are done, before the norm fold) and `end` (no
# release), against the defaults (`loads`), the 0.56B at batch 1, three rounds alternated,
# after the fold's tests under `sums`; the step timeline of the faster candidate and the
# defaults'. Pack: `rm -rf .carry && PACK_XZ=1 scripts/pack-device.sh mstar_gpu_tests
# mstar-gpu-bench mstar-bench-model-gpu && cp bench/device_calls.sh
# bench/results/session60-calls/{common.sh,call3.sh} .carry/ && rm -rf .carry/bin .carry/lib`,
# `bash bench/profile/build.sh`; run `CALL_LIMIT=240 bash .carry/call3.sh` carrying `.carry`
# and `.profile/libmstar_kernel_times.so`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
MSTAR_SSD_RELEASE=sums gpu_tests 'gpu_recurrent.ssd_update_with_the_gated_norm_fold*' 60
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 3 "defaults relsums relend" "1"
best=$(fastest_modes 1 "relsums relend")
echo "faster candidate: $best"
(($(left) > 90)) && timeline_of "$best"
(($(left) > 70)) && timeline_of defaults
finish call3
