# shellcheck shell=bash
# Sourced by a session's device-call scripts (bench/results/sessionNN-calls/common.sh,
# run from .carry/ on the device machine): defines `envs_of MODE` (the environment
# switches of an A/B mode) unless the session's common.sh did, unpacks the carried
# binaries, sources bench/device_env.sh, and defines the call's clock (`left`), the
# alternated bench runs (`ab_runs`, `nh056_rounds`, `fastest_modes`), the 0.56B's step
# timeline (`timeline_of`) and the packing of the results (`finish`). $w is the call's scratch
# folder, tarred into $OUT at the end; $ck holds the checkpoints the call makes.
# The A/B modes of the 0.56B's batch-1 runs, unless the session's common.sh defines its own
# `envs_of` first: each mode's environment switches.
if ! declare -F envs_of >/dev/null; then
  envs_of() {  # MODE
    case $1 in
      defaults) echo "MSTAR_NONE=0" ;;
      # Sessions 47-48's L2 prefetch by the SSD update and attention (removed after session
      # 48's call1: both forms lost):
      l2off) echo "MSTAR_L2_PREFETCH=0" ;;        # no L2 prefetch by the latency-bound kernels
      l2mib8) echo "MSTAR_L2_PREFETCH_MIB=8" ;;   # the prefetch's cap (session 47's call1: on, bulk)
      l2mib16) echo "MSTAR_L2_PREFETCH_MIB=16" ;;
      l2mib32) echo "MSTAR_L2_PREFETCH_MIB=32" ;;
      l2lines) echo "MSTAR_L2_PREFETCH=1" ;;      # on (off by default): a line an instruction
      l2lines8) echo "MSTAR_L2_PREFETCH=1 MSTAR_L2_PREFETCH_MIB=8" ;;
      l2lines32) echo "MSTAR_L2_PREFETCH=1 MSTAR_L2_PREFETCH_MIB=32" ;;
      l2bulk) echo "MSTAR_L2_PREFETCH=1 MSTAR_L2_PREFETCH_BULK=1" ;;  # call1's bulk prefetches
      direct0) echo "MSTAR_ATTN_SINGLE_DIRECT=0" ;;  # one-chunk rows through the merge kernel
      direct1) echo "MSTAR_ATTN_SINGLE_DIRECT=1" ;;  # the split kernel writes them (default since session 48)
      argmax0) echo "MSTAR_ARGMAX_FOLD=0" ;;      # the batch-1 folds, each off (measured on H100s)
      conv0) echo "MSTAR_CONV_FOLD=0" ;;
      embed0) echo "MSTAR_EMBED_FOLD=0" ;;
      epi0) echo "MSTAR_MLP_EPILOGUE=0" ;;
      append0) echo "MSTAR_KV_APPEND_FOLD=0" ;;
      split0) echo "MSTAR_GEMV_SPLIT=0" ;;        # the GEMV's narrow rule off (entry 5 everywhere)
      split7) echo "MSTAR_GEMV_SPLIT=7" ;;        # narrow products: entry 7 (eight pieces a lane)
      v0) echo "MSTAR_GEMV_VARIANT=0" ;;          # every product in one GEMV entry
      v2) echo "MSTAR_GEMV_VARIANT=2" ;;
      v7) echo "MSTAR_GEMV_VARIANT=7" ;;
      v9) echo "MSTAR_GEMV_VARIANT=9" ;;
      v3) echo "MSTAR_GEMV_VARIANT=3" ;;          # four features a warp: a quarter of entry 5's blocks
      fused0) echo "MSTAR_FUSED_NORM=0" ;;        # no norm in the GEMVs: add_rms_norm kernels
      chainlast) echo "MSTAR_GEMV_CHAIN=last" ;;  # session 48: the next kernel released at the last loads
      chainloads) echo "MSTAR_GEMV_CHAIN=loads" ;;  # released at the GEMV's start
      chainwave) echo "MSTAR_GEMV_CHAIN=wave" ;;  # session 49: one-wave GEMVs release at their start (default since)
      chainlate) echo "MSTAR_GEMV_CHAIN=late" ;;  # every GEMV releases after its dots (the default until session 49)
      # Session 49's `tail` (removed after session 50's call1: 431 us against wave's 413 on the H200):
      chaintail) echo "MSTAR_GEMV_CHAIN=tail" ;;  # as wave, and a larger grid's last wave released at its start
      # Session 49's staged GEMV (removed after its call3: +37-45 us a step; commit 1e8929b):
      stage1) echo "MSTAR_GEMV_STAGE=1" ;;        # plain one-row products that fit stage their weights in shared memory (bulk copies)
      stage2) echo "MSTAR_GEMV_STAGE=2" ;;        # staged by every thread's async copies
      stage2wave) echo "MSTAR_GEMV_STAGE=2 MSTAR_GEMV_CHAIN=wave" ;;
      # Session 49's shared-memory carveout (removed after its call2: +12-14 us a step on an H100):
      carve100) echo "MSTAR_SMEM_CARVEOUT=100" ;;  # every chained kernel prefers the most shared memory
      stage1carve100) echo "MSTAR_GEMV_STAGE=1 MSTAR_SMEM_CARVEOUT=100" ;;
      stage2carve100) echo "MSTAR_GEMV_STAGE=2 MSTAR_SMEM_CARVEOUT=100" ;;
      # Session 50's one-wave entry pick (MSTAR_GEMV_WAVE_PICK: entries tried in order where a
      # GEMV's rule-picked grid is more than one wave):
      wpicknone) echo "MSTAR_GEMV_WAVE_PICK=none" ;;  # off (on, entry 4, at K <= 2,048 since call2)
      wpick) echo "MSTAR_GEMV_WAVE_PICK=1,0,4,3" ;;
      wpick4) echo "MSTAR_GEMV_WAVE_PICK=4" ;;
      wpick1) echo "MSTAR_GEMV_WAVE_PICK=1" ;;
      wpick3) echo "MSTAR_GEMV_WAVE_PICK=3" ;;
      # Entry 12 (session 50's lost 80 us in session 51's call1, its conv form spilling; with
      # the conv fold's one channel a lane 17 us in session 52's call1; removed since):
      wpick12) echo "MSTAR_GEMV_WAVE_PICK=12" ;;     # entry 4 at three blocks an SM: MLP up and in_proj
      wpick412) echo "MSTAR_GEMV_WAVE_PICK=4,12" ;;  # MLP up in entry 4, in_proj in 12
      ssdrel) echo "MSTAR_SSD_RELEASE=loads" ;;  # the SSD update releases the next kernel once its state loads are issued (default since session 51)
      ssdstart) echo "MSTAR_SSD_RELEASE=start" ;;  # ... at its start (the default until session 51)
      # Session 51's held RMS prologue (removed after its call4: Qwen3.5 0.5B lost 24 us on an H200):
      rmsheld0) echo "MSTAR_GEMV_RMS_HELD=0" ;;  # the RMS prologue's two round trips (the default until session 51)
      convpf0) echo "MSTAR_GEMV_CONV_PREFETCH=0" ;;  # the held prologue asks L1 for no conv taps and windows
      planinline) echo "MSTAR_PLAN_INLINE=1" ;;  # a small plan rides in the plan kernel's parameters (session 51, unmeasured)
      block1) echo "MSTAR_ATTN_SPLIT_MERGE=1" ;;  # the block merge kernel (the mma walk's default at one row until session 52)
      # Session 53's attention switches (session 55's call1: copies first became the mma
      # walk's only order, the last-warp hand-off was taken out):
      copies1) echo "MSTAR_ATTN_MMA_COPIES_FIRST=1" ;;  # the mma walk: page ids and first copies before q
      lastwarp1) echo "MSTAR_ATTN_ROWS_MMA_LAST_WARP=1" ;;  # rows_mma: stages handed back by counts
      merge2) echo "MSTAR_ATTN_SPLIT_MERGE=2" ;;  # the split kernel's last block merges (fused; default at 2+ rows of the mma walk; one-chunk rows written directly under it since session 52)
      chunk32merge2) echo "MSTAR_ATTN_SPLIT_MIN_CHUNK=32 MSTAR_ATTN_SPLIT_MERGE=2" ;;  # short chunks, fused merge
      chunk64merge2) echo "MSTAR_ATTN_SPLIT_MIN_CHUNK=64 MSTAR_ATTN_SPLIT_MERGE=2" ;;
      # Session 48's persistent GEMV entries (12-14; removed after its call2, commit 65bc061):
      wide12) echo "MSTAR_GEMV_WIDE=12" ;;        # wide products in entry 5's persistent grid, 4 blocks an SM
      wide13) echo "MSTAR_GEMV_WIDE=13" ;;        # 5 blocks an SM
      wide14) echo "MSTAR_GEMV_WIDE=14" ;;        # 2 blocks an SM
      v12) echo "MSTAR_GEMV_VARIANT=12" ;;        # every product in entry 12 (narrow ones too)
      old47) echo "MSTAR_PLAN_KERNEL=0 MSTAR_ATTN_SINGLE_DIRECT=0" ;;  # session 47's defaults
      plan0) echo "MSTAR_PLAN_KERNEL=0" ;;       # the upload and the gather (plan kernel in the graph: default since session 48)
      plan2) echo "MSTAR_PLAN_KERNEL=2" ;;       # the plan kernel as the decode graph's first node (default since session 48)
      early) echo "MSTAR_SSD_EARLY=1" ;;          # the update reads slots and states before its wait
      nofold) echo "MSTAR_SSD_NORM_FOLD=0" ;;     # the gated norm outside the SSD update
      nofoldgated0) echo "MSTAR_SSD_NORM_FOLD=0 MSTAR_GATED_FOLD=0" ;;
      qnoside) echo "MSTAR_SIDE_DOWNLOAD=0" ;;
      # Session 56's bounded L2 prefetch by the GEMV itself (MSTAR_GEMV_PREFETCH_GROUPS: the
      # load groups past its first that a chained GEMV asks L2 for before its wait, under wave;
      # removed after its call1: +57-69 us a step on an H100, commit 0136408):
      pf2) echo "MSTAR_GEMV_PREFETCH_GROUPS=2" ;;
      pf4) echo "MSTAR_GEMV_PREFETCH_GROUPS=4" ;;
      # Session 56: the LM head's GEMV entry where it draws the argmax (MSTAR_GEMV_HEAD_VARIANT;
      # entries 0-5 the same bits; removed after call1: entry 1 within noise, 3 +6 us, H100).
      head1) echo "MSTAR_GEMV_HEAD_VARIANT=1" ;;  # two features a warp, four pieces: half the blocks
      head3) echo "MSTAR_GEMV_HEAD_VARIANT=3" ;;  # four features a warp, four pieces: a quarter
      # Session 56's two stages a warp (removed after session 57's call1: lost at 1 / 4 / 8 rows):
      stages2) echo "MSTAR_ATTN_MMA_STAGES=2" ;;  # the mma walk on two stages (3 blocks an SM at D 128)
      bulk1) echo "MSTAR_ATTN_MMA_BULK=1" ;;  # session 57: the mma walk's tiles by bulk copies
      bulk0) echo "MSTAR_ATTN_MMA_BULK=0" ;;  # session 58: cp.async everywhere (by grid is the default)
      # Session 59's state kept in L2 (MSTAR_SSD_STATE_L2: the batch-1 SSD update's state loads
      # and stores L2 evict-last; removed after session 60's call1: +3 us a step, H100):
      statel2) echo "MSTAR_SSD_STATE_L2=1" ;;
      # Session 60: one-row GEMVs after the latency-bound kernels ask L2 for their whole weight
      # before their chained wait (MSTAR_GEMV_L2_AFTER): out_proj after the SSD update, o_proj
      # after attention, both (removed after its call2: +22 us a step, H100; commit aaad616).
      l2ssd) echo "MSTAR_GEMV_L2_AFTER=ssd" ;;
      l2attn) echo "MSTAR_GEMV_L2_AFTER=attn" ;;
      l2both) echo "MSTAR_GEMV_L2_AFTER=both" ;;
      # Session 60: the SSD update releases the out_proj once its sums are done, or at its end.
      relsums) echo "MSTAR_SSD_RELEASE=sums" ;;
      relend) echo "MSTAR_SSD_RELEASE=end" ;;
      # Session 60: the out_proj after the SSD update on entry 7 (its 4,096-wide rows whole in
      # flight before the wait; split 2 as the rule's entry 6, so the same bits), alone and with
      # the update releasing it once its sums are done (MSTAR_OUT_PROJ_VARIANT; removed after
      # session 61's call1: +16 / +21 us a step, H100).
      op7) echo "MSTAR_OUT_PROJ_VARIANT=7" ;;
      op7sums) echo "MSTAR_OUT_PROJ_VARIANT=7 MSTAR_SSD_RELEASE=sums" ;;
      # Session 61: the fold's new state stored between its arrival on the norm exchange's
      # cluster barrier and its wait (held in registers through the sums; MSTAR_SSD_FOLD_STORES,
      # removed after session 61's call1: +1 us a step, H100, commit fb7bf08).
      foldlate) echo "MSTAR_SSD_FOLD_STORES=late" ;;
      # Session 62: the out_proj's L2 ask (session 60's l2ssd, restored) with the update
      # releasing it once its sums are done, a line a lane or (`bulk`, MSTAR_GEMV_L2_BULK=1) one
      # bulk prefetch a row; the out_proj waiting for the update's blocks to count themselves,
      # not for its grid (MSTAR_SSD_HANDOFF=1). Removed after session 62's call1 (H100: +29 /
      # +29 / +5 us a step; the code in commit 13b8602).
      l2sums) echo "MSTAR_GEMV_L2_AFTER=ssd MSTAR_SSD_RELEASE=sums" ;;
      l2bulksums) echo "MSTAR_GEMV_L2_AFTER=ssd MSTAR_SSD_RELEASE=sums MSTAR_GEMV_L2_BULK=1" ;;
      handoff) echo "MSTAR_SSD_HANDOFF=1" ;;
      handoffl2) echo "MSTAR_SSD_HANDOFF=1 MSTAR_GEMV_L2_AFTER=ssd MSTAR_SSD_RELEASE=sums MSTAR_GEMV_L2_BULK=1" ;;
      *) echo "envs_of: no mode $1" >&2 ;;
    esac
  }
fi

# The fastest of MODES by the median step of their nh056_rounds runs, fastest first.
fastest_modes() {  # COUNT "MODES"
  local m
  for m in $2; do
    python3 - "$w" "$m" <<'PY'
import json, pathlib, statistics, sys
steps = []
for f in pathlib.Path(sys.argv[1]).glob(f"nh056-{sys.argv[2]}-*.jsonl"):
    for l in f.read_text().splitlines():
        if l.startswith("{") and "step_ms" in l:
            steps.append(json.loads(l)["step_ms"])
if steps:
    print(f"{statistics.median(steps):.6f} {sys.argv[2]}")
PY
  done | sort -n | head -"$1" | awk '{print $2}'
}

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
if [[ ! -d .carry/bin ]]; then (cd .carry && tar xJf bins.tar.xz); fi
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
w=$(mktemp -d)
ck=$(mktemp -d)
t0=$SECONDS
limit=${CALL_LIMIT:-540}
left() { echo $((limit - (SECONDS - t0))); }

# Makes checkpoint $ck/NAME of SIZE (bench/make_checkpoint.py's Nemotron-H sizes,
# bench/transformers_decode.py's qwen3_5 ones) unless it is there.
checkpoint() {  # NAME SIZE
  [[ -d $ck/$1 ]] && return 0
  case $2 in
    qwen3_5-*) python3 bench/transformers_decode.py make-checkpoint --size "$2" --out "$ck/$1" ;;
    *) python3 bench/make_checkpoint.py --size "$2" --out "$ck/$1" ;;
  esac >/dev/null 2>&1
}

# Each mode twice, alternated, while time is left: mstar-bench-model-gpu on
# checkpoint $ck/NAME, one summary line a run (model_summary).
ab_runs() {  # NAME "MODE..." "BENCH ARGS..."
  local name=$1 modes=$2 args=$3 rep mode f
  for rep in 1 2; do
    for mode in $modes; do
      (($(left) > 30)) || return 0
      f=$w/$name-$mode-$rep.jsonl
      # shellcheck disable=SC2046,SC2086  # the mode's switches and the args split on purpose
      env $(envs_of $mode) timeout "$(left)" "$bin/mstar-bench-model-gpu" --model "$ck/$name" \
        $args --prompt-len 32 --json >"$f" 2>"$f.err"
      model_summary "$mode" "$f"
    done
  done
}

# The batch-1 step timeline of checkpoint $ck/NAME (default nh056, the 0.56B) under MODE
# (CUPTI through the carried .profile/libmstar_kernel_times.so), summarised by
# bench/profile/timeline.py, one step's launches listed.
# The last TIMELINE_N (4,000) kernels: the bench's prefill runs come after its decode steps,
# and 600 (the library's default) held under two of Qwen3.5's decode steps (session 52).
timeline_of() {  # MODE [NAME]
  local name=${2:-nh056}
  local n=$name-decode1-$1
  # shellcheck disable=SC2046  # the mode's switches split on purpose
  env $(envs_of "$1") "LD_LIBRARY_PATH=$(cupti_lib_dir):$LD_LIBRARY_PATH" \
    "CUDA_INJECTION64_PATH=$root/.profile/libmstar_kernel_times.so" "MSTAR_KERNEL_PROFILE=$w/$n.txt" \
    "MSTAR_KERNEL_TIMELINE=$w/$n.timeline.jsonl" "MSTAR_KERNEL_TIMELINE_N=${TIMELINE_N:-4000}" \
    timeout 90 "$bin/mstar-bench-model-gpu" \
    --model "$ck/$name" --batch 1 --prompt-len 32 --new-tokens 256 --repeats 2 --json >"$w/$n.log" 2>&1
  echo "-- timeline $n (exit $?)"
  # A step starts at its loopback kernel, or (MSTAR_PLAN_KERNEL=2) at the plan kernel that
  # leads the decode graph.
  local start=loopback_kernel
  grep -q '"upload_plan_kernel' "$w/$n.timeline.jsonl" && start=upload_plan_kernel
  python3 bench/profile/timeline.py "$w/$n.timeline.jsonl" --step-start $start \
    >"$w/$n.steps.txt" 2>&1
  python3 bench/profile/timeline.py "$w/$n.timeline.jsonl" --step-start $start \
    --launches >"$w/$n.launches.txt" 2>&1
  head -16 "$w/$n.steps.txt" | cut -c1-120
}

# Rounds of the 0.56B at batch 1 (and BATCHES), MODES alternated, one summary line a run.
nh056_rounds() {  # ROUNDS "MODES" "BATCHES"
  local rep mode f
  for rep in $(seq 1 "$1"); do
    for mode in $2; do
      (($(left) > 25)) || return 0
      f=$w/nh056-$mode-$rep.jsonl
      # shellcheck disable=SC2046,SC2086  # the switches and batches split on purpose
      env $(envs_of $mode) timeout "$(left)" "$bin/mstar-bench-model-gpu" --model "$ck/nh056" \
        --batch $3 --new-tokens 128 --repeats 3 --prompt-len 32 --json >"$f" 2>"$f.err"
      model_summary "$mode" "$f"
    done
  done
}

# mstar_gpu_tests' tests matching FILTER for at most SECONDS, appended to $w/tests.log;
# the exit status, the summary lines so far and the count of passed tests.
gpu_tests() {  # FILTER SECONDS
  timeout "$2" "$bin/mstar_gpu_tests" --gtest_filter="$1" >>"$w/tests.log" 2>&1
  echo "exit $? ($((SECONDS - t0)) s)"
  grep -E "^\[ +(FAILED|PASSED|SKIPPED) +\]|Failure|tests ran" "$w/tests.log" | head -20 |
    cut -c1-180
  grep -c "^\[       OK" "$w/tests.log"
}

# compute-sanitizer racecheck, then memcheck, over mstar_gpu_tests' tests matching FILTER,
# each bounded to 50 s and skipped with less than MIN_LEFT s of the call left; exit 9 is a
# report. Logs in $w/racecheck.log and $w/memcheck.log, their summary lines printed.
sanitize_tests() {  # FILTER MIN_LEFT
  local cs tool
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  for tool in racecheck memcheck; do
    (($(left) > $2)) || break
    timeout 50 "$cs" --tool $tool --error-exitcode 9 "$bin/mstar_gpu_tests" --gtest_filter="$1" \
      >"$w/$tool.log" 2>&1
    echo "$tool exit $? ($((SECONDS - t0)) s)"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^\[  PASSED|^\[  FAILED|^\[       OK" "$w/$tool.log" | head -6
  done
}

# mstar-gpu-bench --suite gemv's results in JSONL, a line a case (whose name holds
# PATTERN, if given), tagged TAG.
gemv_lines() {  # JSONL TAG [PATTERN]
  python3 - "$1" "$2" "${3:-}" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        if sys.argv[3] in d["case"]:
            print(f"{sys.argv[2]:6} {d['case']:42} {d['us_per_call']:8.2f} us {d['GB_per_s']:7.0f} GB/s"
                  f" copy {d['copy_GB_per_s']:5.0f}")
PY
}

# The attention shapes attn_setting and attn_flashinfer take where ATTN_SHAPES is unset.
attn_shapes_default="--rows 4 16 64 256 --prefill-rows 1 --rounds 5"

# Decode attention under one setting of environment switches (each read once, so a process
# a setting): mstar-gpu-bench --suite attention over ATTN_SHAPES (default rows 4 16 64 256,
# one prefill row, 5 rounds) on graphs, its lines tagged "setting": TAG in $w/attn.jsonl
# (bench/results/session52-calls/attn_table.py joins them with attn_flashinfer's).
attn_setting() {  # TAG [ENV=VALUE...]
  local tag=$1
  shift
  # shellcheck disable=SC2206  # the shapes split into arguments on purpose
  local shapes=(${ATTN_SHAPES:-$attn_shapes_default})
  env "$@" timeout 60 "$bin/mstar-gpu-bench" --suite attention "${shapes[@]}" --graphs --json \
    2>"$w/attn-$tag.err" | grep '^{' | sed "s/^{/{\"setting\":\"$tag\",/" >>"$w/attn.jsonl"
  echo "attn $tag done ($((SECONDS - t0)) s)"
}

# attn_setting over SHAPES under each SETTING ("TAG ENV=VALUE"), two alternated rounds, the
# tags numbered by round (defaults1, bulk0-1 ...).
attn_rounds() {  # SHAPES SETTING...
  local attn_args=$1 rep setting tag env
  shift
  for rep in 1 2; do
    for setting in "$@"; do
      read -r tag env <<<"$setting"
      ATTN_SHAPES=$attn_args attn_setting "$tag$rep" "$env"
    done
  done
}

# attn_setting's decode lines in $w/attn.jsonl as a table, a line a case (a case at another
# context apart where its setting's tag starts with ctxN-: ctx160-defaults1), a column a
# setting, into $w/attn-table.txt and printed.
attn_table() {
  python3 - "$w/attn.jsonl" <<'PY' | tee "$w/attn-table.txt"
import collections, json, re, sys
t = collections.defaultdict(dict)
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "decode" in d.get("case", ""):
        ctx = re.match(r"(ctx\d+)-", d["setting"])
        case = d["case"] + (f" {ctx.group(1)}" if ctx else "")
        t[case][d["setting"]] = d["us_per_call"]
for case, s in t.items():
    print(f"{case:36} " + "  ".join(f"{k} {v:7.2f}" for k, v in sorted(s.items())))
PY
}

# FlashInfer 0.2.5's decode and prefill wrappers on ATTN_SHAPES, captured in graphs, into
# $w/fi.jsonl: the modules bench/baselines_prebuilt.sh compiled (carried in .whl-baselines),
# else its JIT (minutes).
attn_flashinfer() {
  # shellcheck disable=SC2206  # the shapes split into arguments on purpose
  local shapes=(${ATTN_SHAPES:-$attn_shapes_default})
  local whl=$root/.whl-baselines src=/tmp/baselines-src a
  mkdir -p "$src" /tmp/flashinfer-prebuilt
  tar xzf "$whl"/flashinfer_python-0.2.5.tar.gz -C "$src"
  local fi_args=(--flashinfer-src "$src/flashinfer_python-0.2.5" --flashinfer-cache /tmp/flashinfer_build)
  for a in "$whl"/flashinfer-*-ops-*.tar.xz; do
    [[ -f $a ]] || continue
    tar xJf "$a" -C /tmp/flashinfer-prebuilt
    fi_args+=(--flashinfer-prebuilt /tmp/flashinfer-prebuilt/ops)
  done
  timeout 90 python3 bench/baselines_h200.py --json --parts flashinfer "${shapes[@]}" \
    --modes graph "${fi_args[@]}" >"$w/fi.jsonl" 2>"$w/fi.err"
  echo "flashinfer exit $? ($((SECONDS - t0)) s)"
}

# attn_flashinfer with FlashInfer's sdist and prebuilt modules carried in FOLDER (copied into
# $root/.whl-baselines), then session 52's table of ours against FlashInfer's in
# $w/attn-fi-table.txt. Nothing without the modules there.
attn_flashinfer_carried() {  # FOLDER
  if ! compgen -G "$1/flashinfer-*-ops-*.tar.xz" >/dev/null; then
    echo "flashinfer: no prebuilt modules in $1"
    return 0
  fi
  rm -rf "$root/.whl-baselines" && mkdir -p "$root/.whl-baselines" && cp "$1"/* "$root/.whl-baselines/"
  attn_flashinfer
  python3 bench/results/session52-calls/attn_table.py "$w/attn.jsonl" "$w/fi.jsonl" |
    tee "$w/attn-fi-table.txt"
}

# The H200 block of sessions 58-62's calls: decode attention at 1 / 4 / 16 / 64 / 256 rows of
# 2,048 positions (and one prefill row) at the defaults, two runs of three rounds, attn_table,
# then FlashInfer 0.2.5 carried in FOLDER on the same shapes (attn_flashinfer_carried).
attn_rows_against_flashinfer() {  # FOLDER
  local rows="--rows 1 4 16 64 256 --prefill-rows 1"
  attn_rounds "$rows --rounds 3" "defaults MSTAR_NONE=0"
  attn_table
  ATTN_SHAPES=$rows attn_flashinfer_carried "$1"
}

# Nsight Compute (--set full) over COUNT launches of the kernels matching REGEX after SKIP,
# in `mstar-gpu-bench --rounds 1 --suite attention ARGS` under ENV=VALUE switches (none: pass
# MSTAR_NONE=0): the details page in $w/NAME.txt (the report itself is not kept) and its
# headline lines printed. Under ncu the bench runs each case ~4 times, so with one row count
# launches 5-6 are the split case's (session 52's call4).
ncu_attention() {  # NAME REGEX SKIP COUNT "ARGS" ENV=VALUE...
  local name=$1 regex=$2 skip=$3 count=$4 args=$5 ncu
  shift 5
  (($(left) > 35)) || return 0
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  # shellcheck disable=SC2086  # the bench arguments split on purpose
  env "$@" timeout $(($(left) - 10)) "$ncu" --set full -k "regex:$regex" -s "$skip" -c "$count" \
    -f -o "$w/$name" "$bin/mstar-gpu-bench" --rounds 1 --suite attention $args >"$w/$name.log" 2>&1
  echo "ncu $name exit $?"
  "$ncu" --import "$w/$name.ncu-rep" --page details >"$w/$name.txt" 2>&1
  rm -f "$w/$name.ncu-rep"
  grep -E '^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Grid Size|Achieved Occupancy|Warp Cycles Per Issued|Issued Ipc' \
    "$w/$name.txt" | head -24
}

# End to end against transformers on checkpoint $ck/NAME (made as SIZE) at batches 1 / 16 / 64,
# 32-token prompts, 128 new tokens, medians of 3, as issue 17 asks: ours (mstar-bench-model-gpu,
# graphs), then transformers' generate on its fast Mamba-2 path (mamba-ssm's Triton modules and
# causal-conv1d's extension: the sdists bench/baselines_wheels.sh fetched and the extension
# bench/baselines_prebuilt.sh causal-conv1d built, carried in FOLDER), with FALLBACK=1 its torch
# fallback too, and whether both of its paths drew the same batch-1 tokens; bench/e2e_table.py's
# table in $w/e2e-NAME-table.md, printed.
transformers_e2e() {  # NAME SIZE FOLDER
  local name=$1 src=$w/src p=$w/e2e-$1 runs=()
  local args=(--model "$ck/$1" --batch 1 16 64 --prompt-len 32 --new-tokens 128 --repeats 3 --json)
  checkpoint "$name" "$2" || { echo "transformers_e2e: no checkpoint $2"; return 1; }
  if [[ ! -f $src/causal_conv1d_cuda.so ]]; then
    mkdir -p "$src"
    tar xzf "$3"/mamba_ssm-*.tar.gz -C "$src" && tar xzf "$3"/causal_conv1d-*.tar.gz -C "$src" &&
      tar xJf "$3"/causal-conv1d-*-ext-*.tar.xz -C "$src" || return 1
  fi
  timeout "$(left)" "$bin/mstar-bench-model-gpu" "${args[@]}" >"$p-mstar.jsonl" 2>"$p-mstar.err"
  echo "mstar exit $? ($((SECONDS - t0)) s)"
  timeout "$(left)" python3 bench/transformers_decode.py decode "${args[@]}" \
    --mamba-src "$(echo "$src"/mamba_ssm-*)" --causal-conv1d-src "$(echo "$src"/causal_conv1d-*)" \
    --causal-conv1d-ext "$src/causal_conv1d_cuda.so" --dump-tokens "$p-fast-tokens.json" \
    >"$p-fast.jsonl" 2>"$p-fast.err"
  echo "transformers (fast path) exit $? ($((SECONDS - t0)) s)"
  runs+=("$p-fast.jsonl")
  if [[ ${FALLBACK:-0} == 1 ]] && (($(left) > 60)); then
    timeout "$(left)" python3 bench/transformers_decode.py decode "${args[@]}" \
      --dump-tokens "$p-torch-tokens.json" >"$p-torch.jsonl" 2>"$p-torch.err"
    echo "transformers (torch fallback) exit $? ($((SECONDS - t0)) s)"
    runs+=("$p-torch.jsonl")
    python3 - "$p-fast-tokens.json" "$p-torch-tokens.json" <<'PY' | tee -a "$p.md"
import json, sys
a, b = (json.load(open(f))["generated"] for f in sys.argv[1:])
same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
print(f"transformers' fast path and torch fallback: the first {same} of {len(a)} batch-1 "
      "greedy tokens the same")
PY
  fi
  python3 bench/e2e_table.py "$p-mstar.jsonl" "${runs[@]}" --out "$p-table.md"
}

# Packs the call's results into $out/NAME.tgz.
finish() {  # NAME
  rm -rf "$ck"
  gzip -f "$w"/*.timeline.jsonl 2>/dev/null
  tar czf "$out/$1.tgz" -C "$w" .
  echo "== done ($((SECONDS - t0)) s)"
}
