#!/usr/bin/env bash
# Session 46's second call: call1 found the gated GEMV fold slower than its two launches
# on the H100 (gated0 516.5 us against 521 for the defaults) and the SSD-update fold
# slower still (537). The 0.56B at batch 1 under the defaults, gated0 and fused0 (every
# batch-1 norm its own kernel), alternated; gated0's timeline; batches 16 and 64 with the
# SSD-update fold and without; Qwen3.5 0.5B at batch 1 and 16 with and without side
# downloads (and its runs' digests). Results in $OUT/call2.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
ab_runs nh056 "defaults gated0 fused0" "--batch 1 --new-tokens 128 --repeats 3 --roofline-rounds 1"
echo "== timeline ($((SECONDS - t0)) s)"
(($(left) > 200)) && timeline_of gated0
echo "== batches 16 and 64 ($((SECONDS - t0)) s)"
(($(left) > 200)) && ab_runs nh056 "defaults ssdnorm" "--batch 16 64 --new-tokens 64 --repeats 2 --roofline-rounds 1"
rm -rf "$ck/nh056"
echo "== Qwen3.5 0.5B ($((SECONDS - t0)) s; $(left) s left)"
if (($(left) > 90)); then
  python3 bench/transformers_decode.py make-checkpoint --size qwen3_5-0.5b --out "$ck/qwen" \
    >/dev/null 2>&1
  ab_runs qwen "defaults qside" "--batch 1 16 --new-tokens 128 --repeats 3 --roofline-rounds 1"
fi
finish call2
