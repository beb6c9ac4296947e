#!/usr/bin/env bash
# Branch gated-fold's first GPU call (prepared in session 32, not run): the gated-norm fold's tests, then the 0.56B
# batch-1 step with the folds off / on / the gated fold off. Binaries of this branch packed as usual, main's
# mstar-bench-model-gpu beside them as mstar-bench-model-gpu-main for a like-for-like baseline:
#   scripts/pack-device.sh mstar_gpu_tests mstar-bench-model-gpu   (then add main's bench binary to .carry/bin)
set -uo pipefail
cd "$(dirname "$0")/../../.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
timeout 120 "$bin/mstar_gpu_tests" --gtest_filter='gpu_linear.*:gpu_math.*:gpu_model*' >"$out/gpu-tests.log" 2>&1
echo "tests exit $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED " "$out/gpu-tests.log"
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" | tail -1 | cut -c1-100
run() { timeout 25 "$@" --model "$ck/nh056" --batch 1 --prompt-len 32 --new-tokens 128 --repeats 3 --json | grep '^{'; }
[[ -x $bin/mstar-bench-model-gpu-main ]] && run "$bin/mstar-bench-model-gpu-main" | sed 's/^{/{"run": "main", /' >>"$out/b1.jsonl"
MSTAR_FUSED_NORM=0 run "$bin/mstar-bench-model-gpu" | sed 's/^{/{"run": "folds off", /' >>"$out/b1.jsonl"
run "$bin/mstar-bench-model-gpu" | sed 's/^{/{"run": "folds on", /' >>"$out/b1.jsonl"
MSTAR_GATED_NORM_WARP=0 run "$bin/mstar-bench-model-gpu" | sed 's/^{/{"run": "gated fold off", /' >>"$out/b1.jsonl"
rm -rf "$ck"
python3 - "$out/b1.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(r["run"], "step_ms %.4f" % r["step_ms"], "bw %.3f" % r["roofline_decode"]["bandwidth_fraction"], r.get("tokens_digest"))
PY
tar czf "$final/gated-fold.tgz" -C "$out" .
