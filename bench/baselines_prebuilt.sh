#!/usr/bin/env bash
# Compiles a baseline's CUDA code for the device here, where no GPU is needed,
# against the device's torch, and packs it into .whl-baselines/ for the device
# calls to carry (the device has no network and a build there costs device
# time):
#   flashinfer     FlashInfer 0.2.5's four modules (bench/baselines_h200.py
#                  --build flashinfer: sm_90a, about 4 min on the dev VM's 2
#                  cores) with their build.json, as
#                  flashinfer-0.2.5-ops-torch<version>.tar.xz (~0.9 MB; ~7 MB
#                  unpacked). bench/h200_kernels.sh and h200_flashinfer.sh
#                  unpack it and pass --flashinfer-prebuilt: the timing run
#                  loads these where the device's own build has none.
#   causal-conv1d  causal-conv1d 1.7.0's extension, forward and update
#                  (bench/baselines_h200.py --build causal-conv1d: sm_90), as
#                  causal-conv1d-1.7.0-ext-torch<version>.tar.xz holding
#                  causal_conv1d_cuda.so; bench/transformers_decode.py
#                  --causal-conv1d-ext loads it, so transformers' Nemotron-H
#                  runs its fast Mamba-2 path (bench/device_calls.sh's
#                  transformers_e2e).
# Either is only usable under the torch it was built against (the modules link
# libtorch's C++ ABI; the Python version does not matter: FlashInfer's are
# loaded with torch.ops.load_library, the conv's by its file).
# Needs the sdists (bench/baselines_wheels.sh), nvcc 13 (/usr/local/cuda) and a
# Python whose torch is the device's (2.11.0+cu130):
#   PYTHON=/path/to/venv/bin/python bash bench/baselines_prebuilt.sh [flashinfer|causal-conv1d]...
#   bash bench/baselines_prebuilt.sh --venv DIR [...]   # makes DIR first: pip install
#                                                       # torch==2.11.0 (PyPI's is cu130, ~5 GB)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
torch_version=2.11.0+cu130
python=${PYTHON:-python3}
if [[ ${1:-} == --venv ]]; then
  venv=${2:?--venv DIR}
  if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "torch==${torch_version%+*}" numpy ninja
  fi
  python=$venv/bin/python
  shift 2
fi
have=$("$python" -c 'import torch; print(torch.__version__)')
if [[ $have != "$torch_version" ]]; then
  echo "baselines_prebuilt: $python has torch $have, the device has $torch_version" >&2
  exit 1
fi
whl=$root/.whl-baselines
what=("$@")
((${#what[@]})) || what=(flashinfer)
export PATH=/usr/local/cuda/bin:$PATH CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} MAX_JOBS=${MAX_JOBS:-2}
quiet() { grep -v -e 'warning #20280-D' -e '^Remark' -e '^$' || true; }
for w in "${what[@]}"; do
  case $w in
    flashinfer) sdist=$whl/flashinfer_python-0.2.5.tar.gz ;;
    causal-conv1d) sdist=$whl/causal_conv1d-1.7.0.tar.gz ;;
    *) echo "baselines_prebuilt: unknown '$w' (flashinfer, causal-conv1d)" >&2; exit 2 ;;
  esac
  [[ -f $sdist ]] || { echo "baselines_prebuilt: no $sdist (bash bench/baselines_wheels.sh)" >&2; exit 1; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  tar xzf "$sdist" -C "$work"
  if [[ $w == flashinfer ]]; then
    "$python" "$root/bench/baselines_h200.py" --build flashinfer \
      --flashinfer-src "$work/flashinfer_python-0.2.5" --flashinfer-cache "$work/cache" 2>&1 | quiet
    rm -f "$whl"/flashinfer-0.2.5-ops-*.tar.xz
    tar cJf "$whl/flashinfer-0.2.5-ops-torch${torch_version/+/-}.tar.xz" -C "$work/cache" ops
  else
    "$python" "$root/bench/baselines_h200.py" --build causal-conv1d \
      --causal-conv1d-src "$work/causal_conv1d-1.7.0" --ext-dir "$work/ext" 2>&1 | quiet
    [[ -f $work/ext/causal_conv1d_cuda.so ]] ||
      { echo "baselines_prebuilt: causal-conv1d's build left no causal_conv1d_cuda.so" >&2; exit 1; }
    rm -f "$whl"/causal-conv1d-1.7.0-ext-*.tar.xz
    tar cJf "$whl/causal-conv1d-1.7.0-ext-torch${torch_version/+/-}.tar.xz" -C "$work/ext" \
      causal_conv1d_cuda.so
  fi
  rm -rf "$work"
done
ls -la "$whl"
