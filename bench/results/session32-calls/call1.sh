#!/usr/bin/env bash
# Session 32's first call: session 31's check call (call6.sh: every GPU test after the fixes, the new delta-rule decode defaults,
# compute-sanitizer over the staged SSD kernels) and branch cuda-ipc's GPU tests (binaries packed as NAME-ipc).
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
echo "== every GPU test"
timeout 120 "$bin/mstar_gpu_tests" >"$out/gpu-tests.log" 2>&1; echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED " "$out/gpu-tests.log" | head -20
grep -E "^\[ error +\] ssd_chunked" "$out/gpu-tests.log" | awk '{print $(NF-2)}' | sort -g | tail -1 | sed 's/^/ssd chunked worst: /'
echo "== delta decode ($((SECONDS - t0)) s)"
timeout 60 "$bin/mstar-gpu-bench" --delta-decode-variants 4 6 21 24 27 --delta-batches 1 16 64 128 256 --rounds 7 --json --graphs | grep '^{' >"$out/delta-default.jsonl"; echo "exit $?"
if [[ -d .whl ]]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
  timeout 60 python3 bench/fla_delta_rule.py --json --decode-only --f32-only >"$out/fla.jsonl" 2>"$out/fla.err"; echo "fla exit $?"
fi
touch "$out/fla.jsonl"
python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
us = {}
for l in open(d + "/delta-default.jsonl"):
    r = json.loads(l); us.setdefault(int(r["decode_variant"]), {})[int(r["rows"])] = r["us_per_call"]
for l in open(d + "/fla.jsonl"):
    if l.startswith("{"):
        r = json.loads(l)
        if r["mode"].endswith("graph20"):
            us.setdefault(r["mode"], {})[int(r["name"].rsplit("b", 1)[1])] = r["us_per_call"]
bs = sorted({b for v in us.values() for b in v})
print("variant" + "".join(f"{'b'+str(b):>10s}" for b in bs))
for k, v in us.items():
    print(f"{str(k):16s}" + "".join(f"{v[b]:10.2f}" if b in v else f"{'-':>10s}" for b in bs))
PY
san=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck; do  # the staged SSD kernels (not yet sanitized)
  timeout 110 "$san" --tool "$tool" --error-exitcode 3 "$bin/mstar_gpu_tests" \
    --gtest_filter='gpu_recurrent.ssd_chunked*' >"$out/sanitizer-$tool.log" 2>&1
  echo "$tool exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED) " "$out/sanitizer-$tool.log"
done
echo "== cuda-ipc branch ($((SECONDS - t0)) s)"
timeout 60 "$bin/mstar_gpu_tests-ipc" --gtest_filter='gpu_cuda_ipc.*' >"$out/ipc-gpu.log" 2>&1; echo "ipc gpu exit $?"
grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) " "$out/ipc-gpu.log"
timeout 60 "$bin/mstar_transport_tests-ipc" >"$out/ipc-transport.log" 2>&1; echo "ipc transport exit $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED " "$out/ipc-transport.log"
echo "done ($((SECONDS - t0)) s)"
tar czf "$final/call1.tgz" -C "$out" .
