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

# timeline_of (the 0.56B's batch-1 step timeline under a mode) is bench/device_calls.sh's
# since session 47, which also lists one step's launches.

source "$(dirname "${BASH_SOURCE[0]}")/device_calls.sh"
