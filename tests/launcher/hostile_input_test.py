#!/usr/bin/env python3
"""Hostile input against mstar-run and mstar-tool as real processes (issue 19):
every input the issue's table lists and the parsers' edges (truncations, wrong
types, huge numbers, deep nesting, special files). Each case asserts the exit
code, a part of the message, and that the refused input's peak resident memory
stays under 200 MB above what the same binary takes to print --help (the
CUDA-linked mstar-run maps cuBLAS at start: ~230 MB before it reads a flag).

    python3 hostile_input_test.py BUILD [name-substring ...]

BUILD is the build folder (binaries in BUILD/launcher). Standard library
only; cases run four at a time, each with its own temp folder and a bounded
wait. Prints one line per case, exits 1 if any failed.
"""
import concurrent.futures
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EMBEDDED = os.path.join(ROOT, "models", "embedded", "default")
BIN = None
ASAN = False
RSS_BUDGET_KB = 200 * 1024
DEEP = 100_000
DEEP_ARRAY = "[" * DEEP + "1" + "]" * DEEP
TIMEOUT_S = 120


def measure(report, argv):
    """`--measure REPORT ARGV...`: runs ARGV as a child of this small fresh
    process and writes "<exit code> <peak RSS KB>" to REPORT. Linux keeps a
    process's peak RSS across fork and exec, so a child forked from the test
    driver (which holds 100 MB inputs) would report the driver's peak."""
    pid = os.fork()
    if pid == 0:
        try:
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    with open(report, "w", encoding="utf-8") as f:
        f.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}")
    return 0


def run(argv, stdin_bytes=b"", limit_as=None):
    """Runs argv; returns (rc, stdout, stderr, peak RSS in KB)."""
    with tempfile.TemporaryFile() as fin, tempfile.TemporaryFile() as fout, \
            tempfile.TemporaryFile() as ferr, tempfile.TemporaryDirectory() as tmp:
        fin.write(stdin_bytes)
        fin.seek(0)
        report = os.path.join(tmp, "report")

        def limits():
            if limit_as:
                resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--measure", report,
                                 *argv], stdin=fin, stdout=fout, stderr=ferr, preexec_fn=limits,
                                start_new_session=True)
        try:
            proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            raise TimeoutError(f"{argv[0]} ran past {TIMEOUT_S} s")
        with open(report, encoding="utf-8") as f:
            rc, kb = (int(x) for x in f.read().split())
        fout.seek(0)
        ferr.seek(0)
        return rc, fout.read().decode("utf-8", "replace"), \
            ferr.read().decode("utf-8", "replace"), kb


def tool(*args):
    return [os.path.join(BIN, "mstar-tool"), *args]


def mstar_run(*args):
    return [os.path.join(BIN, "mstar-run"), *args]


# ---------------------------------------------------------------- model folders

def model_copy(tmp, config=None, tokenizer=None, weights=None):
    """A copy of the embedded model in tmp/model: config.json and tokenizer.json
    edited by the given functions (dict -> dict or text), weights replaced by
    bytes when given (else a symlink to the real file)."""
    folder = os.path.join(tmp, "model")
    os.makedirs(folder)
    for name, edit in (("config.json", config), ("tokenizer.json", tokenizer)):
        with open(os.path.join(EMBEDDED, name), encoding="utf-8") as f:
            text = f.read()
        if edit is not None:
            out = edit(json.loads(text))
            text = out if isinstance(out, str) else json.dumps(out)
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(text)
    target = os.path.join(folder, "model.safetensors")
    if weights is None:
        os.symlink(os.path.join(EMBEDDED, "model.safetensors"), target)
    else:
        with open(target, "wb") as f:
            f.write(weights)
    return folder


def with_raw(field, raw):
    """A config edit that sets `field` to raw JSON text (not a Python value)."""
    def edit(cfg):
        cfg[field] = "@@RAW@@"
        return json.dumps(cfg).replace('"@@RAW@@"', raw)
    return edit


def with_fields(**fields):
    def edit(cfg):
        cfg.update(fields)
        return cfg
    return edit


def safetensors_bytes(header_text, data=b""):
    header = header_text.encode()
    return struct.pack("<Q", len(header)) + header + data


def shifted_header_weights():
    """The embedded weights with the header length one byte short (the header
    is space-padded, so the JSON still parses and every tensor shifts)."""
    with open(os.path.join(EMBEDDED, "model.safetensors"), "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = blob[8:8 + n].rstrip(b" ") + b"  "
    return struct.pack("<Q", len(header) - 1) + header + blob[8 + n:]


def model_case(name, expect, config=None, tokenizer=None, weights=None, extra=(),
               setup=None, rc=2):
    def body(tmp):
        folder = model_copy(tmp, config, tokenizer, weights)
        if setup:
            setup(folder)
        return mstar_run("--model", folder, "--max-tokens", "1", *extra), b"", None
    return (name, body, rc, expect)


def replaced_by(file_name, make):
    """A folder edit: `file_name` removed and made again by `make(path)`
    (os.mkfifo, os.mkdir: something that is not a regular file)."""
    def setup(folder):
        path = os.path.join(folder, file_name)
        os.remove(path)
        make(path)
    return setup


def fifo_at(file_name):
    return replaced_by(file_name, os.mkfifo)


def directory_at(file_name):
    return replaced_by(file_name, os.mkdir)


def tokenizer_with_vocab_id(token, token_id):
    def edit(tok):
        tok["model"]["vocab"][token] = token_id
        return tok
    return edit


def tokenizer_with_added_id(token_id):
    def edit(tok):
        tok.setdefault("added_tokens", []).append(
            {"id": token_id, "content": "<|hostile|>", "special": True})
        return tok
    return edit


# ---------------------------------------------------------------- cases

def plain(name, argv, expect, rc=2, stdin=b"", limit_as=None):
    return (name, lambda tmp: (argv, stdin, limit_as), rc, expect)


def keys_line(name, line, expect):
    return plain(f"keys: {name}", tool("keys"), expect, rc=1, stdin=line.encode() + b"\n")


def sim_lines(name, lines, expect, check=None):
    return (f"sim: {name}", lambda tmp: (tool("sim"), "\n".join(lines).encode() + b"\n", None), 1,
            expect, check)


SIM_CONFIG = ('{"config":{"kv":{"page_size":4,"max_num_pages":8,"num_layers":1,'
              '"num_kv_heads":1,"head_dim":4}}}')


def pools_unchanged(out):
    """The state after the refused line equals the state before it."""
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[1]["ok"] is False, lines[1]
    assert lines[0]["kv"] == lines[2]["kv"], (lines[0]["kv"], lines[2]["kv"])


def cases():
    huge = str(2 ** 32)
    out = [
        # config.json: deep nesting, overflowing sizes, wrong types, truncation, special files
        model_case("config: hidden_size nested 100,000 deep",
                   "config.json nests deeper than 64 levels",
                   config=with_raw("hidden_size", DEEP_ARRAY)),
        model_case("config: eos_token_id nested 100,000 deep", "nests deeper than 64 levels",
                   config=with_raw("eos_token_id", DEEP_ARRAY)),
        model_case("config: time_step_limit nested 100,000 deep", "nests deeper than 64 levels",
                   config=with_raw("time_step_limit", DEEP_ARRAY)),
        model_case("config: mamba heads x head_dim = 2^64", "field 'mamba_num_heads': must be in "
                   "[0, 2^24], got 4294967296",
                   config=with_fields(mamba_num_heads=2 ** 32, mamba_head_dim=2 ** 32)),
        model_case("config: ssm_state_size 2^62", "field 'ssm_state_size': must be in [0, 2^24]",
                   config=with_fields(ssm_state_size=2 ** 62)),
        model_case("config: attention heads x head_dim x hidden past 2^40",
                   "num_attention_heads x head_dim x hidden_size is more than the 2^40 elements",
                   config=with_fields(num_attention_heads=2 ** 20, head_dim=2 ** 20)),
        model_case("config: hidden_size 2^63-1", "field 'hidden_size': must be in [0, 2^24]",
                   config=with_fields(hidden_size=2 ** 63 - 1)),
        model_case("config: hidden_size a string", "field 'hidden_size': expected an integer",
                   config=with_fields(hidden_size="320")),
        model_case("config: hidden_size a 10 MB string, echoed short",
                   "field 'hidden_size': expected an integer, got \"xxxx",
                   config=with_fields(hidden_size="x" * 10_000_000)),
        model_case("config: truncated", "config.json is not valid JSON",
                   config=lambda cfg: json.dumps(cfg)[:-20]),
        model_case("config: eos id past the vocabulary", "field 'eos_token_id': must be in "
                   "[0, vocab_size = 4096), got 4096", config=with_fields(eos_token_id=4096)),
        model_case("config: mstar_tokenizer offset near int64 max",
                   "byte tokenizer with offset 9223372036854775000",
                   config=with_fields(mstar_tokenizer={"type": "bytes",
                                                       "offset": 9223372036854775000})),
        model_case("config: a directory", "config.json: is a directory, not a file",
                   setup=directory_at("config.json")),
        model_case("config: a FIFO", "config.json: is a FIFO (named pipe), not a regular file",
                   setup=fifo_at("config.json")),
        # safetensors
        model_case("safetensors: data_offsets nested 100,000 deep",
                   "header nests deeper than 64 levels",
                   weights=safetensors_bytes('{"w":{"dtype":"F32","shape":[1],"data_offsets":'
                                             + DEEP_ARRAY + "}}", b"\0" * 4)),
        model_case("safetensors: a FIFO", "model.safetensors: is a FIFO (named pipe)",
                   setup=fifo_at("model.safetensors")),
        model_case("safetensors: header length one byte short",
                   "byte data section (is the header length right?)",
                   weights=shifted_header_weights()),
        model_case("safetensors: truncated in the header", "header length",
                   weights=safetensors_bytes('{"w":{"dtype":"F32"')[:-5]),
        model_case("safetensors: a duplicate key", "header has the key \"w\" twice in one object",
                   weights=safetensors_bytes('{"w":{"dtype":"F32","shape":[1],"data_offsets":'
                                             '[0,4]},"w":{"dtype":"F32","shape":[1],'
                                             '"data_offsets":[0,4]}}', b"\0" * 4)),
        # tokenizer.json
        model_case("tokenizer: vocabulary id 2^31-1",
                   "id 2147483647 of 'zzzz' is outside the model's vocabulary of 4096",
                   tokenizer=tokenizer_with_vocab_id("zzzz", 2 ** 31 - 1)),
        # The listed id of an added token the vocabulary does not spell is not used:
        # as in `tokenizers`, it takes the next id after the vocabulary (4096 here).
        model_case("tokenizer: added-token id 2^31-1",
                   "of '<|hostile|>' is outside the model's vocabulary of 4096",
                   tokenizer=tokenizer_with_added_id(2 ** 31 - 1)),
        model_case("tokenizer: nested 100,000 deep", "tokenizer.json nests deeper than 64 levels",
                   tokenizer=lambda tok: json.dumps(tok)[:-1] + ', "x": ' + DEEP_ARRAY + "}"),
        model_case("tokenizer: truncated", "tokenizer.json is not valid JSON",
                   tokenizer=lambda tok: json.dumps(tok)[:1000]),
        model_case("tokenizer: a FIFO", "tokenizer.json: is a FIFO (named pipe)",
                   setup=fifo_at("tokenizer.json")),
        # mstar-run flags and prompts
        model_case("run: a prompt longer than max_position_embeddings",
                   "prompt 1 has 13 tokens, more than the model's context of 8",
                   config=with_fields(max_position_embeddings=8),
                   # small pools: the check comes after they are made
                   extra=("--prompt", "It was the best of times, it was the worst of times",
                          "--max-pages", "64", "--max-slots", "4")),
        plain("run: --prompts .", mstar_run("--prompts", "."),
              "mstar-run: --prompts: .: is a directory, not a file"),
        plain("run: --prompts /dev/zero", mstar_run("--prompts", "/dev/zero"),
              "/dev/zero: is a character device, not a regular file"),
        plain("run: --prompts missing", mstar_run("--prompts", "/nonexistent/prompts.txt"),
              "/nonexistent/prompts.txt: no such file"),
        ("run: --prompts empty", lambda tmp: (mstar_run("--prompts", make_file(tmp, "\n\n")),
                                             b"", None), 2, "holds no prompt"),
        plain("run: --top-k -5", mstar_run("--top-k", "-5"),
              "--top-k: must be a whole number >= 0, got '-5'"),
        plain("run: --seed -1", mstar_run("--seed", "-1"),
              "--seed: must be a whole number >= 0, got '-1'"),
        plain("run: --max-pages 16777216", mstar_run("--max-pages", "16777216", "--max-memory",
                                                     "1G"),
              "16777216 KV pages of 16.0 KiB"),
        plain("run: --max-slots 1000000", mstar_run("--max-slots", "1000000", "--max-memory",
                                                    "1G"),
              "1000000 recurrent slots of 682.0 KiB"),
        plain("run: --page-size 4096", mstar_run("--page-size", "4096", "--max-memory", "1G"),
              "more than the 1073741824 bytes (1.0 GiB) --max-memory allows"),
        # mstar-tool windows
        plain("windows: --total 2^63-1 --window 1",
              tool("windows", "--total", "9223372036854775807", "--window", "1"),
              "makes 9223372036854775807 windows, more than the 100000 this command prints"),
        plain("windows: huge --overlap",
              tool("windows", "--total", "9223372036854775807", "--window", "1000",
                   "--overlap", "999"),
              "more than the 100000 this command prints"),
        plain("windows: --total 10000000 --window 1",
              tool("windows", "--total", "10000000", "--window", "1"),
              "makes 10000000 windows"),
        plain("windows: --overlap >= --window",
              tool("windows", "--total", "10", "--window", "2", "--overlap", "2"),
              "overlap_units must be in [0, window_units)"),
        plain("tool: unknown command", tool("frob"), "mstar-tool: unknown command 'frob'"),
        # mstar-tool keys
        keys_line("end nested 100,000 deep",
                  '{"fn":"end_key","tokens":[1],"end":' + DEEP_ARRAY + "}",
                  "the line nests deeper than 64 levels"),
        keys_line("page_size nested 100,000 deep",
                  '{"fn":"page_items","spans":[],"page_size":' + DEEP_ARRAY + "}",
                  "the line nests deeper than 64 levels"),
        keys_line("a token nested 100,000 deep",
                  '{"fn":"page_key","tokens":[' + DEEP_ARRAY + "]}",
                  "the line nests deeper than 64 levels"),
        keys_line("page_items: 4294967295 slots at page size 1",
                  '{"fn":"page_items","spans":[[4294967295,"ab"]],"page_size":1}',
                  "make 4294967295 pages, more than the 262144 one line may lay out"),
        keys_line("layout: 4294967295 slots at page size 1",
                  '{"fn":"layout","page_size":1,"spans":[{"length":4294967295,"digest":"ab"}]}',
                  "make 4294967295 pages, more than the 262144"),
        keys_line("a duplicate fn", '{"fn":"chain","fn":"layout"}',
                  'the line has the key \\"fn\\" twice in one object'),
        keys_line("truncated", '{"fn":"chain","pages":[[1,2]', "the line is not valid JSON"),
        keys_line("end 2^64", '{"fn":"end_key","tokens":[1],"end":18446744073709551616}',
                  "end must be an integer"),
        keys_line("tokens a string", '{"fn":"page_key","tokens":"abc"}',
                  "tokens must be an array of token ids"),
        ("keys: unknown fn of 10 MB, echoed short",
         lambda tmp: (tool("keys"), b'{"fn":"' + b"f" * 10_000_000 + b'"}\n', None), 1,
         "unknown fn 'ffff", short_output),
        plain("keys: a line of 17 MiB", tool("keys"), "longer than the 16777216 bytes", rc=1,
              stdin=b" " * (17 << 20) + b"\n"),
        # mstar-tool sim
        sim_lines("a 2^40-page pool",
                  ['{"config":{"kv":{"page_size":1048576,"max_num_pages":1048576,'
                   '"num_layers":1,"num_kv_heads":1,"head_dim":8}}}'],
                  '"ok":false'),
        sim_lines("a capture step spanning 2^31 slots",
                  [SIM_CONFIG,
                   '{"op":"step","kv":{"segments":[{"rid":"a","span":2147483647}]},'
                   '"capture":true}', '{"op":"probe","rid":"a"}'],
                  "the capture step's rows span 536870912 pages, more than the pool's 8",
                  pools_unchanged),
        sim_lines("a line nested 100,000 deep",
                  [SIM_CONFIG, '{"op":"step","kv":' + DEEP_ARRAY + "}", '{"op":"probe","rid":"a"}'],
                  "the line nests deeper than 64 levels", pools_unchanged),
        sim_lines("a duplicate op", [SIM_CONFIG, '{"op":"probe","op":"remove","rid":"a"}',
                                     '{"op":"probe","rid":"a"}'],
                  'has the key \\"op\\" twice', pools_unchanged),
    ]
    if not ASAN:  # AddressSanitizer cannot run under an address-space limit
        out.append(plain("run: --max-pages 16777216 under a 4 GiB address space",
                         mstar_run("--max-pages", "16777216"),
                         "this process can have (the address-space limit (RLIMIT_AS))",
                         limit_as=4 << 30))
    return out


def make_file(tmp, text):
    path = os.path.join(tmp, "prompts.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def short_output(out):
    for line in out.splitlines():
        assert len(line) < 1000, f"an output line of {len(line)} bytes echoes the value"


# ---------------------------------------------------------------- driver

def baseline_kb(binary):
    rc, _, _, kb = run([os.path.join(BIN, binary), "--help"])
    assert rc == 0, f"{binary} --help exited {rc}"
    return kb


def check(case, baselines):
    name, make, want_rc, expect = case[:4]
    extra_check = case[4] if len(case) > 4 else None
    with tempfile.TemporaryDirectory(prefix="mstar-hostile-") as tmp:
        argv, stdin, limit_as = make(tmp)
        started = time.monotonic()
        rc, out, err, kb = run(argv, stdin, limit_as)
        took = time.monotonic() - started
    text = out + err
    problems = []
    if rc != want_rc:
        problems.append(f"exit {rc}, expected {want_rc}")
    if expect not in text:
        problems.append(f"no {expect!r} in the output")
    if "terminate called" in text or "AddressSanitizer" in text or "runtime error" in text:
        problems.append("a crash or sanitizer report")
    base = baselines[os.path.basename(argv[0])]
    if kb - base >= RSS_BUDGET_KB:
        problems.append(f"peak RSS {kb // 1024} MB, {(kb - base) // 1024} MB over --help's")
    if extra_check and not problems:
        try:
            extra_check(out)
        except AssertionError as e:
            problems.append(str(e))
    return name, problems, kb, base, took, text


def asan_tree(build):
    """Whether the tree's binaries carry AddressSanitizer: its CMake cache says
    so (clang links the runtime statically, so ldd shows no libasan)."""
    try:
        with open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8") as f:
            for line in f:
                if line.startswith("MSTAR_SANITIZE:"):
                    value = line.split("=", 1)[1].strip().upper()
                    return value in ("ON", "YES", "TRUE", "Y", "1") or "ADDRESS" in value
    except OSError:
        pass
    ldd = subprocess.run(["ldd", os.path.join(build, "launcher", "mstar-run")],
                         capture_output=True, text=True)
    return "libasan" in ldd.stdout


def main():
    global BIN, ASAN
    if len(sys.argv) > 3 and sys.argv[1] == "--measure":
        return measure(sys.argv[2], sys.argv[3:])
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    BIN = os.path.join(os.path.abspath(sys.argv[1]), "launcher")
    wanted = sys.argv[2:]
    ASAN = asan_tree(os.path.abspath(sys.argv[1]))
    baselines = {b: baseline_kb(b) for b in ("mstar-run", "mstar-tool")}
    print(f"baseline peak RSS (--help): mstar-run {baselines['mstar-run'] // 1024} MB, "
          f"mstar-tool {baselines['mstar-tool'] // 1024} MB; budget +200 MB per refused input")
    todo = [c for c in cases() if not wanted or any(w in c[0] for w in wanted)]
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        for name, problems, kb, base, took, text in pool.map(lambda c: check(c, baselines), todo):
            status = "ok  " if not problems else "FAIL"
            print(f"{status} {name}: peak {kb // 1024} MB (+{max(kb - base, 0) // 1024}), "
                  f"{took:.1f} s")
            if problems:
                failed += 1
                print("     " + "; ".join(problems))
                print("     output: " + text[:600].replace("\n", "\n             "))
    print(f"{len(todo) - failed}/{len(todo)} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
