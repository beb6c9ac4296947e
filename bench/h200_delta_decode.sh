#!/usr/bin/env bash
# The gated delta rule's decode launch shapes on an H200 (the device machine),
# results under $OUT: the rule's GPU tests (gpu-tests.log: every decode
# variant against the CPU reference among them), then every decode variant
# of kernels/cuda/delta_rule.cu's table (0..gated_delta_decode_variants - 1,
# or those given) after the default choice, at 1..256 rows, timed as CUDA
# graphs of back-to-back calls (`mstar-gpu-bench --graphs`: the device's
# time, as in a captured decode step) in one process (`--delta-decode-variants`)
# into decode-sweep.jsonl, summarised with each variant's time over the
# default's; the default also launched one by one; then
# flash-linear-attention's decode kernels on f32 inputs (bench/fla_delta_rule.py,
# its wheels under .whl/) eager, one call a graph and 20 calls a graph,
# writing a fresh state or in place (fla.jsonl); NO_FLA=1 skips them.
# Needs scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench (.carry).
#   bash bench/h200_delta_decode.sh [VARIANT...]
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/env.txt"
echo "== GPU tests"
timeout 240 "$bin/mstar_gpu_tests" --gtest_filter='gpu_delta_rule*:*qwen3_5*' >"$out/gpu-tests.log" 2>&1
echo "exit $?" | tee -a "$out/gpu-tests.log"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|tests ran|worst output" "$out/gpu-tests.log"
batches=(1 4 16 32 64 128 256)
which=(--delta-decode-all-variants)
if (($#)); then which=(--delta-decode-variants "$@"); fi
sweep=$out/decode-sweep.jsonl
echo "== decode variants: ${*:-all} (graphs)"
timeout 420 "$bin/mstar-gpu-bench" "${which[@]}" --delta-batches "${batches[@]}" --rounds 7 \
  --json --graphs | grep '^{' >"$sweep"
"$bin/mstar-gpu-bench" --delta-decode-only --delta-batches "${batches[@]}" --rounds 7 --json |
  grep '^{' | sed -e 's/^{/{"decode_variant": -1, "eager": 1, /' >>"$sweep"
python3 - "$sweep" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
batches = sorted({int(r["rows"]) for r in rows})
key = lambda r: (int(r["decode_variant"]), "eager" if r.get("eager") else "graph")
us = {(key(r), int(r["rows"])): r["us_per_call"] for r in rows}
default = {b: us.get(((-1, "graph"), b)) for b in batches}
print("us per call (variant / default)")
print("variant timing " + " ".join(f"{'b' + str(b):>16s}" for b in batches))
for k in dict.fromkeys(key(r) for r in rows):
    cells = []
    for b in batches:
        t = us.get((k, b))
        cells.append(f"{t:8.2f} ({t / default[b]:5.3f})" if t and default[b] else " " * 16)
    print(f"{k[0]:>7d} {k[1]:6s} " + " ".join(cells))
PY
if [[ -n ${NO_FLA:-} ]]; then exit 0; fi
echo "== fla"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$root"/.whl/*.whl && export PYTHONPATH=/tmp/site
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' \
  | tee -a "$out/env.txt"
timeout 240 python3 "$root/bench/fla_delta_rule.py" --json --decode-only --f32-only >"$out/fla.jsonl"
python3 - "$out/fla.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        r = json.loads(l)
        print(f"{r['name']:28s} {r['dtype']:9s} {r['mode']:16s} {r['us_per_call']:9.2f} us")
PY
