#!/usr/bin/env bash
# Session 60's first device call (session 59's call3, run as it was): the batch-1 SSD update keeping its rows' state in L2
# (MSTAR_SSD_STATE_L2=1: the state's loads and stores L2 evict-last, so the next step finds
# it there while the weights stream through evict-first) and the plan in the plan kernel's
# parameters (MSTAR_PLAN_INLINE=1, never measured on an H200), against the defaults, the 0.56B
# at batch 1, three rounds alternated; the fold's bits test first (both hints). On an H200
# also session 58's call6 attention rows against FlashInfer 0.2.5.
# Pack: `rm -rf .carry && PACK_XZ=1 scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench
# mstar-bench-model-gpu && cp bench/device_calls.sh bench/results/session59-calls/{common.sh,call3.sh}
# .carry/ && rm -rf .carry/bin .carry/lib && mkdir -p .carry/fi && cp SLIM_SDIST
# .carry/fi/flashinfer_python-0.2.5.tar.gz && cp .whl-baselines/flashinfer-*-ops-*.tar.xz
# .carry/fi/` (SLIM_SDIST: session 58's README); run `CALL_LIMIT=300 bash .carry/call3.sh`
# carrying `.carry`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "$card"
gpu_tests 'gpu_recurrent.ssd_update_with_the_gated_norm_fold*' 60
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 3 "defaults statel2 planinline" "1"
if [[ $card == *H200* ]] && (($(left) > 120)); then
  attn_rounds "--rows 1 4 8 16 64 256 --prefill-rows 1 --rounds 5" "defaults MSTAR_NONE=0"
  attn_table
  ATTN_SHAPES="--rows 1 4 8 16 64 256 --prefill-rows 1" attn_flashinfer_carried "$here/fi"
fi
finish call3
