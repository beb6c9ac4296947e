#!/usr/bin/env bash
# Session 48's second call. Call1 (an H100) found the batch-1 GEMVs at 78-88% of the copy
# rate in the step, and entries with more pieces in flight a lane (2, 0, 3) 55-75 us a
# step slower than entry 5: not bytes in flight but each block's fixed cost (its launch,
# its norm prologue, its sums) bounds them. New: entries 12-14, entry 5 in a persistent
# grid of 4 / 5 / 2 blocks an SM (a block norms the row once, then takes runs of eight
# features in turn, asking for the next run's first pieces before the run's sums and
# writes; entry 5's bits), for the products the narrow rule leaves wide
# (MSTAR_GEMV_WIDE=12..14) or for all (MSTAR_GEMV_VARIANT=12). The 0.56B at batch 1, two
# rounds of the defaults, the three wide modes, v12, plan2 and direct1 (the wide modes must
# draw the defaults' digest, v12 split0's); the GEMV tests (every entry, every fold: the
# persistent entries must give entry 5's bits) and the fused-merge test (call1's filter
# missed it) in the time left; the GEMV suite hot and cold (call1's cold run failed with an
# invalid argument: is it the suite or the rotation?); the timelines of the defaults and
# the fastest mode.
# Pack as call1.sh says, with call2.sh; `CALL_LIMIT=380 bash .carry/call2.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
modes="defaults wide12 wide13 wide14 v12 plan2 direct1"
nh056_rounds 2 "$modes" 1
best=$(fastest_modes 1 "${modes#defaults }")
echo "fastest other: $best"
echo "== tests ($((SECONDS - t0)) s)"
(($(left) > 60)) && gpu_tests 'gpu_linear*:*gpu_attention_fused_merge*' $(($(left) - 50))
echo "== the GEMV suite ($((SECONDS - t0)) s)"
gemv_suite() {  # TAG ARGS...
  local tag=$1
  shift
  (($(left) > 40)) || return 0
  timeout 60 "$bin/mstar-gpu-bench" --suite gemv "$@" --rounds 3 --json \
    >"$w/gemv-$tag.jsonl" 2>"$w/gemv-$tag.err"
  echo "-- gemv $tag: exit $?"
  tail -2 "$w/gemv-$tag.err"
  gemv_lines "$w/gemv-$tag.jsonl" "$tag" h2048
}
gemv_suite hot --gemv-variants 5 12
gemv_suite cold --gemv-cold --gemv-variants 5 12 13 14
for m in defaults $best; do
  (($(left) > 40)) && timeline_of "$m"
done
finish call2
