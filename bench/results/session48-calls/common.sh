# shellcheck shell=bash
# Sourced by session 48's call scripts (run from .carry/ on the device, this file beside
# them): the modes' switches (`envs_of`), then bench/device_calls.sh (copied beside this
# file), which unpacks the binaries, sources bench/device_env.sh and defines `left`,
# `ab_runs`, `nh056_rounds`, `timeline_of` and `finish`.
envs_of() {  # MODE
  case $1 in
    defaults) echo "MSTAR_NONE=0" ;;
    l2off) echo "MSTAR_L2_PREFETCH=0" ;;        # no L2 prefetch by the latency-bound kernels
    l2mib8) echo "MSTAR_L2_PREFETCH_MIB=8" ;;   # call1's build (on, bulk): at most 8 MiB a kernel
    l2mib16) echo "MSTAR_L2_PREFETCH_MIB=16" ;;
    l2mib32) echo "MSTAR_L2_PREFETCH_MIB=32" ;;
    l2lines) echo "MSTAR_L2_PREFETCH=1" ;;      # call2 on (off by default): a line an instruction
    l2lines8) echo "MSTAR_L2_PREFETCH=1 MSTAR_L2_PREFETCH_MIB=8" ;;
    l2lines32) echo "MSTAR_L2_PREFETCH=1 MSTAR_L2_PREFETCH_MIB=32" ;;
    l2bulk) echo "MSTAR_L2_PREFETCH=1 MSTAR_L2_PREFETCH_BULK=1" ;;  # call1's bulk prefetches
    direct0) echo "MSTAR_ATTN_SINGLE_DIRECT=0" ;;  # one-chunk rows through the merge kernel
    direct1) echo "MSTAR_ATTN_SINGLE_DIRECT=1" ;;  # call2 on: opt-in, the split kernel writes them
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
    plan2) echo "MSTAR_PLAN_KERNEL=2" ;;       # the plan kernel as the decode graph's first node
    early) echo "MSTAR_SSD_EARLY=1" ;;          # the update reads slots and states before its wait
    nofold) echo "MSTAR_SSD_NORM_FOLD=0" ;;     # the gated norm outside the SSD update
    nofoldgated0) echo "MSTAR_SSD_NORM_FOLD=0 MSTAR_GATED_FOLD=0" ;;
    qnoside) echo "MSTAR_SIDE_DOWNLOAD=0" ;;
    *) echo "envs_of: no mode $1" >&2 ;;
  esac
}

source "$(dirname "${BASH_SOURCE[0]}")/device_calls.sh"
