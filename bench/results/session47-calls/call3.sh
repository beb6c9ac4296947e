#!/usr/bin/env bash
# For the next session (not run in session 47): why the batch-1 GEMVs stream at 2.6-3.1
# TB/s in the H200's step (call1's timeline) where the copy does 4.24 and the plain
# GEMV of the LM head's shape alone ~4.1. Two rounds of the 0.56B at batch 1 under the
# defaults, the norm folds off (every block of a folded GEMV norms the row itself:
# 4,000 blocks of the LM head), the argmax fold off, and entries 2 (eight pieces a
# lane in flight), 3 (four features a warp: a quarter of the blocks) and 0 for every
# product; then the timelines of the defaults and of the two fastest, one step's
# launches listed (in_proj, up, down and the head's exposed time against their bytes).
# Pack as README.md says; `CALL_LIMIT=300 bash .carry/call3.sh` on an H200.
set -uo pipefail
source "$(dirname "$0")/common.sh"
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
modes="defaults fused0 argmax0 v2 v3 v0"
nh056_rounds 2 "$modes" 1
# The two fastest modes other than the defaults, by their median step.
best=$(for m in $modes; do
  [[ $m == defaults ]] && continue
  python3 - "$w" "$m" <<'PY'
import json, pathlib, statistics, sys
steps = []
for f in pathlib.Path(sys.argv[1]).glob(f"nh056-{sys.argv[2]}-*.jsonl"):
    for l in f.read_text().splitlines():
        if l.startswith("{") and "step_ms" in l:
            steps.append(json.loads(l)["step_ms"])
if steps:
    print(f"{statistics.median(steps):.6f} {sys.argv[2]}")
PY
done | sort -n | head -2 | awk '{print $2}')
for m in defaults $best; do
  (($(left) > 40)) && timeline_of "$m"
done
finish call3
