# shellcheck shell=bash
# Sourced by session 58's call scripts (run from .carry/ on the device, this file beside
# them): bench/device_calls.sh (copied beside this file), which holds the A/B modes'
# switches (`envs_of`), unpacks the binaries, sources bench/device_env.sh and defines
# `left`, `attn_setting`, `attn_flashinfer`, `nh056_rounds`, `gpu_tests`, `sanitize_tests`
# and `finish`.
source "$(dirname "${BASH_SOURCE[0]}")/device_calls.sh"
