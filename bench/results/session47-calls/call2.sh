#!/usr/bin/env bash
# Session 47's second call. Call1's bulk L2 prefetches (the TMA unit, 16 KiB a piece)
# held each SSD update ~16 us longer (20.8 us against ~5), so the prefetch is now a
# 128-byte line an instruction (prefetch.global.L2) and off by default
# (MSTAR_L2_PREFETCH=1 turns it on; MSTAR_L2_PREFETCH_BULK=1 the bulk form); the
# one-chunk rows written by the split kernel are opt-in (MSTAR_ATTN_SINGLE_DIRECT=1)
# until measured. Quick tests (with that write on), then the 0.56B at batch 1: defaults,
# that write on, line prefetches at 24 MiB, two rounds alternated.
# Then, on an H200, a few of the batch-1 choices made on H100s, each switched, one round.
set -uo pipefail
source "$(dirname "$0")/common.sh"
echo "== tests ($((SECONDS - t0)) s)"
for tests in 'gpu_attention_fused_merge.*' \
  'gpu_model_l2_prefetch.*:gpu_attention_walk.one_long_row*:gpu_attention_split_variant.one_long_row*'; do
  MSTAR_ATTN_SINGLE_DIRECT=1 timeout 50 "$bin/mstar_gpu_tests" --gtest_filter="$tests" \
    >>"$w/tests.log" 2>&1
  echo "exit $? ($((SECONDS - t0)) s)"
done
grep -E "^\[ +(FAILED|PASSED|SKIPPED) +\]|Failure|tests ran" "$w/tests.log" | head -20 | cut -c1-180
grep -c "^\[       OK" "$w/tests.log"
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
nh056_rounds 2 "defaults direct1 l2lines" 1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  echo "== the folds and shapes ($((SECONDS - t0)) s)"
  nh056_rounds 1 "argmax0 split0 v2 plan2" 1
else  # an H100, where the folds were measured: a third round instead
  nh056_rounds 1 "defaults direct1 l2lines" 1
fi
finish call2
