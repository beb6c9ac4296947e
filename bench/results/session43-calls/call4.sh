#!/usr/bin/env bash
# Session 43's fourth call: the 8B-shaped Nemotron-H at batch 1 with all five changes and with
# none, each twice, alternated. Results in $OUT/call4.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
python3 bench/make_checkpoint.py --size nemotron_h-8b --out "$ck/nh8b" >/dev/null 2>&1
echo "== 8B batch 1 (checkpoint made in $((SECONDS - t0)) s)"
ab_runs nh8b "all none" "--batch 1 --new-tokens 64 --repeats 2"
finish call4
