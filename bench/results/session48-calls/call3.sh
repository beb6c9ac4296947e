#!/usr/bin/env bash
# Session 48's third call: the new defaults (the plan kernel as the decode graph's first
# node, MSTAR_PLAN_KERNEL=2; one-chunk attention rows written by the split kernel,
# MSTAR_ATTN_SINGLE_DIRECT on) against session 47's (old47), two rounds of the 0.56B at
# batch 1; the GEMV suite at entry 5, hot and cold (--gemv-cold: each call's weight out of
# L2, as in the step; it now skips the forms that do not take a shape); then the model,
# sampling and attention GPU tests under the new defaults in the time left.
# Pack as call1.sh says, with call3.sh; `CALL_LIMIT=300 bash .carry/call3.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
nh056_rounds 2 "defaults old47" 1
echo "== the GEMV suite ($((SECONDS - t0)) s)"
gemv_suite() {  # TAG ARGS...
  local tag=$1
  shift
  (($(left) > 60)) || return 0
  timeout 50 "$bin/mstar-gpu-bench" --suite gemv "$@" --gemv-variants 5 --rounds 3 --json \
    >"$w/gemv-$tag.jsonl" 2>"$w/gemv-$tag.err"
  echo "-- gemv $tag: exit $?"
  grep -v "weight copies" "$w/gemv-$tag.err" | tail -3
  gemv_lines "$w/gemv-$tag.jsonl" "$tag"
}
gemv_suite hot
gemv_suite cold --gemv-cold
echo "== tests ($((SECONDS - t0)) s)"
(($(left) > 40)) && gpu_tests \
  'gpu_model*:gpu_sampling*:*gpu_attention_fused_merge*:gpu_attention_walk*:gpu_attention_split*:-gpu_model_l2_prefetch*' \
  $(($(left) - 25))
grep "^\[ RUN" "$w/tests.log" | tail -1
finish call3
