#!/usr/bin/env python3
"""Read-only loads a chained kernel issues before its wait, from `cuobjdump -sass` output.

A chained kernel (kernels/cuda/internal/common.cuh, launch_chained) may read before its
`griddepcontrol.wait` (SASS `ACQBULK`) only what no kernel writes: weights and parameters.
ptxas treats a read-only load (`__ldg`, SASS `LDG.E...CONSTANT`) as reading memory nothing
changes and may schedule it ahead of the wait even where the source puts it after: session 45
found the SSD update's B/C loads so hoisted, which drew different tokens from run to run
(bench/results/session45-calls/README.md). This lists, per kernel with a wait, the read-only
loads at addresses before its first `ACQBULK`; with --against, the kernels whose count differs
between two builds. Since session 45 the kernels read inputs with plain loads
(`load_coherent`), so what is listed should be weights only: check each against the source.

  cuobjdump -sass build/bench/mstar-bench-model-gpu > new.sass
  (no cuobjdump in the build machine's CUDA: `pip download --no-deps nvidia-cuda-cuobjdump`
  and `python3 -m zipfile -e` the wheel; its nvidia/cu13/bin has it)
  python3 bench/sass_prewait.py new.sass [--name ssd_update] [--against old.sass] [--json]
  python3 bench/sass_prewait.py new.sass --without-wait   # kernels that never wait

Exit status 0; 2 for an unreadable file.
"""
from __future__ import annotations

import argparse
import json
import re
import sys

FUNCTION = re.compile(r"Function : (\S+)")
INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def read(path: str) -> str:
    try:
        return open(path, encoding="utf-8", errors="replace").read()
    except OSError as e:
        print(f"sass_prewait: {path}: {e.strerror}", file=sys.stderr)
        sys.exit(2)


def without_wait(path: str) -> list[str]:
    """The kernels with no ACQBULK at all: none of them may be launched chained
    (launch_chained), or it would read its inputs unsynchronised."""
    return [part.split("\n", 1)[0].strip() for part in read(path).split("Function : ")[1:]
            if "ACQBULK" not in part]


def scan(path: str) -> dict[str, list[str]]:
    """Kernel name -> the read-only loads before its first ACQBULK (kernels with one only)."""
    text = read(path)
    out: dict[str, list[str]] = {}
    for part in text.split("Function : ")[1:]:
        name = part.split("\n", 1)[0].strip()
        before: list[str] = []
        waits = False
        for line in part.split("\n")[1:]:
            m = INSTRUCTION.search(line)
            if not m:
                continue
            ins = m.group(2)
            if "ACQBULK" in ins:
                waits = True
                break
            if "LDG" in ins and "CONSTANT" in ins:
                before.append(f"{m.group(1)}: {ins}")
        if waits:
            out[name] = before
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sass", help="cuobjdump -sass output")
    ap.add_argument("--against", help="another build's cuobjdump -sass output")
    ap.add_argument("--name", default="", help="only kernels whose mangled name holds this")
    ap.add_argument("--json", action="store_true", help="one JSON object, not text")
    ap.add_argument("--without-wait", action="store_true",
                    help="list the kernels with no wait instead (check that none is launched "
                    "through launch_chained)")
    args = ap.parse_args()
    if args.without_wait:
        names = [n for n in without_wait(args.sass) if args.name in n]
        print(json.dumps(names) if args.json else "\n".join(names))
        return 0
    mine = {k: v for k, v in scan(args.sass).items() if args.name in k}
    if args.against:
        theirs = {k: v for k, v in scan(args.against).items() if args.name in k}
        changed = {k: {"against": len(theirs[k]), "this": len(v)}
                   for k, v in mine.items() if k in theirs and len(theirs[k]) != len(v)}
        if args.json:
            print(json.dumps({"kernels_with_a_wait": len(mine), "changed": changed}))
        else:
            print(f"{len(mine)} kernels with a wait; {len(changed)} with another count of "
                  "read-only loads before it than in --against")
            for k, c in sorted(changed.items()):
                print(f"  {c['against']:3} -> {c['this']:3}  {k}")
        return 0
    if args.json:
        print(json.dumps(mine))
    else:
        early = {k: v for k, v in mine.items() if v}
        print(f"{len(mine)} kernels with a wait; {len(early)} issue read-only loads before it "
              "(weights only, if the kernel keeps the rule)")
        for k, loads in sorted(early.items()):
            print(f"{len(loads):3}  {k}")
            for load in loads:
                print(f"       {load}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
