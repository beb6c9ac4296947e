#!/usr/bin/env bash
# Session 43's third call: the 8B-shaped Nemotron-H at batch 1 with all four changes and with
# none, then Qwen3.5 0.5B at batch 1 with its three folds (lookup, delta-net conv, argmax) and
# with none, each twice, alternated. Results in $OUT/call3.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
echo "== 8B batch 1"
python3 bench/make_checkpoint.py --size nemotron_h-8b --out "$ck/nh8b" >/dev/null 2>&1
echo "checkpoint made ($((SECONDS - t0)) s)"
ab_runs nh8b "all none" "--batch 1 --new-tokens 64 --repeats 2"
rm -rf "$ck/nh8b"
echo "== Qwen3.5 0.5B batch 1 ($((SECONDS - t0)) s; $(left) s left)"
if (($(left) > 100)); then
  python3 bench/transformers_decode.py make-checkpoint --size qwen3_5-0.5b --out "$ck/qwen" \
    >/dev/null 2>&1
  ab_runs qwen "folds none" "--batch 1 --new-tokens 128 --repeats 3"
fi
finish call3
