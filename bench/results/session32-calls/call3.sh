#!/usr/bin/env bash
# Session 32's third call: the SSD update's launch-shape table (branch ssd-update2, merged with entry 0 the default):
# its GPU tests, every entry at 1 / 16 / 64 / 256 rows, mamba-ssm's selective_state_update in the same call, then
# the 0.56B decode at 64 / 256 rows with entry 0 and with the entry that won at 256 rows.
# After scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu and bench/baselines_wheels.sh;
# carry .carry .whl-baselines.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
echo "== gpu_recurrent / linear / model tests"
timeout 100 "$bin/mstar_gpu_tests" --gtest_filter='gpu_recurrent.*:gpu_model*' >"$out/gpu-tests.log" 2>&1
echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED |ssd_update" "$out/gpu-tests.log" | head -20
echo "== ssd update variants ($((SECONDS - t0)) s)"
timeout 120 "$bin/mstar-gpu-bench" --ssd-update-all-variants --ssd-update-batches 1 16 64 256 --graphs --rounds 7 \
  --json | grep '^{' >"$out/ssd-update-variants.jsonl"; echo "exit $?"
echo "== mamba-ssm ($((SECONDS - t0)) s)"
whl=.whl-baselines; src=/tmp/baselines-src; mkdir -p $src
for a in $whl/*.tar.gz; do tar xzf "$a" -C $src; done
python3 -c 'import einops' 2>/dev/null || { python3 -m pip install -q --no-index --no-deps --target /tmp/site $whl/einops-*.whl; export PYTHONPATH=/tmp/site; }
timeout 150 python3 bench/baselines_h200.py --json --parts ssd --mamba-src $src/mamba_ssm-* --prefill-rows 1 \
  --mamba-batches 1 16 64 256 --modes graph >"$out/mamba-ssm.jsonl" 2>"$out/mamba-ssm.err"; echo "exit $?"
best=$(python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
us = {}
for l in open(d + "/ssd-update-variants.jsonl"):
    r = json.loads(l)
    us.setdefault((r["case"].split("_b")[0], int(r["update_variant"])), {})[int(r["rows"]) if "rows" in r else int(r["case"].rsplit("b", 1)[1])] = r["us_per_call"]
ref = {}
for l in open(d + "/mamba-ssm.jsonl"):
    if l.startswith("{"):
        r = json.loads(l)
        if r.get("backend") == "selective_state_update" and "us_per_call" in r:
            ref.setdefault((r["case"].rsplit("_b", 1)[0], r["dtype"]), {})[int(r["case"].rsplit("b", 1)[1])] = r["us_per_call"]
bs = sorted({b for v in us.values() for b in v})
print("variant" + "".join(f"{'b'+str(b):>9s}" for b in bs), file=sys.stderr)
for k in sorted(us, key=str):
    print(f"{str(k):22s}" + "".join(f"{us[k].get(b, float('nan')):9.2f}" for b in bs), file=sys.stderr)
for k in sorted(ref, key=str):
    print(f"{str(k):22s}" + "".join(f"{ref[k].get(b, float('nan')):9.2f}" for b in bs), file=sys.stderr)
cands = [v for (s, v) in us if s.endswith("h64") and v >= 0]
print(min(cands, key=lambda v: us[("ssd_update_h64", v)].get(256, 1e9) if ("ssd_update_h64", v) in us else 1e9))
PY
)
echo "best at 256 rows (h64): $best"
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" | tail -1
for v in 0 "$best"; do
  MSTAR_SSD_UPDATE_VARIANT=$v timeout 80 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 64 256 \
    --prompt-len 32 --new-tokens 128 --repeats 3 --json | grep '^{' | sed "s/^{/{\"update_variant\": $v, /" >>"$out/nh056-decode.jsonl"
done
rm -rf "$ck"
python3 - "$out/nh056-decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l); rd = r.get("roofline_decode", {})
    print("variant", r["update_variant"], "batch", r.get("batch"), "step_ms %.4f" % r.get("step_ms", 0), "bw %.3f" % rd.get("bandwidth_fraction", 0), r.get("tokens_digest"))
PY
echo "done ($((SECONDS - t0)) s)"
tar czf "$final/call3.tgz" -C "$out" .
