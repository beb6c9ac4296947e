# shellcheck shell=bash
# Sourced by session 44's call scripts (run from .carry/ on the device, this file beside
# them): the A/B modes' switches (`envs_of`), then bench/device_calls.sh (copied beside this
# file), which unpacks the binaries, sources bench/device_env.sh and defines `left`,
# `ab_runs` and `finish`.
# The switches of an A/B mode (session 44's five opt-in changes around the
# step's boundaries; every mode keeps the model's defaults otherwise): S side
# downloads, K the plan kernel (2: inside the decode graph), E the SSD update's early state reads, R the
# accumulating GEMVs' early residual loads, N the norm forms' L2 prefetch of
# their norm weight.
envs_of() {  # MODE
  local s=0 k=0 e=0 r=0 n=0
  case $1 in
    defaults) ;;
    side) s=1 ;;
    plan) k=1 ;;
    plan2) k=2 ;;
    early) e=1 ;;
    resid) r=1 ;;
    normpf) n=1 ;;
    sideplan) s=1 k=1 ;;
    all5) s=1 k=1 e=1 r=1 n=1 ;;
    *) echo "envs_of: no mode $1" >&2 ;;
  esac
  echo "MSTAR_SIDE_DOWNLOAD=$s MSTAR_PLAN_KERNEL=$k MSTAR_SSD_EARLY=$e MSTAR_GEMV_RESIDUAL_EARLY=$r" \
    "MSTAR_GEMV_NORM_PREFETCH=$n"
}

source "$(dirname "${BASH_SOURCE[0]}")/device_calls.sh"
