#!/usr/bin/env bash
# Session 47's second call. Call1's bulk L2 prefetches (the TMA unit, 16 KiB a piece)
# held each SSD update ~16 us longer (20.8 us against ~5), so the prefetch is now a
# 128-byte line an instruction (prefetch.global.L2) and off by default
# (MSTAR_L2_PREFETCH=1 turns it on; MSTAR_L2_PREFETCH_BULK=1 the bulk form). Quick
# tests, then the 0.56B at batch 1: defaults (no prefetch, one-chunk rows written by
# the split kernel), that write off, line prefetches at 24 / 8 / 32 MiB, bulk, three
# rounds alternated; timelines of the defaults and the line prefetches. Then, since an
# H200 came, the batch-1 folds and GEMV shapes chosen on H100s, each switched, two rounds.
set -uo pipefail
source "$(dirname "$0")/common.sh"
tests='gpu_model_l2_prefetch.*:gpu_attention_fused_merge.*:gpu_attention_walk.one_long_row*:gpu_attention_split_variant.one_long_row*'
echo "== tests ($((SECONDS - t0)) s)"
timeout 120 "$bin/mstar_gpu_tests" --gtest_filter="$tests" >"$w/tests.log" 2>&1
echo "exit $?"
grep -E "^\[ +(FAILED|PASSED|SKIPPED) +\]|Failure|tests ran" "$w/tests.log" | head -20 | cut -c1-180
grep -c "^\[       OK" "$w/tests.log"
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
nh056_rounds 3 "defaults direct0 l2lines l2lines8 l2lines32 l2bulk" 1
(($(left) > 50)) && timeline_of defaults
(($(left) > 50)) && timeline_of l2lines
echo "== the folds and shapes ($((SECONDS - t0)) s)"
nh056_rounds 2 "defaults argmax0 conv0 embed0 epi0 append0 split0 split7 v0 v2 v7 v9" 1
finish call2
