#!/usr/bin/env bash
# The chunked SSD scan on an H200 (the device machine), results under $OUT
# (default ./h200-out). Default: the recurrent, model and Nemotron-H GPU
# tests (gpu-tests.log; the chunked test's worst normalised error printed),
# then `mstar-gpu-bench --suite ssd --graphs --rounds 7 --json` (ssd.jsonl,
# us per call printed). `sanitize`: compute-sanitizer memcheck and racecheck
# over the chunked SSD test (sanitizer-*.log). `variants`: the chunked SSD
# test under every MSTAR_SSD_VARIANT (0-6 and unset: gpu-tests-v*.log).
# `variants-bench [V...]`: `--suite ssd --graphs --rounds 5` under each
# of V (default: unset, 1, 3, 4, 5, 6, 0, 2; ssd-v*.jsonl), then a table
# of the scans' us per call.
# Needs scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench (.carry).
#   bash bench/h200_ssd.sh [sanitize | variants | variants-bench [V...]]
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/env.txt"
if [[ ${1:-} == variants ]]; then
  for v in default 0 1 2 3 4 5 6; do
    env=(); [[ $v != default ]] && env=(MSTAR_SSD_VARIANT=$v)
    env "${env[@]}" timeout 80 "$bin/mstar_gpu_tests" --gtest_filter='gpu_recurrent.ssd_chunked*' \
      >"$out/gpu-tests-v$v.log" 2>&1
    echo "variant $v tests exit $?: $(grep -cE '^\[  FAILED ' "$out/gpu-tests-v$v.log") failed," \
      "worst $(grep -E '^\[ error +\] ssd_chunked' "$out/gpu-tests-v$v.log" | awk '{print $(NF-2)}' \
      | sort -g | tail -1)"
  done
  exit 0
fi
if [[ ${1:-} == variants-bench ]]; then
  shift
  names=("$@")
  [[ ${#names[@]} -eq 0 ]] && names=(default 1 3 4 5 6 0 2)
  for v in "${names[@]}"; do
    env=(); [[ $v != default ]] && env=(MSTAR_SSD_VARIANT=$v)
    env "${env[@]}" timeout 80 "$bin/mstar-gpu-bench" --suite ssd --graphs --rounds 5 --json \
      2>/dev/null | grep '^{' >"$out/ssd-v$v.jsonl"
  done
  python3 - "$out" "${names[@]}" <<'PY'
import json, sys
out, rows = sys.argv[1], {}
names = sys.argv[2:]
for v in names:
    for line in open(f"{out}/ssd-v{v}.jsonl"):
        r = json.loads(line)
        if r["case"].startswith("ssd_scan") and not r["case"].endswith("sequential"):
            rows.setdefault(r["case"], {})[v] = r["us_per_call"]
print(f"{'case':24s}" + "".join(f"{'v' + v:>9s}" for v in names))
for case, vs in rows.items():
    print(f"{case:24s}" + "".join(f"{vs.get(v, float('nan')):9.1f}" for v in names))
PY
  exit 0
fi
if [[ ${1:-} == sanitize ]]; then
  san=/usr/local/cuda/bin/compute-sanitizer
  for tool in memcheck racecheck; do
    timeout 270 "$san" --tool "$tool" --error-exitcode 3 "$bin/mstar_gpu_tests" \
      --gtest_filter='gpu_recurrent.ssd_chunked*' >"$out/sanitizer-$tool.log" 2>&1
    echo "$tool exit $?"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED) " "$out/sanitizer-$tool.log"
  done
  exit 0
fi
echo "== GPU tests"
timeout 300 "$bin/mstar_gpu_tests" --gtest_filter='gpu_recurrent*:gpu_model*:*nemotron*' \
  >"$out/gpu-tests.log" 2>&1
echo "exit $?" | tee -a "$out/gpu-tests.log"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|tests ran" "$out/gpu-tests.log"
grep -E "^\[ error +\] ssd_chunked" "$out/gpu-tests.log" | awk '{print $(NF-2)}' | sort -g \
  | tail -1 | sed 's/^/chunked SSD worst normalised error: /'
echo "== mstar-gpu-bench --suite ssd"
timeout 240 "$bin/mstar-gpu-bench" --suite ssd --graphs --rounds 7 --json >"$out/ssd.jsonl"
echo "exit $?"
python3 - "$out/ssd.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r = json.loads(line)
        print(f"{r['case']:36s} {r['us_per_call']:10.1f} us")
PY
