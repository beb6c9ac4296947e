#!/usr/bin/env bash
# Downloads, here where PyPI answers, the wheels AIPerf needs on the GPU
# machine (Python 3.12, x86-64, no network) into .whl/ (ignored): AIPerf and
# the packages the device image lacks, or holds at versions AIPerf pins
# against, at the versions of bench/serve-constraints.txt. The image's numpy,
# pandas, pyarrow, pillow, transformers, tokenizers and huggingface_hub are
# used as they are. bench/h200_serve.sh installs them with
#   pip install --no-index --no-deps --target /tmp/site .whl/*.whl
# Tested by installing them so into a Python 3.12 venv holding the image's
# transformers 5.17, tokenizers 0.23.2, huggingface_hub 1.33 and numpy 2.5.2,
# and running AIPerf there with no network (about 24 MB).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=${1:-$root/.whl}
names=(aiperf annotated-types pydantic pydantic_core pydantic-settings typing-inspection
  python-dotenv crick cyclopts docstring_parser rich-rst ffmpeg-python future msgspec orjson
  ruamel.yaml ruamel.yaml.clib setproctitle pyzmq zstandard jmespath aiofiles rich psutil
  aiohttp multidict yarl propcache frozenlist aiosignal aiohappyeyeballs)
pins=()
for n in "${names[@]}"; do
  # pip normalizes - _ . alike; so does this lookup.
  re=$(sed 's/[-_.]/[-_.]/g' <<<"$n")
  pin=$(grep -i -E "^${re}==" "$root/bench/serve-constraints.txt") || {
    echo "serve_wheels: $n is not pinned in bench/serve-constraints.txt" >&2
    exit 1
  }
  pins+=("$pin")
done
mkdir -p "$dest"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 -d "$dest" "${pins[@]}"
du -sh "$dest"
