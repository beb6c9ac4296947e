#!/usr/bin/env bash
# Session 61's first device call: session 60's call4 (the out_proj after the SSD update on entry
# 7, its whole 4,096-wide rows in flight before the wait; `op7`, and with the update releasing
# it at its sums, `op7sums`) and the fold's late state stores (MSTAR_SSD_FOLD_STORES=late: the
# new state held in registers through the sums and stored between the block's arrival on the
# norm exchange's cluster barrier and its wait, so the exchange does not queue behind 32 KB of
# store issue a block; `foldlate`), against the defaults, the 0.56B at batch 1,
# three rounds alternated; the fold's bits test (both store places) first; the fastest
# candidate's timeline. On an H200 also the defaults' attention rows against FlashInfer 0.2.5
# (session 58's unrun call6). Pack: `rm -rf .carry && PACK_XZ=1 scripts/pack-device.sh
# mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu && cp bench/device_calls.sh
# bench/results/session61-calls/{common.sh,call1.sh} .carry/ && rm -rf .carry/bin .carry/lib &&
# mkdir -p .carry/fi && cp SLIM_SDIST .carry/fi/flashinfer_python-0.2.5.tar.gz && cp
# .whl-baselines/flashinfer-*-ops-*.tar.xz .carry/fi/` (SLIM_SDIST: session 58's README),
# `bash bench/profile/build.sh`; run `CALL_LIMIT=250 bash .carry/call1.sh` carrying `.carry`
# and `.profile/libmstar_kernel_times.so`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "$card"
gpu_tests 'gpu_recurrent.ssd_update_with_the_gated_norm_fold*:gpu_recurrent.ssd_update_gated_norm*' 40
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 3 "defaults op7 foldlate op7sums" "1"
best=$(fastest_modes 1 "op7 foldlate op7sums")
echo "fastest candidate: $best"
(($(left) > 60)) && timeline_of "$best"
if [[ $card == *H200* ]] && (($(left) > 120)); then
  attn_rounds "--rows 1 4 8 16 64 256 --prefill-rows 1 --rounds 5" "defaults MSTAR_NONE=0"
  attn_table
  ATTN_SHAPES="--rows 1 4 8 16 64 256 --prefill-rows 1" attn_flashinfer_carried "$here/fi"
fi
finish call1
