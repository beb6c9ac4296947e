#!/usr/bin/env bash
# Session 62's first device call, two ways to shorten the SSD update's ~5 us a layer on the
# 0.56B's batch-1 step: (1) session 60's out_proj L2 ask (MSTAR_GEMV_L2_AFTER=ssd, restored)
# with the update releasing the out_proj once its sums are done (MSTAR_SSD_RELEASE=sums), so
# its 16 MB stream under the update's ~3-4 us tail rather than beside the update's state loads,
# a line a lane or (MSTAR_GEMV_L2_BULK=1) one bulk prefetch a row; (2) the counted handoff
# (MSTAR_SSD_HANDOFF=1): the out_proj waits for the update's blocks to count themselves, not
# for the update's grid to end. Tests first (their bits), then rounds alternated and the
# fastest candidate's timeline; on an H200 also session 61's call4 (the attention rows against
# FlashInfer 0.2.5).
# Pack: `rm -rf .carry && PACK_XZ=1 scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench
# mstar-bench-model-gpu && cp bench/device_calls.sh bench/results/session62-calls/{common.sh,call1.sh}
# .carry/ && rm -rf .carry/bin .carry/lib && mkdir -p .carry/fi && cp /tmp/slim-fi.tar.gz
# .carry/fi/flashinfer_python-0.2.5.tar.gz && cp .whl-baselines/flashinfer-*-ops-*.tar.xz
# .carry/fi/`; run `CALL_LIMIT=300 bash .carry/call1.sh` carrying `.carry` and
# `.profile/libmstar_kernel_times.so`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "$card"
checkpoint nh056 nemotron_h-0.56b
# The ask's bits, both forms (the bulk form is read once a process); the handoff's bits (its
# modes dropped unless its test passes: a wait that never ends would hold the call).
tests='gpu_linear.asking_l2*:gpu_linear.activation_linear_equals*'
gpu_tests "$tests" 40
(export MSTAR_GEMV_L2_BULK=1 && gpu_tests "$tests" 40)
modes="defaults relsums l2sums l2bulksums handoff handoffl2"
if ! timeout 60 "$bin/mstar_gpu_tests" --gtest_filter='gpu_model_ssd_handoff.*' >"$w/handoff-tests.log" 2>&1; then
  echo "handoff test failed or hung: its modes dropped"
  modes="defaults relsums l2sums l2bulksums"
fi
grep -E "^\[ +(OK|FAILED|PASSED) +\]" "$w/handoff-tests.log" | head -5
if [[ $card == *H200* ]]; then
  nh056_rounds 2 "$modes" "1"
  if (($(left) > 120)); then
    attn_rounds "--rows 1 4 16 64 256 --prefill-rows 1 --rounds 3" "defaults MSTAR_NONE=0"
    attn_table
    ATTN_SHAPES="--rows 1 4 16 64 256 --prefill-rows 1" attn_flashinfer_carried "$here/fi"
  fi
else
  nh056_rounds 3 "$modes" "1"
fi
best=$(fastest_modes 1 "${modes#defaults }")
echo "fastest candidate: $best"
(($(left) > 40)) && timeline_of defaults
(($(left) > 30)) && [[ -n $best ]] && timeline_of "$best"
finish call1
