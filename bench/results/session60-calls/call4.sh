#!/usr/bin/env bash
# Session 60's fourth device call: call3's timeline put ~3-4 us of each SSD update after its
# sums (the norm fold's cluster exchange, its stores, the grid's end) and the out_proj's second
# half of weights (8 MB, loaded only after its wait on entry 6) after that. Entry 7 (eight
# pieces a lane: the whole 4,096-wide row in flight before the wait; split 2 like entry 6, the
# same bits) for the out_proj alone (MSTAR_OUT_PROJ_VARIANT=7; session 49's MSTAR_GEMV_SPLIT=7
# put every narrow product on it and lost 22 us), and with the update releasing it once its
# sums are done (its 16 MB then stream under the fold's tail, not beside the update's reads),
# against the defaults and `relsums`, the 0.56B at batch 1, three rounds alternated; the
# faster candidate's timeline. Pack: `rm -rf .carry && PACK_XZ=1 scripts/pack-device.sh
# mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu && cp bench/device_calls.sh
# bench/results/session60-calls/{common.sh,call4.sh} .carry/ && rm -rf .carry/bin .carry/lib`,
# `bash bench/profile/build.sh`; run `CALL_LIMIT=200 bash .carry/call4.sh` carrying `.carry`
# and `.profile/libmstar_kernel_times.so`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 3 "defaults op7 op7sums relsums" "1"
best=$(fastest_modes 1 "op7 op7sums")
echo "faster candidate: $best"
(($(left) > 60)) && timeline_of "$best"
finish call4
