#!/usr/bin/env bash
# Session 43's seventh call, with little device time left: call6's model tests alone (the
# folds under the new defaults, side downloads), then while time is left the 0.56B at batch 1
# with side downloads against the defaults. Results in $OUT/call7.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
echo "== model tests under the new defaults"
timeout 100 "$bin/mstar_gpu_tests" \
  --gtest_filter='gpu_model_fused_norms.*:gpu_model_side_download.*:gpu_qwen3_5_fused_norms.*:gpu_model_graphs.*:gpu_model_chained.*:gpu_model_fused_qkv.*' \
  >"$w/tests.log" 2>&1
echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$w/tests.log"
if (($(left) > 60)); then
  python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
  for mode in defaults side defaults side; do
    (($(left) > 20)) || break
    f=$w/nh056-$mode-$SECONDS.jsonl
    env "MSTAR_SIDE_DOWNLOAD=$([[ $mode == side ]] && echo 1 || echo 0)" timeout "$(left)" \
      "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 --new-tokens 128 --repeats 3 \
      --prompt-len 32 --json >"$f" 2>"$f.err"
    model_summary "$mode" "$f"
  done
fi
finish call7
