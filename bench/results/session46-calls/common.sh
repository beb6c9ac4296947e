# shellcheck shell=bash
# Sourced by session 46's call scripts (run from .carry/ on the device, this file beside
# them): the modes' switches (`envs_of`), then bench/device_calls.sh (copied beside this
# file), which unpacks the binaries, sources bench/device_env.sh and defines `left`,
# `ab_runs` and `finish`.
envs_of() {  # MODE
  case $1 in
    defaults) echo "MSTAR_NONE=0" ;;
    gated0) echo "MSTAR_GATED_FOLD=0" ;;        # out_proj after a separate gated-norm kernel
    fused0) echo "MSTAR_FUSED_NORM=0" ;;        # every batch-1 norm a separate kernel
    ssdgated0) echo "MSTAR_SSD_NORM_FOLD=1 MSTAR_GATED_FOLD=0" ;;
    split7) echo "MSTAR_GEMV_SPLIT=7" ;;        # narrow products: eight pieces in flight a lane
    ssdnorm) echo "MSTAR_SSD_NORM_FOLD=1" ;;    # the gated norm in the SSD update (session 46)
    ssdnorm72) echo "MSTAR_SSD_NORM_FOLD=1 MSTAR_SSD_NORM_FOLD_REGS=72" ;;  # call3's build only
    nofold) echo "MSTAR_SSD_NORM_FOLD=0" ;;     # call4 on: the fold is the default at batch 1
    nofoldgated0) echo "MSTAR_SSD_NORM_FOLD=0 MSTAR_GATED_FOLD=0" ;;
    early) echo "MSTAR_SSD_EARLY=1" ;;          # the update reads slots and states before its wait
    resid) echo "MSTAR_GEMV_RESIDUAL_EARLY=1" ;;  # accumulating GEMVs load the residual early
    earlyresid) echo "MSTAR_SSD_EARLY=1 MSTAR_GEMV_RESIDUAL_EARLY=1" ;;
    merge2) echo "MSTAR_ATTN_SPLIT_MERGE=2" ;;   # decode attention: the fused merge at one row too
    chunk32) echo "MSTAR_ATTN_SPLIT_MIN_CHUNK=32" ;;
    chunk32f) echo "MSTAR_ATTN_SPLIT_MIN_CHUNK=32 MSTAR_ATTN_SPLIT_MERGE=2" ;;
    nosplit) echo "MSTAR_ATTN_SPLITS=1" ;;
    qside) echo "MSTAR_SIDE_DOWNLOAD=1" ;;      # Qwen3.5's side downloads (off by default until 144a26f)
    qnoside) echo "MSTAR_SIDE_DOWNLOAD=0" ;;
    *) echo "envs_of: no mode $1" >&2 ;;
  esac
}

# The 0.56B's batch-1 step timeline under MODE (CUPTI through the carried
# .profile/libmstar_kernel_times.so), summarised by bench/profile/timeline.py.
timeline_of() {  # MODE
  local n=nh056-decode1-$1
  # shellcheck disable=SC2046  # the mode's switches split on purpose
  env $(envs_of "$1") "LD_LIBRARY_PATH=$(cupti_lib_dir):$LD_LIBRARY_PATH" \
    "CUDA_INJECTION64_PATH=$root/.profile/libmstar_kernel_times.so" "MSTAR_KERNEL_PROFILE=$w/$n.txt" \
    "MSTAR_KERNEL_TIMELINE=$w/$n.timeline.jsonl" timeout 90 "$bin/mstar-bench-model-gpu" \
    --model "$ck/nh056" --batch 1 --prompt-len 32 --new-tokens 256 --repeats 2 --json >"$w/$n.log" 2>&1
  echo "-- timeline $n (exit $?)"
  python3 bench/profile/timeline.py "$w/$n.timeline.jsonl" --step-start loopback_kernel \
    >"$w/$n.steps.txt" 2>&1
  head -16 "$w/$n.steps.txt" | cut -c1-120
}

source "$(dirname "${BASH_SOURCE[0]}")/device_calls.sh"
