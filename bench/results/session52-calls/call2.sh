#!/usr/bin/env bash
# Session 52's second call (an H200 wanted: issue 17's goals are the H200's). Tests: the GEMV
# entries (entry 12 removed after call1), the attention walks and merges (the whole-row walk's
# page ids read a refill ahead; the fused merge with one-chunk rows written directly), the
# model's folds. Then decode attention at 4 / 16 / 64 / 256 rows of 2,048 positions against
# FlashInfer 0.2.5 (the modules bench/flashinfer_prebuilt.sh compiled, carried in
# .whl-baselines) with our split rule's knobs swept (MSTAR_ATTN_SPLITS, _SPLIT_MERGE,
# _SPLIT_MIN_CHUNK, _DECODE_WALK), each a process of its own (they are read once), and `pa0`:
# the page ids read at each refill as before (MSTAR_ATTN_ROWS_PAGE_AHEAD=0), and the whole-row
# walk's ring and block (MSTAR_ATTN_ROWS_MMA_STAGES / _STAGE_KIB / _KV: 4 or 2 kv heads a
# block, 4-6 stages; 8 kv heads x 3 stages of 8 positions the default). Then the 0.56B at
# batch 1: defaults, MSTAR_PLAN_INLINE=1 (call1, H100: no gain) and the fused merge at one
# row (MSTAR_ATTN_SPLIT_MERGE=2: steps to 128 positions now run no merge at all), two rounds
# alternated, and the defaults' step timeline; last, Nsight Compute over the whole-row walk
# at 64 rows. Pack as session 51's README says with .whl-baselines carried too;
# `CALL_LIMIT=560 bash .carry/call2.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
# The GEMV entries (entry 12 gone), the attention walks and merges (the whole-row walk's page
# ids read ahead; the fused merge with one-chunk rows written directly), the model's folds.
gpu_tests 'gpu_linear.every_gemv_shape*:gpu_linear.the_one_wave*:gpu_linear.rms_norm_linear_with_the_conv*:gpu_attention.*:every_split_walk/*:every_walk/gpu_attention_walk.decode*:every_walk/gpu_attention_walk.one_long*:every_walk_and_merge/*mma*:gpu_model_fused_norms*' 110

# Decode attention: ours under each setting, then FlashInfer's decode wrappers.
shapes=(--rows 4 16 64 256 --prefill-rows 1 --rounds 5)
attn() {  # TAG [ENV...]
  local tag=$1
  shift
  (($(left) > 250)) || return 0
  env "$@" timeout 60 "$bin/mstar-gpu-bench" --suite attention "${shapes[@]}" --graphs --json \
    2>"$w/attn-$tag.err" | grep '^{' | sed "s/^{/{\"setting\":\"$tag\",/" >>"$w/attn.jsonl"
  echo "attn $tag done ($((SECONDS - t0)) s)"
}
attn defaults MSTAR_NONE=0
attn pa0 MSTAR_ATTN_ROWS_PAGE_AHEAD=0
attn s2 MSTAR_ATTN_SPLITS=2
attn s4 MSTAR_ATTN_SPLITS=4
attn s6 MSTAR_ATTN_SPLITS=6
attn s12 MSTAR_ATTN_SPLITS=12
attn s16 MSTAR_ATTN_SPLITS=16
attn fused MSTAR_ATTN_SPLIT_MERGE=2
attn s4fused MSTAR_ATTN_SPLITS=4 MSTAR_ATTN_SPLIT_MERGE=2
attn c64 MSTAR_ATTN_SPLIT_MIN_CHUNK=64
attn c256 MSTAR_ATTN_SPLIT_MIN_CHUNK=256
attn wmma MSTAR_ATTN_DECODE_WALK=3
attn kv4 MSTAR_ATTN_ROWS_MMA_KV=4
attn kv4s4 MSTAR_ATTN_ROWS_MMA_KV=4 MSTAR_ATTN_ROWS_MMA_STAGES=4
attn kv4s6 MSTAR_ATTN_ROWS_MMA_KV=4 MSTAR_ATTN_ROWS_MMA_STAGES=6
attn kv2k16s6 MSTAR_ATTN_ROWS_MMA_KV=2 MSTAR_ATTN_ROWS_MMA_STAGE_KIB=16 MSTAR_ATTN_ROWS_MMA_STAGES=6
attn s4ring MSTAR_ATTN_ROWS_MMA_STAGES=4
attn pa0b MSTAR_ATTN_ROWS_PAGE_AHEAD=0
attn defaults2 MSTAR_NONE=0
if (($(left) > 180)); then
  whl=$root/.whl-baselines
  src=/tmp/baselines-src
  mkdir -p "$src" /tmp/flashinfer-prebuilt
  tar xzf "$whl"/flashinfer_python-0.2.5.tar.gz -C "$src"
  fi_args=(--flashinfer-src "$src/flashinfer_python-0.2.5" --flashinfer-cache /tmp/flashinfer_build)
  for a in "$whl"/flashinfer-*-ops-*.tar.xz; do
    [[ -f $a ]] || continue
    tar xJf "$a" -C /tmp/flashinfer-prebuilt
    fi_args+=(--flashinfer-prebuilt /tmp/flashinfer-prebuilt/ops)
  done
  timeout 90 python3 bench/baselines_h200.py --json --parts flashinfer "${shapes[@]}" \
    --modes graph "${fi_args[@]}" >"$w/fi.jsonl" 2>"$w/fi.err"
  echo "flashinfer exit $? ($((SECONDS - t0)) s)"
  tail -3 "$w/fi.err"
fi
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 2 "defaults planinline merge2" 1
(($(left) > 110)) && timeline_of defaults
python3 - "$w/attn.jsonl" "$w/fi.jsonl" <<'PY' | tee "$w/attn-table.txt"
import json, sys, collections
best = {}
try:
    for l in open(sys.argv[2]):
        if l.startswith("{"):
            d = json.loads(l)
            if d.get("library") == "flashinfer" and "decode" in d.get("case", "") and "us_per_call" in d:
                r = int(d["rows"])
                best[r] = min(best.get(r, 1e9), d["us_per_call"])
except OSError:
    pass
ours = collections.defaultdict(dict)
for l in open(sys.argv[1]):
    d = json.loads(l)
    c = d.get("case", "")
    if c.startswith("decode_attention_split_b"):
        ours[d["setting"]][int(d["rows"])] = (d["us_per_call"], d.get("splits"), d.get("merge"), d.get("walk"))
rows = [4, 16, 64, 256]
print("FlashInfer best (graph) us: " + " / ".join(f"{best.get(r, float('nan')):.1f}" for r in rows))
for s, v in ours.items():
    cells = []
    for r in rows:
        if r in v:
            us, sp, mg, wk = v[r]
            fi = best.get(r)
            cells.append(f"{us:.1f} (s{(sp or 0):.0f} m{mg} w{(wk or 0):.0f}{'' if fi is None else f' {fi / us:.3f}'})")
        else:
            cells.append("-")
    print(f"{s:10s} " + " | ".join(cells))
PY
# Nsight Compute over the whole-row tensor-core walk at 64 rows (one-pass and split launches,
# without graphs): why it reads ~3.6 TB/s where cuDNN on contiguous KV reads ~4.3.
if (($(left) > 70)); then
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  timeout $(($(left) - 15)) "$ncu" --set full -k regex:rows_mma -c 4 -f -o "$w/ncu-rows64" \
    "$bin/mstar-gpu-bench" --rounds 1 --suite attention --rows 64 --prefill-rows 1 >"$w/ncu-rows64.log" 2>&1
  echo "ncu exit $?"
  "$ncu" --import "$w/ncu-rows64.ncu-rep" --page details >"$w/ncu-rows64.txt" 2>&1
  grep -E '^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Memory Throughput|L2 Hit|Achieved Occupancy|Grid Size' \
    "$w/ncu-rows64.txt" | head -40
fi
finish call2
