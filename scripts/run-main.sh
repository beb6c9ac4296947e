#!/usr/bin/env bash
# The README's main job: installs what is missing, builds, and runs
# mstar-tool's built-in example (page keys of a prompt with an image span,
# and a window plan). Serving replaces it once the actor runtime lands.
# Extra arguments go to `mstar-tool example` (try --json or --page-size 8).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/install-deps.sh
scripts/build.sh build -DMSTAR_CUDA=AUTO -- mstar-tool >/dev/null
exec build/launcher/mstar-tool example "$@"
