#!/usr/bin/env bash
# The decode step's small kernels (the gated RMS norm and add_rms_norm, each
# form of kernels/cuda/math.hpp's gated_rms_norm_variant / add_rms_norm_variant
# tables) on an H200 (the device machine), in about three minutes; results
# under $OUT:
#   gpu-tests.log  mstar_gpu_tests filtered to these kernels: the later forms
#                  equal form 1 bit for bit (gpu_norm_variants.*), the
#                  kernels against the CPU, the gated and plain norm folds
#   gpu-tests-v2v4.log  the same with the later forms as the defaults
#   small.jsonl    mstar-gpu-bench --suite small, graphs: Nemotron-H 0.56B
#                  ("h2048") and 8B ("h4096") widths at 1 / 64 / 256 rows,
#                  hot, cold and cold-weight operands (us a call, GB/s)
#   small-eager.jsonl  the same launched one by one (no graph)
#   nh056.jsonl    (with mstar-bench-model-gpu packed) the 0.56B
#                  (bench/make_checkpoint.py) decoding at batch 64 under each
#                  MSTAR_GATED_NORM_WARP x MSTAR_ADD_NORM_VARIANT pair, v1/v1
#                  first and last (drift), each run bounded at 30 s
# and prints per case each form's time beside form 1's; per model run, the
# step and its roofline bandwidth fraction.
# Needs scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench
# [mstar-bench-model-gpu] (.carry).
#   bash bench/h200_small.sh
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
filter='gpu_norm_variants.*:gpu_math.*norm*:gpu_linear.*norm*:gpu_model_fused_norms.*'
# SKIP_GPU_TESTS=1: the benches only (a call that ran the whole mstar_gpu_tests first).
if [[ ${SKIP_GPU_TESTS:-0} != 1 ]]; then
  echo "== GPU tests (norm kernels)"
  timeout 240 "$bin/mstar_gpu_tests" --gtest_filter="$filter" >"$out/gpu-tests.log" 2>&1
  echo "exit $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|Failure|differs" "$out/gpu-tests.log" | head -40
  # The folds and the models' norms with the later forms as the defaults:
  # still equal to the separate launches bit for bit.
  echo "== GPU tests, MSTAR_GATED_NORM_WARP=v2 MSTAR_ADD_NORM_VARIANT=v4"
  MSTAR_GATED_NORM_WARP=v2 MSTAR_ADD_NORM_VARIANT=v4 timeout 240 "$bin/mstar_gpu_tests" \
    --gtest_filter="$filter" >"$out/gpu-tests-v2v4.log" 2>&1
  echo "exit $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|Failure|differs" "$out/gpu-tests-v2v4.log" | head -40
fi
summary() {
  python3 - "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
groups = {}
for r in rows:
    key, form = r["case"].rsplit("_f", 1)
    groups.setdefault(key, {})[form] = r
for key, forms in groups.items():
    base = forms.get("1")
    line = " ".join(f"f{f}:{r['us_per_call']:.2f}us/{r['GB_per_s']:.0f}GB/s" for f, r in forms.items())
    best = min(forms.items(), key=lambda fr: fr[1]["us_per_call"])
    gain = f" best f{best[0]} x{base['us_per_call'] / best[1]['us_per_call']:.3f}" if base else ""
    print(f"{key:40s} {line}{gain}")
PY
}
echo "== mstar-gpu-bench --suite small --graphs"
timeout 200 "$bin/mstar-gpu-bench" --suite small --graphs --rounds 5 --json >"$out/small.jsonl"
summary "$out/small.jsonl"
echo "== mstar-gpu-bench --suite small (eager)"
timeout 200 "$bin/mstar-gpu-bench" --suite small --small-rows 64 --rounds 5 --json \
  >"$out/small-eager.jsonl"
summary "$out/small-eager.jsonl"
if [[ -x $bin/mstar-bench-model-gpu ]]; then
  echo "== nemotron_h-0.56b, batch 64"
  ck=$(mktemp -d)
  python3 "$root/bench/make_checkpoint.py" --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null
  for pair in v1/v1 v2/v1 v1/v2 v1/v3 v1/v4 v2/v3 v2/v4 v1/v1; do
    MSTAR_GATED_NORM_WARP=${pair%/*} MSTAR_ADD_NORM_VARIANT=${pair#*/} timeout 30 \
      "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 64 --prompt-len 32 \
      --new-tokens 128 --repeats 3 --json | grep '^{' | sed -e "s#^{#{\"forms\": \"$pair\", #"
  done >"$out/nh056.jsonl"
  python3 - "$out/nh056.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    roof = r.get("roofline_decode", {})
    print(f"gated/add {r['forms']:6s} step {r.get('step_ms', 0):.4f} ms"
          f"  busy {r.get('device_busy_us_median', 0):7.1f} us"
          f"  bw {roof.get('bandwidth_fraction', 0):.4f}"
          f" (busy {roof.get('bandwidth_fraction_device_busy', 0):.4f})"
          f"  digest {r.get('tokens_digest')}")
PY
  rm -rf "$ck"
fi
