#!/usr/bin/env bash
# Installs the Debian 12 packages mstar-cpp builds against (ENVIRONMENT.md).
# Idempotent: when every package is present it only checks and exits (well
# under a second). CUDA 13 and NCCL come with the machine image, not apt; the
# build uses them when nvcc is found (MSTAR_CUDA=AUTO) and works without.
set -euo pipefail

packages=(
  cmake g++ ninja-build pkg-config ca-certificates
  libcaf-dev libucx-dev ucx-utils libboost-dev libssl-dev libyaml-cpp-dev
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev libbenchmark-dev
  libgtest-dev libgmock-dev libopenblas-dev libxxhash-dev iproute2
  libonig-dev libutf8proc-dev # tokenizer.json: Split regexes, Unicode normalizers
  libpng-dev libjpeg62-turbo-dev # image decoding (models/vision/)
  clang-format # 14 on Debian 12, what scripts/check-format.sh checks with
  clang libclang-rt-14-dev # libFuzzer for the HTTP fuzz target (tests/fuzz/)
  lld # the sanitizer and fuzz trees link with it (MSTAR_LINKER=lld)
  curl python3 python3-venv # the server's client tests (curl, the openai package)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then
    sudo_cmd=(sudo)
  else
    echo "install-deps: missing packages (${missing[*]}) and not root; run as root" >&2
    exit 1
  fi
fi
"${sudo_cmd[@]}" apt-get update -q
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends \
  "${missing[@]}"
