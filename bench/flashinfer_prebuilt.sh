#!/usr/bin/env bash
# Compiles FlashInfer 0.2.5's four modules for the device here, where no GPU
# is needed (bench/baselines_h200.py --build flashinfer: sm_90a, about 4 min
# on the dev VM's 2 cores), and packs them with their build.json into
# .whl-baselines/flashinfer-0.2.5-ops-torch<version>.tar.xz (~0.9 MB; ~7 MB
# unpacked). bench/h200_kernels.sh and h200_flashinfer.sh unpack it and pass
# --flashinfer-prebuilt: the timing run loads these where the device's own
# build has none, and only under the torch they were built against (the
# modules link libtorch's C++ ABI; the Python version does not matter, they
# are loaded with torch.ops.load_library, not imported).
# Needs the sdist (bench/baselines_wheels.sh), nvcc 13 (/usr/local/cuda) and a
# Python whose torch is the device's (2.11.0+cu130):
#   PYTHON=/path/to/venv/bin/python bash bench/flashinfer_prebuilt.sh
#   bash bench/flashinfer_prebuilt.sh --venv DIR   # makes DIR first: pip install
#                                                  # torch==2.11.0 (PyPI's is cu130, ~5 GB)
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
fi
have=$("$python" -c 'import torch; print(torch.__version__)')
if [[ $have != "$torch_version" ]]; then
  echo "flashinfer_prebuilt: $python has torch $have, the device has $torch_version" >&2
  exit 1
fi
whl=$root/.whl-baselines
sdist=$whl/flashinfer_python-0.2.5.tar.gz
[[ -f $sdist ]] || { echo "flashinfer_prebuilt: no $sdist (bash bench/baselines_wheels.sh)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar xzf "$sdist" -C "$work"
export PATH=/usr/local/cuda/bin:$PATH CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} MAX_JOBS=${MAX_JOBS:-2}
"$python" "$root/bench/baselines_h200.py" --build flashinfer \
  --flashinfer-src "$work/flashinfer_python-0.2.5" --flashinfer-cache "$work/cache" 2>&1 |
  grep -v -e 'warning #20280-D' -e '^Remark' -e '^$'
rm -f "$whl"/flashinfer-0.2.5-ops-*.tar.xz
tar cJf "$whl/flashinfer-0.2.5-ops-torch${torch_version/+/-}.tar.xz" -C "$work/cache" ops
ls -la "$whl"
