#!/usr/bin/env bash
# Session 48's first call: session 47's call2 and call3 (neither ran) in one.
# Quick tests of session 47's last changes (the fused-merge test with one-chunk rows
# written by the split kernel, the L2 prefetch's tests, the walks' repeat tests with a
# prefetch span); then the 0.56B at batch 1, two rounds alternated, of: the defaults,
# the GEMVs releasing the next kernel once their last weight pieces are asked for
# (chainlast, new: MSTAR_GEMV_CHAIN=last) or at their start (chainloads),
# that write on (direct1), line L2 prefetches (l2lines), and the GEMV candidates of
# call3 (the norm folds off, the argmax fold off, entries 2, 3 and 0 for every
# product, the narrow rule off, the plan kernel in the graph); the GEMV suite with its
# weights out of L2 (--gemv-cold, new), entries 5, 2 and 0 and the chain modes; then the timelines of
# the defaults and of the two fastest other modes (one step's launches listed).
# Pack: PACK_XZ=1 scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench
# mstar-bench-model-gpu; bash bench/profile/build.sh; cp bench/device_calls.sh
# bench/results/session48-calls/{common.sh,call1.sh} .carry/; rm -rf .carry/bin .carry/lib;
# then `CALL_LIMIT=420 bash .carry/call1.sh` (carry .carry and
# .profile/libmstar_kernel_times.so).
set -uo pipefail
source "$(dirname "$0")/common.sh"
echo "== tests ($((SECONDS - t0)) s)"
for tests in 'gpu_attention_fused_merge.*' \
  'gpu_model_l2_prefetch.*:gpu_attention_walk.one_long_row*:gpu_attention_split_variant.one_long_row*'; do
  MSTAR_ATTN_SINGLE_DIRECT=1 gpu_tests "$tests" 60
done
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
modes="defaults chainlast chainloads direct1 l2lines fused0 argmax0 v2 v3 v0 split0 plan2"
nh056_rounds 2 "$modes" 1
best=$(fastest_modes 2 "${modes#defaults }")
echo "fastest others: $best"
# The GEMV alone with its weights out of L2 (rotating copies), as in the step: the
# default entry, 2 and 0, then the default under the chain modes.
echo "== the GEMV, cold ($((SECONDS - t0)) s)"
gemv_cold() {  # TAG VARIANTS... (MSTAR_GEMV_CHAIN from the environment)
  local tag=$1
  shift
  (($(left) > 40)) || return 0
  timeout 90 "$bin/mstar-gpu-bench" --suite gemv --gemv-cold --gemv-variants "$@" --rounds 3 \
    --json >"$w/gemv-cold-$tag.jsonl" 2>"$w/gemv-cold-$tag.err"
  gemv_lines "$w/gemv-cold-$tag.jsonl" "$tag"
}
gemv_cold late -1 2 0
MSTAR_GEMV_CHAIN=last gemv_cold last -1
MSTAR_GEMV_CHAIN=loads gemv_cold loads -1
for m in defaults $best; do
  (($(left) > 40)) && timeline_of "$m"
done
finish call1
