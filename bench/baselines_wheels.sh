#!/usr/bin/env bash
# Downloads, here where PyPI answers, what bench/baselines_h200.py needs on
# the GPU machine (no network) into .whl-baselines/ (ignored), ~3 MB:
# mamba-ssm's, causal-conv1d's and flashinfer-python 0.2.5's source archives,
# pinned by version and SHA-256 (pip cannot download them without building
# their metadata, which needs CUDA and torch, so they come as the archives
# PyPI lists), and the einops wheel (pure Python; the image has einops too).
# On the device bench/h200_kernels.sh unpacks the archives: mamba-ssm's Triton
# modules are imported from the source tree without its CUDA extension;
# causal-conv1d's extension and FlashInfer's JIT modules are compiled there
# (bench/baselines_h200.py --build) only when asked (they may not build).
# FlashInfer 0.2.5's sdist (2.5 MB, cutlass included) rather than a current
# wheel (0.7.x: ~100 MB and more dependencies): it needs only torch, ninja,
# numpy, and jinja2 / filelock (torch's own dependencies).
# bench/baselines_prebuilt.sh adds its modules compiled here (~0.9 MB).
#   bash bench/baselines_wheels.sh [DEST]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=${1:-$root/.whl-baselines}
mkdir -p "$dest"
# name version sha256 of the sdist
sdists=(
  "mamba-ssm 2.3.2.post1 104cc47e9101e5401a675fa2b784f2952b9b037f3b1dd83b5ac544394e95d028"
  "causal-conv1d 1.7.0 3202758494eaa7b597ce1c282dfa188889506bfcb92cad3c407d26736bfcd32b"
  "flashinfer-python 0.2.5 990aa090ef781783e76b836696ece4efd23956f72b5696d622fc619a61162aef"
)
for line in "${sdists[@]}"; do
  read -r name version sha <<<"$line"
  python3 - "$name" "$version" "$sha" "$dest" <<'PY'
import hashlib, json, os, sys, urllib.request
name, version, sha, dest = sys.argv[1:]
# PyPI's simple index (PEP 691 JSON), the one pip reads.
req = urllib.request.Request(f"https://pypi.org/simple/{name}/",
                             headers={"Accept": "application/vnd.pypi.simple.v1+json"})
with urllib.request.urlopen(req, timeout=60) as r:
    files = json.load(r)["files"]
want = f"{name.replace('-', '_')}-{version}.tar.gz"
urls = [f for f in files if f["filename"] == want]
if not urls:
    sys.exit(f"baselines_wheels: PyPI lists no {want}")
u = urls[0]
path = os.path.join(dest, u["filename"])
if not (os.path.exists(path) and hashlib.sha256(open(path, "rb").read()).hexdigest() == sha):
    with urllib.request.urlopen(u["url"], timeout=120) as r:
        data = r.read()
    if hashlib.sha256(data).hexdigest() != sha:
        sys.exit(f"baselines_wheels: {u['filename']}: SHA-256 differs from the pinned {sha}")
    with open(path, "wb") as f:
        f.write(data)
print(f"{u['filename']} {os.path.getsize(path)} bytes")
PY
done
python3 -m pip download -q --no-deps --only-binary=:all: -d "$dest" einops==0.8.2
du -sh "$dest"
total=$(du -sk "$dest" | cut -f1)
if ((total > 6144)); then
  echo "baselines_wheels: $dest holds ${total} KB, more than the 6 MB expected" >&2
  exit 1
fi
