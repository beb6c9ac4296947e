#!/usr/bin/env bash
# Session 47's first call: the L2 prefetch of the latency-bound kernels (the SSD update
# asks L2 for out_proj's weights, decode attention for the next layer's first ones;
# MSTAR_L2_PREFETCH, on by default in this build). Its tests, and the GPU tests of
# session 46's last mends (gpu_recurrent.*, the fold's model tests); the 0.56B at batch
# 1 with it (24 MiB a kernel), off, and at 8 / 16 / 32 MiB, three rounds alternated;
# then batch 16 with and without; the timeline with it. Also the mma walk's rows of one
# chunk written by the split kernel (MSTAR_ATTN_SINGLE_DIRECT, on) against the merge
# kernel, and its test (gpu_attention_fused_merge.*). On an H200 also session 46's
# fold A/B (call9-h200.sh's). Results in $OUT/call1.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
tests='gpu_model_l2_prefetch.*:gpu_recurrent.*:gpu_model_ssd_norm_fold.*:gpu_attention_walk.one_long_row*:gpu_attention_split_variant.one_long_row*:gpu_attention_fused_merge.*:gpu_attention_split_variant.split_decode*'
echo "== tests ($((SECONDS - t0)) s)"
timeout 240 "$bin/mstar_gpu_tests" --gtest_filter="$tests" >"$w/tests.log" 2>&1
echo "exit $?"
grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) +\]|Failure|tests ran" "$w/tests.log" | grep -v "^\[       OK" | head -20 | cut -c1-180
grep -c "^\[       OK" "$w/tests.log"
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
nh056_rounds 3 "defaults l2off direct0 l2mib8 l2mib16 l2mib32" 1
echo "== batch 16 ($((SECONDS - t0)) s)"
nh056_rounds 2 "defaults l2off" 16
(($(left) > 60)) && timeline_of defaults
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && (($(left) > 60)); then
  echo "== H200: session 46's fold ($((SECONDS - t0)) s)"
  nh056_rounds 2 "nofold nofoldgated0" 1
fi
finish call1
