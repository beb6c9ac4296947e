#!/usr/bin/env bash
# Session 46's third call: the gated norm folded into the SSD update as a cluster of a
# norm group's heads (their squares meet in distributed shared memory; call1's fold, by
# the group's last block, was slower). Its tests and compute-sanitizer memcheck and
# racecheck over the kernel test; the 0.56B at batch 1 under the defaults, gated0 and the
# fold at 64 and 72 registers, alternated; batches 16 and 64 with the fold and without;
# the fold's step timeline. Results in $OUT/call3.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
fold='gpu_recurrent.ssd_update_with_the_gated_norm_fold*:gpu_recurrent.ssd_update_gated_norm_fold*:gpu_model_ssd_norm_fold.*'
echo "== the fold's tests ($((SECONDS - t0)) s)"
timeout 120 "$bin/mstar_gpu_tests" --gtest_filter="$fold" >"$w/fold-tests.log" 2>&1
echo "exit $?"
grep -E "^\[ +(OK|FAILED|PASSED) +\]|Failure|Which is|launch [0-9]" "$w/fold-tests.log" | head -20 | cut -c1-160
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  timeout 90 "$cs" --tool $tool "$bin/mstar_gpu_tests" \
    --gtest_filter='gpu_recurrent.ssd_update_with_the_gated_norm_fold*' >"$w/$tool.log" 2>&1
  echo "$tool: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$w/$tool.log" | head -1)"
done
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
ab_runs nh056 "defaults gated0 ssdnorm ssdnorm72" "--batch 1 --new-tokens 128 --repeats 3 --roofline-rounds 1"
echo "== batches 16 and 64 ($((SECONDS - t0)) s)"
(($(left) > 150)) && ab_runs nh056 "gated0 ssdnorm" "--batch 16 64 --new-tokens 64 --repeats 2 --roofline-rounds 1"
echo "== timeline ($((SECONDS - t0)) s)"
(($(left) > 60)) && timeline_of ssdnorm
finish call3
