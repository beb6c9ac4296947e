#!/usr/bin/env bash
# Session 33's fourth call (the defaults after the third: GEMVs chained with a late release, argmax clusters
# below 96 rows): the sampling tests, argmax at 64-128 rows, the 0.56B decode at 1 / 64 / 256 rows (sync and
# overlap schedules), the 8B shape at 1 / 64 rows. Files written to $OUT as they come (a short budget).
# After scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu; carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
t0=$SECONDS
timeout 40 "$bin/mstar_gpu_tests" --gtest_filter='gpu_sampling*' >"$out/gpu-tests.log" 2>&1
echo "tests exit $?"; grep -E "^\[  (PASSED|FAILED) " "$out/gpu-tests.log"
timeout 30 "$bin/mstar-gpu-bench" --suite argmax --argmax-rows 64 80 95 96 127 128 --json >"$out/argmax.jsonl" 2>&1
grep -o '"case":"[a-z_0-9]*"\|"us_per_call":[0-9.]*' "$out/argmax.jsonl" | paste - - | tr '\n' ' '; echo
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
bm() { timeout 60 "$bin/mstar-bench-model-gpu" "$@" --json 2>/dev/null | grep '^{'; }
bm --model "$ck/nh056" --batch 1 64 256 --prompt-len 32 --new-tokens 128 --repeats 3 >"$out/nh056-sync.jsonl"
bm --model "$ck/nh056" --batch 1 64 256 --prompt-len 32 --new-tokens 128 --repeats 3 --schedule overlap \
  >"$out/nh056-overlap.jsonl"
echo "0.56B done ($((SECONDS - t0)) s)"
python3 bench/make_checkpoint.py --size nemotron_h-8b --out "$ck/nh8b" >/dev/null 2>&1
bm --model "$ck/nh8b" --batch 1 64 --prompt-len 32 --new-tokens 64 --repeats 2 >"$out/nh8b.jsonl"
rm -rf "$ck"
python3 - "$out"/nh056-sync.jsonl "$out"/nh056-overlap.jsonl "$out"/nh8b.jsonl <<'PY'
import json, sys
for f in sys.argv[1:]:
    for l in open(f):
        r = json.loads(l)
        rd = r.get("roofline_decode", {})
        print(f.rsplit("/", 1)[1], r["schedule"], "b", r["batch"], "step_ms %.4f" % r["step_ms"],
              "bw %.3f" % rd.get("bandwidth_fraction", 0), r.get("chained_launches"), r["tokens_digest"])
PY
echo "done ($((SECONDS - t0)) s)"
