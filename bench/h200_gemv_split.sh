#!/usr/bin/env bash
# The GEMV's split-K launch shapes (kernels/cuda/gemv_shape.hpp, entries
# 6-11: several warps a feature) and its narrow-product rule on an H200 (the
# device machine), in under two minutes; results under $OUT:
#   gemv.jsonl   mstar-gpu-bench --suite gemv, graphs: each Nemotron-H 0.56B
#                and 8B projection, plain and in the fold the model runs it
#                with, at the default and every table entry (us a call, GB/s)
#   nh056.jsonl  mstar-bench-model-gpu, the 0.56B (bench/make_checkpoint.py)
#                at batch 1: the rule off (MSTAR_GEMV_SPLIT=0: entry 5
#                everywhere), on (narrow products take gemv_split_variant),
#                and each split entry in turn for the narrow products
#                (MSTAR_GEMV_SPLIT=<entry>), off and on again at the end
#                (drift), each run bounded at 25 s
# and prints, per run, the step and its roofline bandwidth fraction; per
# projection, each entry's time beside the default's.
# Needs scripts/pack-device.sh mstar-gpu-bench mstar-bench-model-gpu (.carry).
#   bash bench/h200_gemv_split.sh
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
timeout 60 "$bin/mstar-gpu-bench" --suite gemv --graphs --rounds 3 --json >"$out/gemv.jsonl"
python3 - "$out/gemv.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by_shape = {}
for r in rows:
    form_label = r["case"].rsplit("_v", 1)[0]
    by_shape.setdefault(form_label, []).append(r)
for name, rs in by_shape.items():
    base = next(r for r in rs if r["case"].endswith("_vdefault"))
    line = " ".join(f"{r['case'].rsplit('_v', 1)[1]}:{r['us_per_call']:.2f}" for r in rs)
    print(f"{name:28s} default=entry {int(base['gemv_entry']):2d} {base['us_per_call']:7.2f} us "
          f"{base['GB_per_s']:5.0f} GB/s | {line}")
PY
ck=$(mktemp -d)
python3 "$root/bench/make_checkpoint.py" --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null
for split in 0 on 6 7 8 9 10 11 0 on; do
  MSTAR_GEMV_SPLIT=$split timeout 25 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 \
    --prompt-len 32 --new-tokens 128 --repeats 3 --json | grep '^{' |
    sed -e "s/^{/{\"gemv_split\": \"$split\", /"
done >"$out/nh056.jsonl"
python3 - "$out/nh056.jsonl" <<'PY'
import json, sys
names = {"0": "off (entry 5)", "on": "rule"}
for l in open(sys.argv[1]):
    r = json.loads(l)
    roof = r.get("roofline_decode", {})
    s = r["gemv_split"]
    print(f"MSTAR_GEMV_SPLIT={s:2s} {names.get(s, 'narrow: entry ' + s):16s}"
          f" step {r.get('step_ms', 0):.4f} ms  busy {r.get('device_busy_us_median', 0):6.1f} us"
          f"  bw {roof.get('bandwidth_fraction', 0):.4f}"
          f" (busy {roof.get('bandwidth_fraction_device_busy', 0):.4f})"
          f"  digest {r.get('tokens_digest')}")
PY
rm -rf "$ck"
