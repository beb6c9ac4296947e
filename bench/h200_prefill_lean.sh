#!/usr/bin/env bash
# The lean-consumer wgmma prefill attention (attention_prefill::wgmma_lean,
# kernels/cuda/attention_prefill_wgmma_lean.cu) against `wgmma` on an H200
# (the device machine), results under $OUT:
#   gpu-tests.log     mstar_gpu_tests --gtest_filter='*attention_prefill*':
#                     every prefill kind (wgmma_lean among them) against the
#                     CPU reference, and wgmma_lean's other page sizes
#   resource-usage.txt  cuobjdump --dump-resource-usage of the wgmma prefill
#                     kernels (registers, spills), if the device has cuobjdump
#   wgmma.jsonl, wgmma_lean.jsonl  mstar-gpu-bench --suite attention --rows 1
#                     --prefill-rows 1 8 --graphs with MSTAR_ATTN_PREFILL set
#                     to each (causal prompts of 2,048 tokens, bf16 pages of
#                     16, 32 q / 8 kv heads, D 128): the default case runs
#                     the variable's kind ("prefill_kind" 1 / 5 says the
#                     environment reached the kernel), then every kind forced
#                     in turn (..._wgmma, ..._wgmma_lean in the case names)
# Then the table: us a call per kind at 1 and 8 prompts, lean / wgmma.
# Needs scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench (.carry).
#   bash bench/h200_prefill_lean.sh
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
if [[ -f $carry/bins.tar.xz && ! -x $bin/mstar-gpu-bench ]]; then
  tar xJf "$carry/bins.tar.xz" -C "$carry"
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/env.txt"
# SKIP_GPU_TESTS=1: the benches only (a call that ran the whole mstar_gpu_tests first).
if [[ ${SKIP_GPU_TESTS:-0} != 1 ]]; then
  echo "== GPU tests (prefill)"
  timeout 240 "$bin/mstar_gpu_tests" --gtest_filter='*attention_prefill*' >"$out/gpu-tests.log" 2>&1
  echo "exit $?" | tee -a "$out/gpu-tests.log"
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|tests ran" "$out/gpu-tests.log" \
    | sort | uniq -c | sort -rn | head -20
fi
if command -v cuobjdump >/dev/null; then
  cuobjdump --dump-resource-usage "$bin/mstar-gpu-bench" 2>&1 \
    | grep -A1 -E "attend_prefill_wgmma" >"$out/resource-usage.txt"
fi
for kind in wgmma wgmma_lean; do
  echo "== bench, MSTAR_ATTN_PREFILL=$kind"
  MSTAR_ATTN_PREFILL=$kind timeout 150 "$bin/mstar-gpu-bench" --suite attention --rows 1 \
    --prefill-rows 1 8 --graphs --rounds 7 --json >"$out/$kind.jsonl"
  echo "exit $?"
done
python3 - "$out/wgmma.jsonl" "$out/wgmma_lean.jsonl" <<'PY'
import json, sys
runs = {}
for path, kind in zip(sys.argv[1:], ("wgmma", "wgmma_lean")):
    runs[kind] = {r["case"]: r for r in map(json.loads, (l for l in open(path) if l.startswith("{")))
                  if r["case"].startswith("prefill_attention")}
print(f"{'us a call (run: MSTAR_ATTN_PREFILL)':44s}{'wgmma':>10s}{'wgmma_lean':>12s}{'lean/wgmma':>12s}")
for rows in (1, 8):
    base = f"prefill_attention_{rows}x2048"
    for label, w, l in ((f"{base} default (env)", base, base),
                        (f"{base} forced, wgmma run", base + "_wgmma", base + "_wgmma_lean"),
                        (f"{base} forced, lean run", base + "_wgmma", base + "_wgmma_lean")):
        src = runs["wgmma_lean"] if "lean run" in label else runs["wgmma"]
        a = (runs["wgmma"] if "env" in label else src).get(w)
        b = (runs["wgmma_lean"] if "env" in label else src).get(l)
        if a and b:
            print(f"{label:44s}{a['us_per_call']:10.1f}{b['us_per_call']:12.1f}"
                  f"{b['us_per_call'] / a['us_per_call']:12.3f}")
for kind, want in (("wgmma", 1), ("wgmma_lean", 5)):
    got = {int(r.get("prefill_kind", -1)) for c, r in runs[kind].items() if c.endswith("x2048")}
    print(f"MSTAR_ATTN_PREFILL={kind}: default case ran kind {sorted(got)} "
          f"({'ok' if got == {want} else 'NOT the variable'})")
PY
