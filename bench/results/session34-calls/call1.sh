#!/usr/bin/env bash
# Session 34's first call: main's new GPU tests (tensor-parallel rank processes on CUDA, the GEMV
# weight_static path, the tensor-parallel tests), then branch ssd-scan4 (the SSD state walk): its
# chunked tests and model tests, the SSD bench at MSTAR_SSD_VARIANT 1 (walk, chained) / 2 (old kernels,
# chained) / 0 (old, plain) in the same call, compute-sanitizer memcheck over the chunked test.
# After scripts/pack-branches.sh ssd-scan4:ssd4 decode-attn4:da4; carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
echo "== main: rank processes, linear, tensor parallel"
timeout 110 "$bin/mstar_gpu_tests" --gtest_filter='gpu_rank_processes.*:gpu_linear.*:gpu_tensor_parallel.*' \
  >"$out/main-tests.log" 2>&1; echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED |over socket|over nccl" "$out/main-tests.log" | head -20
echo "== ssd4 tests, walk ($((SECONDS - t0)) s)"
timeout 100 "$bin/mstar_gpu_tests-ssd4" --gtest_filter='gpu_recurrent*:gpu_model*:*nemotron*' \
  >"$out/ssd4-tests.log" 2>&1; echo "exit $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED " "$out/ssd4-tests.log" | head -20
grep -E "^\[ error +\] ssd_chunked" "$out/ssd4-tests.log" | awk '{print $(NF-2)}' | sort -g | tail -1 \
  | sed 's/^/walk: chunked SSD worst normalised error: /'
for v in 2 0; do
  MSTAR_SSD_VARIANT=$v timeout 45 "$bin/mstar_gpu_tests-ssd4" --gtest_filter='gpu_recurrent.ssd_chunked*' \
    >"$out/ssd4-tests-v$v.log" 2>&1; echo "variant $v tests exit $?"
  grep -E "^\[  (PASSED|FAILED) " "$out/ssd4-tests-v$v.log" | head -3
done
echo "== ssd bench ($((SECONDS - t0)) s)"
for v in 1 2 0; do
  MSTAR_SSD_VARIANT=$v timeout 45 "$bin/mstar-gpu-bench-ssd4" --suite ssd --graphs --rounds 5 --json \
    | grep '^{' | sed "s/^{/{\"ssd_variant\": $v, /" >>"$out/ssd4-bench.jsonl"
done
timeout 45 "$bin/mstar-gpu-bench" --suite ssd --graphs --rounds 5 --json | grep '^{' \
  | sed 's/^{/{"ssd_variant": "main", /' >>"$out/ssd4-bench.jsonl"
python3 - "$out/ssd4-bench.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
cases = sorted({r["case"] for r in rows if r["case"].startswith("ssd_scan")})
vs = ["main", 1, 2, 0]
print(f"{'us a call':26s}" + "".join(f"{str(v):>10s}" for v in vs))
for c in cases:
    us = {r["ssd_variant"]: r["us_per_call"] for r in rows if r["case"] == c}
    print(f"{c:26s}" + "".join(f"{us[v]:10.1f}" if v in us else f"{'-':>10s}" for v in vs))
PY
echo "== memcheck, walk ($((SECONDS - t0)) s)"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 110 "$cs" --tool memcheck --error-exitcode 9 "$bin/mstar_gpu_tests-ssd4" \
  --gtest_filter='gpu_recurrent.ssd_chunked*' >"$out/ssd4-memcheck.log" 2>&1; echo "memcheck exit $?"
grep -E "ERROR SUMMARY|^\[  (PASSED|FAILED) " "$out/ssd4-memcheck.log" | head -5
echo "== done ($((SECONDS - t0)) s)"
tar czf "$final/call1.tgz" -C "$out" .
