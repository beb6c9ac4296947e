#!/usr/bin/env bash
# Session 43's second call: what the five changes are worth in the 0.56B Nemotron-H's batch-1 /
# batch-4 step: all, the four folds, each fold left out, the epilogue alone and none, each twice,
# alternated (the second round stops where the time does). Results in $OUT/call2.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== 0.56B batch 1 / 4 ($((SECONDS - t0)) s)"
ab_runs nh056 "all folds noconv noembed noargmax noappend epilogue none" \
  "--batch 1 4 --new-tokens 128 --repeats 3"
finish call2
