"""bench/token_runs.py on --tokens-out files written here: runs that drew the
same tokens exit 0; a run that parts from the others is named with the
request and step where it does and the tokens on both sides, exit 1; an
unreadable or incomplete line exits 2 naming the file and line. Exits
non-zero on a wrong answer."""

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write(runs):
    """One --tokens-out file: a JSON line a run."""
    with tempfile.NamedTemporaryFile("w", suffix=".tokens.jsonl", delete=False) as f:
        for r in runs:
            f.write(json.dumps(r) + "\n")
        return f.name


def run(*paths, as_json=True):
    args = [sys.executable, os.path.join(ROOT, "bench/token_runs.py"), *paths]
    if as_json:
        args.append("--json")
    return subprocess.run(args, capture_output=True, text=True)


def check(cond, what):
    if not cond:
        print(f"token_runs_test: {what}", file=sys.stderr)
        sys.exit(1)


def main():
    usual = [[5, 6, 7, 8], [9, 10, 11, 12]]
    parted = [[5, 6, 7, 8], [9, 10, 99, 98]]  # request 1 parts at step 2
    same = write([{"batch": 2, "run": r, "digest": "aa", "tokens": usual}
                  for r in ("warmup", "0", "1")])
    other = write([{"batch": 2, "run": "warmup", "digest": "aa", "tokens": usual},
                   {"batch": 2, "run": "0", "digest": "bb", "tokens": parted},
                   {"batch": 1, "run": "0", "digest": "cc", "tokens": [[1, 2]]}])

    got = run(same)
    check(got.returncode == 0, f"equal runs: exit {got.returncode}, {got.stderr}")
    report = json.loads(got.stdout)
    check(report["2"]["runs"] == 3 and report["2"]["differing"] == [], f"equal runs: {report}")

    got = run(same, other)
    check(got.returncode == 1, f"a parted run: exit {got.returncode}, {got.stderr}")
    report = json.loads(got.stdout)
    check(report["2"]["runs"] == 5 and report["2"]["digests"] == {"aa": 4, "bb": 1},
          f"a parted run's counts: {report['2']}")
    (d,) = report["2"]["differing"]
    check((d["request"], d["step"], d["run"]) == (1, 2, "0"), f"where it parts: {d}")
    check(d["usual_from_step"] == [11, 12] and d["this_from_step"] == [99, 98],
          f"the tokens from there: {d}")
    check(d["requests_differing"] == 1, f"requests differing: {d}")
    check(report["1"]["differing"] == [], f"batch 1 alone: {report['1']}")

    text = run(same, other, as_json=False)
    check("request 1 first differs at step 2" in text.stdout, f"the text form: {text.stdout}")

    bad = write([{"batch": 2, "run": "0", "tokens": usual}])
    with open(bad, "a", encoding="utf-8") as f:
        f.write('{"batch": 2, "run": "1"}\n')  # no tokens
    got = run(bad)
    check(got.returncode == 2 and f"{bad}:2: no 'tokens'" in got.stderr,
          f"a line without tokens: exit {got.returncode}, {got.stderr}")
    with open(bad, "w", encoding="utf-8") as f:
        f.write("{\n")
    got = run(bad)
    check(got.returncode == 2 and "not JSON" in got.stderr,
          f"a broken line: exit {got.returncode}, {got.stderr}")
    got = run(bad + ".missing")
    check(got.returncode == 2 and "No such file" in got.stderr,
          f"a missing file: exit {got.returncode}, {got.stderr}")

    for p in (same, other, bad):
        os.unlink(p)
    print("token_runs_test: passed")


if __name__ == "__main__":
    main()
