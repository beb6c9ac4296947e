#!/usr/bin/env bash
# Session 46's first call: the tests of the gated norm folded into the SSD update
# (MSTAR_SSD_NORM_FOLD=1); the 0.56B at batch 1 under the defaults, with that fold,
# without the gated GEMV fold and with narrow products on entry 7, alternated; the
# step's timeline under the defaults and with the new fold; then, while time is left,
# the GPU tests session 45's last call did not reach (every test but the 114 that
# passed there, listed in passed45.txt, and the 200-second SSD-update sweep, which
# passed there). Results in $OUT/call1.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
fold='gpu_recurrent.ssd_update_with_the_gated_norm_fold*:gpu_model_ssd_norm_fold.*'
echo "== the fold's tests ($((SECONDS - t0)) s)"
timeout 120 "$bin/mstar_gpu_tests" --gtest_filter="$fold" >"$w/fold-tests.log" 2>&1
echo "exit $?"
grep -E "^\[ +(OK|FAILED|PASSED) +\]|Failure|Which is|launch [0-9]" "$w/fold-tests.log" | head -20 | cut -c1-160
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
ab_runs nh056 "defaults ssdnorm gated0 split7" "--batch 1 --new-tokens 128 --repeats 3 --roofline-rounds 1"
echo "== timelines ($((SECONDS - t0)) s)"
for mode in defaults ssdnorm; do
  (($(left) > 60)) && timeline_of $mode
done
rm -rf "$ck/nh056"
skip=$(paste -sd: "$root/.carry/passed45.txt")
echo "== GPU tests not run since session 44 ($((SECONDS - t0)) s; $(left) s left)"
timeout "$(($(left) - 15))" "$bin/mstar_gpu_tests" \
  --gtest_filter="-$skip:$fold:gpu_recurrent.every_ssd_update_variant_matches_outputs_and_state" \
  >"$w/gpu-tests.log" 2>&1
echo "exit $?"
grep -E "^\[==========\]|^\[  PASSED  \]|^\[  FAILED  \]|^\[  SKIPPED \] [0-9]" "$w/gpu-tests.log" | head -20
echo "ok: $(grep -c '^\[       OK \]' "$w/gpu-tests.log")"
grep "^\[       OK \]" "$w/gpu-tests.log" | awk '{print $4}' >"$w/passed.txt"
tail -3 "$w/gpu-tests.log" | cut -c1-160
finish call1
