#!/usr/bin/env bash
# For the next session, not run in session 46 (no H200 came): this session's defaults on
# an H200. The fold's tests; the 0.56B at batch 1 and 16 under the defaults (the fold on),
# without it, and without it and the gated GEMV fold, three rounds alternated; Qwen3.5
# 0.5B at batch 1 and 16 with side downloads (the default since session 46) and without.
# Pack and carry as the other calls (README.md); `CALL_LIMIT=400 bash .carry/call9-h200.sh`
# with kind nvidia-h200. Results in $OUT/call9.tgz. (Session 47's call1 ran its batch-1
# fold A/B on an H200; its rounds now use device_calls.sh's nh056_rounds.)
set -uo pipefail
source "$(dirname "$0")/common.sh"
fold='gpu_recurrent.ssd_update_with_the_gated_norm_fold*:gpu_recurrent.ssd_update_gated_norm_fold*:gpu_model_ssd_norm_fold.*'
echo "== the fold's tests ($((SECONDS - t0)) s)"
timeout 120 "$bin/mstar_gpu_tests" --gtest_filter="$fold" >"$w/fold-tests.log" 2>&1
echo "exit $?"
grep -E "^\[ +(OK|FAILED|PASSED) +\]|Failure" "$w/fold-tests.log" | head -10 | cut -c1-160
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== the 0.56B ($((SECONDS - t0)) s)"
nh056_rounds 3 "defaults nofold nofoldgated0" "1 16"
rm -rf "$ck/nh056"
echo "== Qwen3.5 0.5B ($((SECONDS - t0)) s; $(left) s left)"
if (($(left) > 90)); then
  python3 bench/transformers_decode.py make-checkpoint --size qwen3_5-0.5b --out "$ck/qwen" \
    >/dev/null 2>&1
  ab_runs qwen "defaults qnoside" "--batch 1 16 --new-tokens 128 --repeats 3"
fi
finish call9
