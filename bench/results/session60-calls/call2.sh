#!/usr/bin/env bash
# Session 60's second device call: one-row GEMVs after the step's latency-bound kernels ask L2
# for their whole weight before their chained wait (MSTAR_GEMV_L2_AFTER: `ssd` the out_proj
# after the SSD update, `attn` the o_proj after decode attention, `both`), the 0.56B at batch
# 1, three rounds alternated against the defaults, after the hint's bits tests; the step
# timeline of the faster of `both` and `ssd` beside the defaults'. On an H200 also the
# defaults' attention rows against FlashInfer 0.2.5 (session 58's unrun call6).
# Pack: `rm -rf .carry && PACK_XZ=1 scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench
# mstar-bench-model-gpu && cp bench/device_calls.sh bench/results/session60-calls/{common.sh,call2.sh}
# .carry/ && rm -rf .carry/bin .carry/lib && mkdir -p .carry/fi && cp SLIM_SDIST
# .carry/fi/flashinfer_python-0.2.5.tar.gz && cp .whl-baselines/flashinfer-*-ops-*.tar.xz
# .carry/fi/` (SLIM_SDIST: session 58's README), `bash bench/profile/build.sh`; run
# `CALL_LIMIT=330 bash .carry/call2.sh` carrying `.carry` and `.profile/libmstar_kernel_times.so`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "$card"
gpu_tests 'gpu_linear.asking_l2*:gpu_linear.activation_linear_equals*' 60
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 3 "defaults l2ssd l2attn l2both" "1"
best=$(fastest_modes 1 "l2ssd l2both")
echo "faster candidate: $best"
(($(left) > 100)) && timeline_of "$best"
(($(left) > 80)) && timeline_of defaults
if [[ $card == *H200* ]] && (($(left) > 120)); then
  attn_rounds "--rows 1 4 8 16 64 256 --prefill-rows 1 --rounds 5" "defaults MSTAR_NONE=0"
  attn_table
  ATTN_SHAPES="--rows 1 4 8 16 64 256 --prefill-rows 1" attn_flashinfer_carried "$here/fi"
fi
finish call2
