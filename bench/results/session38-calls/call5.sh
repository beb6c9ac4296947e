#!/usr/bin/env bash
# Session 38's fifth call: after the warp-specialised prefill's removal and one prefill_item_of
# for the three prefill kernels: the attention GPU tests (prefill, split, fused merge, walks) and
# the attention bench's prefill kinds at 1 / 8 x 2,048 and decode at 1 / 4 / 64 rows.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
t0=$SECONDS
timeout 200 "$bin/mstar_gpu_tests" --gtest_filter='*attention*:*model*:*qwen3_5*' >"$out/tests.log" 2>&1
echo "tests exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$out/tests.log"
timeout 120 "$bin/mstar-gpu-bench" --suite attention --rows 1 4 64 --prefill-rows 1 8 --graphs --rounds 5 \
  --json >"$out/attention.jsonl"
python3 - "$out/attention.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        r = json.loads(l)
        print(f"{r['case']:40s} {r['us_per_call']:9.2f} us", {k: r[k] for k in ("walk", "merge", "splits", "prefill_kind") if k in r})
PY
echo "done ($((SECONDS - t0)) s)"
