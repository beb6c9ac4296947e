#!/usr/bin/env bash
# Session 43's fifth call (after call3 showed Qwen3.5 slower with its folds): Qwen3.5 0.5B at
# batch 1 with its three folds, each left out, and none; then the 8B-shaped Nemotron-H at batch 1
# with all five changes and with none. Results in $OUT/call5.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
python3 bench/transformers_decode.py make-checkpoint --size qwen3_5-0.5b --out "$ck/qwen" \
  >/dev/null 2>&1
echo "== Qwen3.5 0.5B batch 1 ($((SECONDS - t0)) s)"
ab_runs qwen "folds noconv noembed noargmax none" "--batch 1 --new-tokens 128 --repeats 3"
rm -rf "$ck/qwen"
python3 bench/make_checkpoint.py --size nemotron_h-8b --out "$ck/nh8b" >/dev/null 2>&1
echo "== 8B batch 1 (checkpoint made at $((SECONDS - t0)) s)"
ab_runs nh8b "all none" "--batch 1 --new-tokens 64 --repeats 2"
finish call5
