"""bench/sass_prewait.py on cuobjdump-style SASS written here: a kernel whose read-only
load sits before its ACQBULK (griddepcontrol.wait) is listed with that load, one whose
read-only loads all follow the wait lists none, a kernel without a wait is left out (and is what
--without-wait lists), and --against reports the kernel whose count changed. Exits non-zero on a wrong answer."""

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sass(hoisted):
    """Three kernels in cuobjdump -sass's layout; `hoisted`: kernel A's input load before
    its wait."""
    a = ["        /*0000*/                   MOV R1, c[0x0][0x28] ;",
         "        /*0010*/                   LDG.E.CONSTANT R2, desc[UR4][R4.64] ;"]
    load = "        /*0030*/                   LDG.E.128.CONSTANT R8, desc[UR4][R6.64] ;"
    wait = "        /*0040*/                   ACQBULK ;"
    a += [load, wait] if hoisted else [wait, load.replace("0030", "0050")]
    b = ["        /*0000*/                   ACQBULK ;",
         "        /*0010*/                   LDG.E.CONSTANT R2, desc[UR4][R4.64] ;"]
    c = ["        /*0000*/                   LDG.E.CONSTANT R2, desc[UR4][R4.64] ;",
         "        /*0010*/                   EXIT ;"]
    text = ""
    for name, body in (("_Z8kernel_av", a), ("_Z8kernel_bv", b), ("_Z8kernel_cv", c)):
        text += f"\t\tFunction : {name}\n\t.headerflags\t@\"EF_CUDA_SM90\"\n"
        text += "\n".join(f"{line}                 /* 0x000000000000782e */" for line in body)
        text += "\n\t\t..........\n\n"
    with tempfile.NamedTemporaryFile("w", suffix=".sass", delete=False) as f:
        f.write(text)
        return f.name


def run(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "bench/sass_prewait.py"), *args],
                          capture_output=True, text=True)


def check(cond, what):
    if not cond:
        print(f"sass_prewait_test: {what}", file=sys.stderr)
        sys.exit(1)


def main():
    old, new = sass(True), sass(False)
    got = run(old, "--json")
    check(got.returncode == 0, f"exit {got.returncode}: {got.stderr}")
    report = json.loads(got.stdout)
    check(sorted(report) == ["_Z8kernel_av", "_Z8kernel_bv"], f"kernels with a wait: {report}")
    check(len(report["_Z8kernel_av"]) == 2 and "0030: LDG.E.128.CONSTANT" in report["_Z8kernel_av"][1],
          f"the hoisted load: {report['_Z8kernel_av']}")
    check(report["_Z8kernel_bv"] == [], f"loads after the wait: {report['_Z8kernel_bv']}")
    got = run(new, "--against", old, "--json")
    changed = json.loads(got.stdout)["changed"]
    check(changed == {"_Z8kernel_av": {"against": 2, "this": 1}}, f"--against: {changed}")
    got = run(new, "--name", "kernel_b")
    check("2 kernels" not in got.stdout and "1 kernels with a wait; 0 issue" in got.stdout,
          f"--name: {got.stdout}")
    got = run(new, "--without-wait", "--json")
    check(json.loads(got.stdout) == ["_Z8kernel_cv"], f"--without-wait: {got.stdout}")
    got = run(new + ".missing")
    check(got.returncode == 2 and "No such file" in got.stderr, f"a missing file: {got.stderr}")
    for p in (old, new):
        os.unlink(p)
    print("sass_prewait_test: passed")


if __name__ == "__main__":
    main()
