#!/usr/bin/env python3
"""mstar-launch and mstar-node as real processes: a prefill/decode deployment
(and a single `both` node) against mstar-run's greedy text, a decode node
killed mid-request, tls mode, a peer without the credential, bad files and a
node that never joins; then the faults of the transfer between them: a decode
node killed while it pulls (and the prefill node's lease freeing what it
published), a prefill node killed before its handoff (its finished prefill
held by MSTAR_TEST_PREFILL_HOLD_MS) or while its pages are pulled, a
corrupted transfer, a decode node adopting its own cached pages,
and chat requests with images (the tiny Qwen3.5 fixture) across the P/D
processes against the same requests on one colocated node.

    python3 pd_processes_test.py BUILD [scenario ...]
    python3 pd_processes_test.py --list

BUILD is the build folder (binaries in BUILD/launcher); PD_TEST_VERBOSE=1
prints each deployment's log after a passing scenario too. Standard library
only. Every scenario gets its own temp folder, free ports and YAML; every
wait is bounded; every process started is stopped at the end, on failure
too. Runs all scenarios, prints one line per scenario, exits 1 if any failed.
"""
import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import loopback_ports  # noqa: E402

BIN = None  # BUILD/launcher, set in main()
PROMPTS = [
    "The quick brown fox",
    "Once upon a time",
    "It was the best of times, it was the worst of times",
    "Call me Ishmael. Some years ago",
]
LONG_PROMPT = "In the beginning"
LONG_TOKENS = 400
# The attention-only tiny fixture (tests/fixtures/README.md): byte tokens, so
# its prompt cache works.
ATTN_MODEL = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                           "fixtures", "models", "nemotron_h_tiny_attn"))
# The tiny Qwen3.5 fixture (vision tower, chat template, image processor) and
# the fixture images its chat prompts name.
FIXTURES = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                         "fixtures"))
QWEN_MODEL = os.path.join(FIXTURES, "models", "qwen3_5_tiny")
# How long MSTAR_TEST_TRANSFER_DELAY_MS holds every pull (actors/transfer_actor.cpp).
HOLD_MS = 2000
HELD = r"^\[decode-0\] .*pull of \d+ page\(s\) and \d+ slot\(s\): held %d ms" % HOLD_MS


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def free_ports(n):
    """n distinct free ports on 127.0.0.1, below the ephemeral range
    (scripts/loopback_ports.py says why)."""
    try:
        return loopback_ports.free_ports(n)
    except loopback_ports.NoFreePorts as e:
        raise Failure(str(e)) from None


def wait_until(pred, timeout, what, step=0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise Failure(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)


# ---------------------------------------------------------------- reference

_reference = {}


def reference(prompt, max_tokens, ignore_eos=False, model=None):
    """mstar-run's greedy text for one prompt (the same model: the embedded
    one unless `model` names a folder)."""
    key = (prompt, max_tokens, ignore_eos, model)
    if key not in _reference:
        cmd = [os.path.join(BIN, "mstar-run"), "--prompt", prompt, "--max-tokens",
               str(max_tokens), "--temperature", "0", "--json"]
        if ignore_eos:
            cmd.append("--ignore-eos")
        if model:
            cmd += ["--model", model]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, f"mstar-run failed ({r.returncode}): {r.stderr}")
        _reference[key] = json.loads(r.stdout.strip().splitlines()[0])["text"]
    return _reference[key]


# ---------------------------------------------------------------- HTTP


def post(url, body, timeout=60):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def complete(base, prompt, max_tokens, **extra):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, **extra}
    r = post(base + "/v1/completions", body)
    return r["choices"][0]["text"], r["choices"][0]["finish_reason"]


def stream(base, prompt, max_tokens, on_chunk=None, timeout=60, **extra):
    """Streams a completion, parsing SSE by hand. Returns (text, finish_reason,
    error): error is the `error` object of a data event, if one came, or the
    exception that ended the stream."""
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            **extra}
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    text, finish, error, done, n = "", None, None, False, 0
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            check(r.headers.get("Content-Type", "").startswith("text/event-stream"),
                  f"stream Content-Type is {r.headers.get('Content-Type')!r}")
            for raw in r:
                line = raw.decode().rstrip("\r\n")
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                event = json.loads(data)
                if "error" in event:
                    error = event["error"]
                    continue
                for c in event.get("choices", []):
                    text += c.get("text", "")
                    n += 1
                    if c.get("finish_reason"):
                        finish = c["finish_reason"]
                if on_chunk:
                    on_chunk(n)
    except (OSError, urllib.error.URLError, ValueError) as e:
        error = error or f"stream broke: {e!r}"
    if error is None and not done:
        error = "stream ended without [DONE]"
    return text, finish, error


def metrics(base):
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        out = {}
        for line in r.read().decode().splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out


def assert_pools_free(base, nodes, timeout=10, cached_ok=True):
    """The pools are back to their free counts: every page and slot but each
    node's sink is free, and the used gauges read 0. With `cached_ok` (the
    default: both the fixtures and the hybrid default model keep a prefix
    cache), pages only the prefix cache holds (evictable:
    mstar:kv_pages_cached) count as free."""
    last = {}

    def free():
        m = last["m"] = metrics(base)
        cached = m["mstar:kv_pages_cached"] if cached_ok else 0
        return (m["mstar:kv_pages_free"] + cached == m["mstar:kv_pages_total"] - nodes
                # an attention-only model has no slots (and no sink slot)
                and m["mstar:recurrent_slots_free"] == max(0, m["mstar:recurrent_slots_total"]
                                                           - nodes)
                and m["mstar:num_requests_running"] == 0
                and m["mstar:num_requests_waiting"] == 0)

    try:
        wait_until(free, timeout, "the pools to be free")
    except Failure:
        m = last["m"]
        raise Failure("pools not back to free counts within %d s (%d node(s), one sink each%s): "
                      "%s" % (timeout, nodes, ", cached pages count as free" if cached_ok else "",
                              {k: v for k, v in m.items() if "pages" in k
                                               or "slots" in k or "requests_" in k}))
    m = last["m"]
    gauges = {k: m[k] for k in ("mstar:kv_pages_used", "mstar:recurrent_slots_used")}
    check(all(v == 0 for v in gauges.values()),
          f"free lists are full (kv_pages_free={m['mstar:kv_pages_free']:.0f} of "
          f"{m['mstar:kv_pages_total']:.0f}, recurrent_slots_free="
          f"{m['mstar:recurrent_slots_free']:.0f} of {m['mstar:recurrent_slots_total']:.0f}, "
          f"{nodes} node(s)) but the used gauges read {gauges}: /metrics subtracts one sink "
          f"from totals summed over {nodes} nodes (serve/metrics.cpp)")


# ---------------------------------------------------------------- deployment


class Launch:
    """mstar-launch over a YAML in its own temp folder; output to launch.log."""

    def __init__(self, tmp, yaml_text, extra_args=(), env=None):
        self.tmp = tmp
        self.yaml = os.path.join(tmp, "deploy.yaml")
        with open(self.yaml, "w") as f:
            f.write(yaml_text)
        self.log_path = os.path.join(tmp, "launch.log")
        self.log_file = open(self.log_path, "w")
        # Secret-mode nodes write their derived credential under
        # $XDG_RUNTIME_DIR: keep it in this folder, to see what is left behind.
        self.run_dir = os.path.join(tmp, "run")
        os.mkdir(self.run_dir, 0o700)
        # The nodes inherit this environment (the MSTAR_TEST_* hooks).
        env = dict(os.environ, XDG_RUNTIME_DIR=self.run_dir, **(env or {}))
        self.proc = subprocess.Popen(
            [os.path.join(BIN, "mstar-launch"), self.yaml, "--grace", "5", *extra_args],
            stdin=subprocess.DEVNULL, stdout=self.log_file, stderr=subprocess.STDOUT,
            start_new_session=True, env=env)
        self.started_at = time.monotonic()

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def wait_serving(self, timeout=30):
        def serving():
            if self.proc.poll() is not None:
                raise Failure(f"mstar-launch exited {self.proc.returncode} before serving:\n"
                              + self.log())
            m = re.search(r"^mstar-launch: \S+ serving (http://\S+)", self.log(), re.M)
            return m and m.group(1)

        try:
            self.base = wait_until(serving, timeout, "mstar-launch to print `serving`")
        except Failure as e:
            raise Failure(f"{e}\n--- launch.log ---\n{self.log()}")
        return self.base

    def leftover_credentials(self):
        """Credential files nodes left under $XDG_RUNTIME_DIR, by folder."""
        return {d: sorted(os.listdir(os.path.join(self.run_dir, d)))
                for d in sorted(os.listdir(self.run_dir))}

    def node_pids(self):
        return [int(p) for p in re.findall(r"started \S+ \(pid (\d+)\)", self.log())]

    def node_pid(self, name):
        """The pid of node `name`'s latest process."""
        pids = re.findall(r"started %s \(pid (\d+)\)" % re.escape(name), self.log())
        check(pids, f"mstar-launch never logged `started {name} (pid ...)`")
        return int(pids[-1])

    def wait_log(self, pattern, timeout, what=None, after=0):
        """The first match of `pattern` (multiline) in the log past offset `after`."""
        found = wait_until(lambda: re.search(pattern, self.log()[after:], re.M), timeout,
                           what or f"/{pattern}/ in mstar-launch's output", 0.05)
        return found

    def wait_rejoined(self, name, timeout=20, after=0):
        """`name` rejoined after a restart logged past offset `after` (a node
        killed twice rejoins twice)."""
        self.wait_log(r"%s rejoined after restart" % re.escape(name), timeout,
                      f"mstar-launch to log `{name} rejoined after restart`", after=after)

    def stop(self):
        """SIGTERM, then SIGKILL to the launcher's group and every node's group."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for pgid in [self.proc.pid] + self.node_pids():
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.proc.poll() is None:
            self.proc.wait(timeout=10)
        self.log_file.close()
        return self.proc.returncode


def pd_yaml(name, ports, auth="{mode: secret, secret_file: secret.txt}", join_s=20,
            restart="{max_retries: 3, backoff_s: 0.5}"):
    http, p0, p1 = ports
    return f"""deployment: {name}
auth: {auth}
http: {{host: 127.0.0.1, port: {http}}}
timeouts: {{join_s: {join_s}}}
restart: {restart}
nodes:
  - {{name: prefill-0, role: prefill, host: 127.0.0.1, control_port: {p0}}}
  - {{name: decode-0, role: decode, host: 127.0.0.1, control_port: {p1}}}
front: prefill-0
"""


def deploy_yaml(name, ports, nodes, front=None, lease_s=None, transfer_s=None, join_s=20,
                restart="{max_retries: 3, backoff_s: 0.5}", model=None, page_size=None,
                auth="{mode: secret, secret_file: secret.txt}"):
    """A deployment of `nodes`: (name, role) or (name, role, "extra: keys"),
    their control ports ports[1:], HTTP on ports[0]; the front is the first
    node unless named."""
    timeouts = f"join_s: {join_s}" + (f", transfer_s: {transfer_s}" if transfer_s else "")
    lines = [f"deployment: {name}", f"auth: {auth}",
             f"http: {{host: 127.0.0.1, port: {ports[0]}}}", f"timeouts: {{{timeouts}}}",
             f"restart: {restart}"]
    if lease_s:
        lines.append(f"lease_s: {lease_s}")
    if model:
        lines.append(f"model: {model}")
    if page_size:
        lines.append(f"page_size: {page_size}")
    lines.append("nodes:")
    for (node, role, *extra), port in zip(nodes, ports[1:]):
        more = "".join(", " + e for e in extra)
        lines.append(f"  - {{name: {node}, role: {role}, host: 127.0.0.1, "
                     f"control_port: {port}{more}}}")
    lines.append(f"front: {front or nodes[0][0]}")
    return "\n".join(lines) + "\n"


def in_background(fn):
    """Runs fn() on a thread; join(timeout) returns its result or raises."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to join()
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def join(timeout):
        t.join(timeout)
        check(not t.is_alive(), f"the request did not end within {timeout} s")
        if "error" in box:
            raise box["error"]
        return box["value"]

    return join


def used(m):
    return m["mstar:kv_pages_used"], m["mstar:recurrent_slots_used"]


def with_launch(yaml_fn, body, nports=3, extra_args=(), killed=(), env=None):
    """Runs body(launch, base, ports) on a serving deployment, then stops it
    and checks it exits 0 leaving no node credential behind (but those of the
    nodes in `killed`, which got SIGKILL)."""
    with tempfile.TemporaryDirectory(prefix="mstar-pd-") as tmp:
        ports = free_ports(nports)
        launch = Launch(tmp, yaml_fn(ports), extra_args, env)
        try:
            base = launch.wait_serving()
            result = body(launch, base, ports)
            rc = launch.stop()
            if os.environ.get("PD_TEST_VERBOSE"):
                print(f"--- launch.log ---\n{launch.log()}", flush=True)
            check(rc == 0, f"mstar-launch exited {rc} after SIGTERM, not 0:\n{launch.log()}")
            left = {d: f for d, f in launch.leftover_credentials().items()
                    if not any(f"{k}-key.pem" in f for k in killed)}
            check(not left, f"nodes stopped with SIGTERM left their credential in "
                  f"$XDG_RUNTIME_DIR: {left}")
            return result
        except Exception as e:
            launch.stop()
            if "--- launch.log" in str(e):
                raise
            detail = e.read().decode(errors="replace") if isinstance(e, urllib.error.HTTPError) \
                else ""
            what = str(e) if isinstance(e, Failure) else f"{type(e).__name__}: {e} {detail}"
            raise Failure(f"{what}\n--- launch.log (tail) ---\n"
                          + "\n".join(launch.log().splitlines()[-40:])) from None
        except BaseException:
            launch.stop()
            raise


def assert_greedy_equal(base, prompts=PROMPTS, streaming=True):
    for i, prompt in enumerate(prompts):
        n = 16 + 4 * i
        want = reference(prompt, n)
        got, finish = complete(base, prompt, n)
        check(got == want, f"completion of {prompt!r} (max_tokens {n}) differs from "
              f"mstar-run's greedy text:\n  served:   {got!r}\n  mstar-run: {want!r}")
        if streaming:
            text, sfinish, err = stream(base, prompt, n)
            check(err is None, f"stream of {prompt!r} failed: {err}")
            check(text == want, f"streamed text of {prompt!r} differs from mstar-run's:\n"
                  f"  streamed: {text!r}\n  mstar-run: {want!r}")
            check(sfinish == finish, f"stream finish_reason {sfinish!r} != {finish!r}")


# ---------------------------------------------------------------- scenarios


def pd_local():
    def body(launch, base, ports):
        assert_greedy_equal(base)
        assert_pools_free(base, nodes=2)
        # Both nodes on one host: the pools live in shared-memory segments
        # and every handoff's pages were read with a mapped copy, not UCX.
        m = metrics(base)
        pulls = m["mstar:transfer_pulls_total"]
        check(pulls == m["mstar:handoffs_adopted_total"] and pulls >= len(PROMPTS),
              f"transfer pulls {pulls} vs adopted handoffs {m['mstar:handoffs_adopted_total']}")
        check(m["mstar:transfer_mapped_pulls_total"] == pulls,
              f"{m['mstar:transfer_mapped_pulls_total']:.0f} of {pulls:.0f} pulls went through "
              f"a mapped segment; expected all (same host)")
        check(m["mstar:transfer_failed_total"] == 0, "a transfer failed")
        segs = [f for f in os.listdir("/dev/shm") if f.startswith("mstar.pd-local.")]
        check(len(segs) >= 2, f"no pool segments of the deployment in /dev/shm: {segs}")
        return f"{pulls:.0f} mapped pulls, {m['mstar:transfer_bytes_total'] / 1e6:.2f} MB in " \
               f"{m['mstar:transfer_seconds_total'] * 1e3:.1f} ms"

    out = {}
    with_launch(lambda p: pd_yaml("pd-local", p), lambda *a: out.update(note=body(*a)))
    left = [f for f in os.listdir("/dev/shm") if f.startswith("mstar.pd-local.")]
    check(not left, f"segments left in /dev/shm after a clean stop: {left}")
    return out.get("note")


def local(tensor_parallel=1, mode=None, after=None):
    extra = f", tensor_parallel: {tensor_parallel}" if tensor_parallel > 1 else ""
    if mode:
        extra += f", tensor_parallel_mode: {mode}"

    def yaml(ports):
        return f"""deployment: local
auth: {{mode: secret, secret: "0123456789abcdef0123456789abcdef"}}
http: {{host: 127.0.0.1, port: {ports[0]}}}
timeouts: {{join_s: 20}}
nodes:
  - {{name: node-0, role: both, host: 127.0.0.1, control_port: {ports[1]}{extra}}}
"""

    def body(launch, base, ports):
        assert_greedy_equal(base, streaming=False)
        assert_pools_free(base, nodes=1)
        if tensor_parallel > 1:
            check(f"at tensor parallel {tensor_parallel}" in launch.log(),
                  "node-0 did not log its tensor-parallel ranks")
        if after:
            return after(launch, base)

    return with_launch(yaml, body, nports=2)


def local_tensor_parallel():
    """A `both` node of two in-process tensor-parallel ranks (one scheduler and
    one set of pools driving both) serves mstar-run's greedy text."""
    local(tensor_parallel=2)


def local_rank_processes():
    """A `both` node of two tensor-parallel ranks as processes (rank 0 the
    node's conductor, rank 1 a process it starts): mstar-run's greedy text;
    then kill -9 of the rank-1 process mid-stream: the request ends with an
    error naming the rank, the node stops, mstar-launch restarts it and the
    restarted node (two fresh rank processes) serves the same text again."""

    def after(launch, base):
        pids = re.findall(r"started tensor-parallel rank 1 \(pid (\d+)\)", launch.log())
        check(len(pids) == 1, f"node-0 did not log one rank-1 process: {pids}")
        killed = {}

        def on_chunk(n):
            if n >= 4 and not killed:
                os.kill(int(pids[0]), signal.SIGKILL)
                killed["at"] = time.monotonic()

        # Long enough (3,000 tokens of the 4,096-token model) that the stream
        # is still running when a slow client has read its fourth chunk.
        text, finish, err = stream(base, LONG_PROMPT, 3000, on_chunk, timeout=120,
                                   ignore_eos=True)
        ended = time.monotonic()
        check(killed, f"the stream ended before 4 chunks (text {text!r}, error {err})")
        check(err is not None and "rank 1" in str(err),
              f"after kill -9 of rank 1 the stream ended without an error naming it: "
              f"finish {finish!r}, error {err!r}")
        wait_until(lambda: len(re.findall(r"started tensor-parallel rank 1 \(pid",
                                          launch.log())) >= 2 and
                   "node-0: ready" in launch.log().split("exited")[-1],
                   30, "node-0 restarted with new rank processes")
        wait_until(lambda: _serves(base), 30, "the restarted node to serve")
        assert_greedy_equal(base, streaming=False)
        return (f"the stream failed {1000 * (ended - killed['at']):.0f} ms after the kill "
                f"({str(err)[:120]!r}); the node restarted and served again")

    return local(tensor_parallel=2, mode="processes", after=after)


def _serves(base):
    try:
        complete(base, "Hi", 1)
        return True
    except Exception:  # noqa: BLE001 - not yet
        return False


def kill_decode():
    """kill -9 of decode-0 while a long streaming request decodes on it."""
    want = reference(LONG_PROMPT, LONG_TOKENS, ignore_eos=True)
    outcome = {}

    def body(launch, base, ports):
        decode_pid = int(re.search(r"started decode-0 \(pid (\d+)\)", launch.log()).group(1))
        killed = {}

        def on_chunk(n):
            if n >= 40 and not killed:
                os.kill(decode_pid, signal.SIGKILL)
                killed["at"] = time.monotonic()

        t0 = time.monotonic()
        text, finish, err = stream(base, LONG_PROMPT, LONG_TOKENS, on_chunk, timeout=60,
                                   ignore_eos=True)
        check(killed, f"the stream ended before 40 chunks (text {text!r}, error {err})")
        outcome.update(text=text, finish=finish, err=err, secs=time.monotonic() - t0)
        # Documented behaviour: the decode node's death ends the request with
        # an error event (no silent truncation, no partial text passed off as
        # complete), or it completes equal to the uninterrupted text.
        if err is None:
            check(text == want and finish == "length",
                  f"after kill -9 of decode-0 the request completed without an error but its "
                  f"text differs from the uninterrupted run (finish {finish!r}):\n"
                  f"  served:   {text!r}\n  mstar-run: {want!r}")
            outcome["kind"] = "completed equal"
        else:
            check(want.startswith(text), f"the partial text before the error is not a prefix "
                  f"of the uninterrupted run:\n  partial: {text!r}\n  mstar-run: {want!r}")
            check(len(text) < len(want), "an error ended a stream whose text was complete")
            outcome["kind"] = "error"
        # The launcher restarts decode-0; a new request then succeeds.
        wait_until(lambda: "decode-0 rejoined after restart" in launch.log()
                   or re.search(r"restarting decode-0", launch.log()), 15,
                   "mstar-launch to log the restart of decode-0")

        refused = outcome["refused"] = []

        def served():
            try:
                got, _ = complete(base, PROMPTS[0], 16)
                return got == reference(PROMPTS[0], 16) or Failure(f"post-restart text {got!r}")
            except urllib.error.HTTPError as e:
                refused.append(f"{e.code} {json.loads(e.read())['error']['message']}")
            except OSError as e:
                refused.append(repr(e))
            return None

        result = wait_until(served, 30, "a request to succeed after decode-0's restart", 0.5)
        check(result is True, f"{result}")
        check(re.search(r"decode-0 rejoined after restart", launch.log()),
              "the launcher log shows no `decode-0 rejoined after restart` line")
        check(re.search(r"\[decode-0\] mstar-node decode-0: ready", launch.log().split(
              "restarting decode-0", 1)[-1]), "the restarted decode-0 never printed `ready`")
        print(f"  kill-decode: {summary()}", flush=True)
        assert_pools_free(base, nodes=2)

    def summary():
        refused = outcome.get("refused", [])
        return (f"kill -9 decode-0 after 40 chunks: outcome {outcome.get('kind')} after "
                f"{outcome.get('secs', 0):.1f} s, {len(outcome.get('text', ''))} of {len(want)} chars, "
                f"error {outcome.get('err')!r}; {len(refused)} request(s) refused before "
                f"decode-0 was back{': first ' + repr(refused[0]) if refused else ''}")

    with_launch(lambda p: pd_yaml("pd-kill", p), body, killed=["decode-0"])
    return summary()


def tls_mode():
    def body(launch, base, ports):
        certs = os.path.join(launch.tmp, "certs")
        check(os.path.isdir(certs), "mstar-launch did not make the certs folder")
        check(os.stat(certs).st_mode & 0o077 == 0, "certs folder readable by group/others")
        got, _ = complete(base, PROMPTS[1], 20)
        check(got == reference(PROMPTS[1], 20), f"tls-mode completion {got!r} differs")
        return sorted(os.listdir(certs))

    with_launch(lambda p: pd_yaml("pd-tls", p, auth="{mode: tls, dir: certs}"), body)


def rogue_peer():
    def body(launch, base, ports):
        control = ports[1]  # prefill-0, the front
        # 1. plain TCP bytes (a BASP-looking greeting would do no better)
        with socket.create_connection(("127.0.0.1", control), timeout=5) as s:
            s.sendall(b"\x16\x03\x01\x00\x05hello" + b"GET / HTTP/1.0\r\n\r\n")
            s.settimeout(5)
            try:
                s.recv(4096)
            except OSError:
                pass
        # 2. a real TLS client without a certificate
        r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{control}",
                            "-brief"], input="hello\n", capture_output=True, text=True,
                           timeout=15)
        refusals = wait_until(
            lambda: re.findall(r"^\[prefill-0\] .*refused TLS peer 127\.0\.0\.1:\d+.*$",
                               launch.log(), re.M), 10,
            "`[prefill-0] ... refused TLS peer` in mstar-launch's output")
        joined = re.findall(r"node (\S+) joined", launch.log())
        check(joined == ["decode-0"], f"nodes that joined the front: {joined}")
        # The refused peers must not disturb the deployment: the very next
        # request succeeds, with no retry.
        got, _ = complete(base, PROMPTS[2], 16)
        check(got == reference(PROMPTS[2], 16), f"completion after the rogue peer {got!r}")
        # The refused handshakes used to leave their errors in the
        # multiplexer thread's OpenSSL error queue, and CAF 0.17.6 then took
        # the next want-read of the link to decode-0 for a failure and closed
        # it (the router saw remote_link_unreachable, the launcher re-joined
        # decode-0). The node's TLS calls empty the queue first now
        # (actors/internal/ssl_error_queue.cpp): the link must stay up.
        check("joined again" not in launch.log(),
              "the front lost its link to decode-0 after the refused peers (it re-joined)")
        check(launch.proc.poll() is None, "mstar-launch exited after the rogue peer")

    with_launch(lambda p: pd_yaml("pd-rogue", p), body)


def bad_yaml():
    http, p0, p1 = free_ports(3)
    cases = [
        ("unknown key", pd_yaml("bad", (http, p0, p1)) + "bogus_key: 1\n", "bogus_key"),
        ("unknown node key",
         pd_yaml("bad", (http, p0, p1)).replace("role: decode,", "role: decode, colour: red,"),
         "colour"),
        ("control port collision", pd_yaml("bad", (http, p0, p0)), "control_port"),
        ("control port is the http port", pd_yaml("bad", (http, http, p1)), "control_port"),
    ]
    for what, text, needle in cases:
        with tempfile.TemporaryDirectory(prefix="mstar-bad-") as tmp:
            path = os.path.join(tmp, "deploy.yaml")
            with open(path, "w") as f:
                f.write(text)
            r = subprocess.run([os.path.join(BIN, "mstar-launch"), path], capture_output=True,
                               text=True, timeout=20, stdin=subprocess.DEVNULL)
            out = r.stdout + r.stderr
            check(r.returncode == 2, f"{what}: mstar-launch exited {r.returncode}, not 2:\n{out}")
            check(needle in out, f"{what}: the message does not name {needle!r}:\n{out}")
            check("started" not in out and "[prefill-0]" not in out,
                  f"{what}: a node was started:\n{out}")
            check(not os.path.exists(os.path.join(tmp, "secret.txt")),
                  f"{what}: the secret file was created though the file is bad")
            if what == "control port collision":
                msg = [l for l in out.splitlines() if needle in l][0]
                check(str(p0) in msg, f"{what}: the message does not name port {p0}: {msg}")


def never_joins():
    """decode-0's control port is held by the test: its mstar-node cannot bind
    and exits; the start fails naming it, within join_s."""
    with tempfile.TemporaryDirectory(prefix="mstar-nojoin-") as tmp:
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        http, p0 = free_ports(2)
        p1 = holder.getsockname()[1]
        join_s = 5
        launch = Launch(tmp, pd_yaml("pd-nojoin", (http, p0, p1), join_s=join_s))
        try:
            try:
                rc = launch.proc.wait(timeout=join_s + 15)
            except subprocess.TimeoutExpired:
                raise Failure(f"mstar-launch still running {join_s + 15} s after the start "
                              f"(join_s {join_s}):\n{launch.log()}")
            secs = time.monotonic() - launch.started_at
            log = launch.log()
            check(rc == 1, f"mstar-launch exited {rc}, not 1:\n{log}")
            check(secs < join_s + 10, f"the start failed after {secs:.1f} s, join_s is {join_s}")
            fail = [l for l in log.splitlines() if l.startswith("[mstar-launch]")
                    and "decode-0" in l and re.search(r"fail|exit|did not|never", l)]
            check(fail, f"no mstar-launch line names decode-0 as why the start failed:\n{log}")
            check("serving http" not in log, f"the deployment claimed to serve:\n{log}")
            for pid in launch.node_pids():
                check(not os.path.exists(f"/proc/{pid}") or
                      open(f"/proc/{pid}/stat").read().split()[2] == "Z",
                      f"node pid {pid} is still running after the failed start")
            # On SIGTERM a node stops cleanly and exits 0 (launch/README.md),
            # removing its derived credential (a private key) on the way.
            stopped = [l for l in log.splitlines() if "prefill-0 stopped" in l]
            left = launch.leftover_credentials()
            check(any("exited with status 0" in l for l in stopped) and not left,
                  f"prefill-0, sent SIGTERM while decode-0 failed the start, did not stop "
                  f"cleanly: {stopped}; credentials left in $XDG_RUNTIME_DIR: {left}")
            return f"failed in {secs:.1f} s: {fail[-1][:120]}"
        finally:
            launch.stop()
            holder.close()


def counters(m, *names):
    return {n: m.get(f"mstar:{n}", 0.0) for n in names}


def delta(after, before):
    return {k: after[k] - before[k] for k in after}


XFER = ("handoffs_total", "handoffs_adopted_total", "reroutes_total", "transfer_pulls_total",
        "transfer_failed_total", "transfer_pages_fetched_total", "transfer_pages_local_total",
        "transfer_slots_total")


def kill_decode_mid_transfer():
    """kill -9 of decode-0 while its pull of a handoff is held (the delay
    hook). decode-0 never acknowledged the offer, so prefill-0's lease frees
    the published page and slot; the request waits for decode-0's restart
    and is recomputed there (resumed after its first token); then a new
    request succeeds."""
    lease_s, backoff_s = 3, 5
    prompt, n = PROMPTS[2], 24
    want = reference(prompt, n)
    seen = {}

    def yaml(ports):
        # transfer_s 2: the node waits 2 x transfer_s for the transfer actor,
        # longer than the 2 s hold; lease_s 3 outlasts a held pull.
        return deploy_yaml("pd-kill-xfer", ports, [("prefill-0", "prefill"),
                                                   ("decode-0", "decode")],
                           lease_s=lease_s, transfer_s=2,
                           restart=f"{{max_retries: 3, backoff_s: {backoff_s}}}")

    def body(launch, base, ports):
        pid = launch.node_pid("decode-0")
        before = counters(metrics(base), *XFER)
        join = in_background(lambda: stream(base, prompt, n, timeout=60))
        launch.wait_log(HELD, 20, "decode-0 to log its held pull")
        os.kill(pid, signal.SIGKILL)
        t_kill = time.monotonic()
        # Lease expiry: no one acknowledged the offer, so prefill-0 (now the
        # only node /metrics sums) holds what it published until lease_s.
        wait_until(lambda: metrics(base)["mstar:deployment_nodes_alive"] == 1, 5,
                   "the router to see decode-0 leave")
        held = seen["held"] = used(metrics(base))
        check(held[0] > 0 and held[1] > 0,
              f"right after decode-0's death prefill-0 should still hold the published page(s) "
              f"and slot under its {lease_s} s lease; used (pages, slots) = {held}")

        def freed():
            m = metrics(base)
            check(m["mstar:deployment_nodes_alive"] == 1,
                  f"decode-0 was back before prefill-0's lease ({lease_s} s) freed the pages")
            return used(m) == (0, 0)

        wait_until(freed, lease_s + 3, f"prefill-0's lease ({lease_s} s) to free its published "
                   f"page(s) and slot")
        seen["freed"] = time.monotonic() - t_kill
        check(seen["freed"] > lease_s - 1.5,
              f"the published state was freed {seen['freed']:.1f} s after the kill: before "
              f"the lease ({lease_s} s) ended, so not by the lease")
        text, finish, err = join(60)
        seen["secs"] = time.monotonic() - t_kill
        # Documented: the request waits for decode-0 to rejoin (timeouts.join_s)
        # and completes equal; the client sees no error.
        check(err is None, f"the request failed after decode-0's kill (the router should have "
              f"waited for its restart): {err}; text so far {text!r}")
        check(text == want, f"after decode-0's kill mid-transfer the text differs:\n"
              f"  served:   {text!r}\n  mstar-run: {want!r}")
        launch.wait_rejoined("decode-0")
        d = seen["counters"] = delta(counters(metrics(base), *XFER), before)
        check(d["reroutes_total"] >= 1, f"no re-route counted: {d}")
        assert_pools_free(base, nodes=2)
        got, _ = complete(base, PROMPTS[0], 16)
        check(got == reference(PROMPTS[0], 16), f"the request after decode-0's restart: {got!r}")
        after = counters(metrics(base), *XFER)
        seen["adopted_after"] = after["handoffs_adopted_total"] - before["handoffs_adopted_total"]
        assert_pools_free(base, nodes=2)
        return (f"published (pages, slots) {held} held after the kill, freed "
                f"{seen['freed']:.1f} s later (lease_s {lease_s}); request completed equal "
                f"{seen['secs']:.1f} s after the kill (re-routes {d['reroutes_total']:.0f}); "
                f"the next request adopted over the restarted node: "
                f"{seen['adopted_after']:.0f} adoption(s)")

    return with_launch(yaml, body, killed=["decode-0"],
                       env={"MSTAR_TEST_TRANSFER_DELAY_MS": str(HOLD_MS)})


# A prompt long enough that its handoff spans several pages.
PREFILL_PROMPT = " ".join(f"Paragraph {i}: the river ran past the old mill, and the miller "
                          f"counted his sacks of grain by candlelight." for i in range(60))
# A prefill node's log line for a finished prefill it holds (the hook
# MSTAR_TEST_PREFILL_HOLD_MS): the router still waits for its handoff.
PREFILL_HELD = (r"^\[(prefill-\d)\] .*request \S+: prefill done, held %d ms before its handoff"
                % HOLD_MS)


def kill_prefill():
    """Two prefill nodes and a decode node fronted by decode-0. A: kill -9 the
    prefill node while the router waits for its prefill (held by the hook
    MSTAR_TEST_PREFILL_HOLD_MS): the router re-runs the request on the other
    one. B: kill -9 the prefill node whose published pages decode-0 is
    pulling (held by MSTAR_TEST_TRANSFER_DELAY_MS)."""
    want = reference(PREFILL_PROMPT, 16)
    seen = {}

    def yaml(ports):
        return deploy_yaml("pd-kill-prefill", ports,
                           [("prefill-0", "prefill"), ("prefill-1", "prefill"),
                            ("decode-0", "decode")], front="decode-0", transfer_s=2, lease_s=3)

    def run_and_kill(launch, base, when):
        first = threading.Event()
        join = in_background(lambda: stream(base, PREFILL_PROMPT, 16,
                                            on_chunk=lambda n: first.set(), timeout=180))
        # The victim names itself: the node whose prefill is held. In the
        # sanitizer trees the prefill before it takes nearly 20 s.
        victim = launch.wait_log(PREFILL_HELD, 120, "a prefill node to hold its finished prefill",
                                 after=seen["off"]).group(1)
        if when == "pull":
            launch.wait_log(HELD, 120, "decode-0 to log its held pull", after=seen["off"])
        check(when == "pull" or not first.is_set(), "the first token came before the kill")
        os.kill(launch.node_pid(victim), signal.SIGKILL)
        text, finish, err = join(180)
        check(err is None, f"kill -9 of {victim} ({when}): the request failed: {err}")
        check(text == want, f"kill -9 of {victim} ({when}): the text differs:\n"
              f"  served:   {text!r}\n  mstar-run: {want!r}")
        launch.wait_rejoined(victim, after=seen["off"])
        return victim

    def body(launch, base, ports):
        before = counters(metrics(base), *XFER)
        t0 = time.monotonic()
        seen["off"] = len(launch.log())
        a = run_and_kill(launch, base, "prefill")
        da = delta(counters(metrics(base), *XFER), before)
        other = "prefill-1" if a == "prefill-0" else "prefill-0"
        # The survivor kept its link: before the fix of CAF's OpenSSL error
        # queue (actors/internal/ssl_error_queue.hpp) the front dropped every
        # TLS link when one peer died, and the request ran whole on decode-0.
        check(not re.search(r"node %s joined again" % other, launch.log()[seen["off"]:]),
              f"kill -9 of {a} also dropped the front's link to {other} (`node {other} "
              f"joined again`)")
        check(da["reroutes_total"] == 1 and da["handoffs_total"] == 1
              and da["handoffs_adopted_total"] == 1,
              f"kill -9 of {a} mid-prefill: expected one re-route and one adopted handoff "
              f"from {other}: {da}")
        ta = time.monotonic() - t0
        assert_pools_free(base, nodes=3)
        mid = counters(metrics(base), *XFER)
        t0 = time.monotonic()
        seen["off"] = len(launch.log())
        b = run_and_kill(launch, base, "pull")
        db = delta(counters(metrics(base), *XFER), mid)
        check(db["handoffs_total"] == 1, f"kill -9 of {b} mid-pull: handoffs {db}")
        # The pages live in the dead process's shared-memory segment, which
        # decode-0 maps: the pull may still read them (verified by checksum)
        # or fail and recompute. Either way the text is equal (checked).
        how = ("adopted from the dead node's segment" if db["handoffs_adopted_total"] == 1
               else "recomputed")
        check(db["handoffs_adopted_total"] + db["transfer_failed_total"] == 1,
              f"kill -9 of {b} mid-pull: neither adopted nor recomputed once: {db}")
        tb = time.monotonic() - t0
        assert_pools_free(base, nodes=3)
        return (f"A: {a} killed mid-prefill, re-run on {other} ({da['reroutes_total']:.0f} "
                f"re-route, handed off and adopted; {ta:.1f} s); B: {b} killed during decode-0's held pull: "
                f"{how} ({tb:.1f} s); texts equal, pools free")

    return with_launch(yaml, body, nports=4, killed=["prefill-0", "prefill-1"],
                       env={"MSTAR_TEST_TRANSFER_DELAY_MS": str(HOLD_MS),
                            "MSTAR_TEST_PREFILL_HOLD_MS": str(HOLD_MS)})


def corrupt_transfer():
    """MSTAR_TEST_CORRUPT_TRANSFER=1: every pull's checksum fails, the decode
    node gives back what it adopted and recomputes; the text is equal."""
    prompts = PROMPTS[:3]

    def body(launch, base, ports):
        before = counters(metrics(base), *XFER)
        for i, prompt in enumerate(prompts):
            n = 16 + 4 * i
            got, _ = complete(base, prompt, n)
            want = reference(prompt, n)
            check(got == want, f"corrupted transfer of {prompt!r}: the text differs:\n"
                  f"  served:   {got!r}\n  mstar-run: {want!r}")
        d = delta(counters(metrics(base), *XFER), before)
        k = len(prompts)
        check(d["handoffs_total"] == k, f"{k} requests, handoffs {d}")
        check(d["handoffs_adopted_total"] == 0, f"a corrupted pull was adopted: {d}")
        check(d["transfer_failed_total"] == k, f"{k} corrupted pulls, failed {d}")
        warnings = re.findall(r"^\[decode-0\] .*adopting its prompt failed \((.*)\); recomputing "
                              r"it$", launch.log(), re.M)
        check(len(warnings) == k, f"decode-0 logged {len(warnings)} recompute warning(s), "
              f"not {k}: {warnings}")
        assert_pools_free(base, nodes=2)
        return (f"{k} prompts equal, transfer_failed {d['transfer_failed_total']:.0f}, adopted "
                f"{d['handoffs_adopted_total']:.0f}; decode-0: {warnings[0][:80]!r}")

    return with_launch(lambda p: pd_yaml("pd-corrupt", p), body,
                       env={"MSTAR_TEST_CORRUPT_TRANSFER": "1"})


def local_adoption():
    """The same long prompt twice: the second handoff finds the prompt's full
    pages already cached on decode-0 (from the first request) and fetches
    fewer, with the attention-only fixture and with the hybrid default model
    (its recurrent slot moves whole, the state at the prompt's end)."""
    page_size, n = 16, 8
    prompt = "Mamba meets attention. " * 12  # 276 byte tokens: 17 full pages

    def run(model, label):
        def yaml(ports):
            return deploy_yaml(f"pd-{label}", ports, [("prefill-0", "prefill"),
                                                      ("decode-0", "decode")],
                               model=model, page_size=page_size)

        def body(launch, base, ports):
            want = reference(prompt, n, model=model)
            rounds = []
            for _ in range(2):
                before = counters(metrics(base), *XFER)
                got, _ = complete(base, prompt, n)
                check(got == want, f"{label}: the text differs:\n  served:   {got!r}\n"
                      f"  mstar-run: {want!r}")
                d = delta(counters(metrics(base), *XFER), before)
                check(d["handoffs_adopted_total"] == 1, f"{label}: not adopted: {d}")
                rounds.append((d["transfer_pages_fetched_total"], d["transfer_pages_local_total"]))
            assert_pools_free(base, nodes=2, cached_ok=True)
            m = metrics(base)
            rounds.append(m["mstar:kv_pages_cached"])
            return rounds

        return with_launch(yaml, body)

    *attn, attn_cached = run(ATTN_MODEL, "attn")
    check(attn[0][1] == 0 and attn[0][0] > 0, f"attn, first request: (fetched, local) {attn[0]}")
    check(attn[1][1] > 0 and attn[1][0] < attn[0][0],
          f"attn, the repeated prompt: (fetched, local) {attn[1]}, first {attn[0]}: decode-0 "
          f"did not adopt its cached pages")
    *hybrid, hybrid_cached = run(None, "hybrid")
    check(hybrid[0][1] == 0 and hybrid[0][0] > 0,
          f"hybrid, first request: (fetched, local) {hybrid[0]}")
    check(hybrid[1][1] > 0 and hybrid[1][0] < hybrid[0][0],
          f"hybrid, the repeated prompt: (fetched, local) {hybrid[1]}, first {hybrid[0]}: "
          f"decode-0 did not adopt its cached pages")
    return (f"(pages fetched, local) attn {attn[0]} then {attn[1]} ({attn_cached:.0f} pages "
            f"left cached); hybrid {hybrid[0]} then {hybrid[1]} ({hybrid_cached:.0f} left "
            f"cached)")


def image_chat_bodies():
    """The fixture's chat prompts (tests/fixtures/models/qwen3_5_tiny,
    expected.json) as chat bodies, each image file a PNG / JPEG data URL,
    with transformers' greedy tokens."""
    with open(os.path.join(QWEN_MODEL, "expected.json")) as f:
        expected = json.load(f)
    out = []
    for p in expected["chat_prompts"]:
        messages = json.loads(json.dumps(p["messages"]))
        for m in messages:
            for part in m["content"]:
                if part["type"] != "image_url":
                    continue
                name = part["image_url"]["url"]
                with open(os.path.join(FIXTURES, "images", name), "rb") as img:
                    data = base64.b64encode(img.read()).decode()
                kind = "png" if name.endswith(".png") else "jpeg"
                part["image_url"]["url"] = f"data:image/{kind};base64,{data}"
        body = {"messages": messages, "max_tokens": len(p["generated_ids"]), "temperature": 0,
                "ignore_eos": True, "return_token_ids": True}
        out.append((p["images"], body, p["generated_ids"]))
    return out


def pd_images():
    """Chat requests with images through prefill-0 and decode-0 as processes:
    each answer (token ids and text) equals the same request's on one
    colocated `both` node, and transformers' greedy tokens; every request's
    KV pages and recurrent slot moved from prefill-0 to decode-0."""
    page_size = 16
    cases = image_chat_bodies()

    def answers(base):
        got = []
        for images, body, _ in cases:
            r = post(base + "/v1/chat/completions", body)
            choice = r["choices"][0]
            got.append((choice["token_ids"], choice["message"]["content"],
                        r["usage"]["prompt_tokens"]))
        return got

    def colocated(ports):
        return deploy_yaml("pd-images-one", ports, [("node-0", "both")], model=QWEN_MODEL,
                           page_size=page_size)

    def split(ports):
        return deploy_yaml("pd-images", ports, [("prefill-0", "prefill"), ("decode-0", "decode")],
                           model=QWEN_MODEL, page_size=page_size)

    def pd_body(launch, base, ports):
        before = counters(metrics(base), *XFER)
        got = answers(base)
        d = delta(counters(metrics(base), *XFER), before)
        check(d["handoffs_adopted_total"] == len(cases),
              f"{d['handoffs_adopted_total']:.0f} handoffs adopted for {len(cases)} requests: "
              f"the requests did not go prefill-0 -> decode-0 ({d})")
        check(d["transfer_failed_total"] == 0, f"a transfer failed: {d}")
        m = metrics(base)
        check(m["mstar:request_images_total"] == sum(len(c[0]) for c in cases),
              f"mstar:request_images_total {m['mstar:request_images_total']:.0f}")
        assert_pools_free(base, nodes=2)
        return got, d

    want = with_launch(colocated, lambda launch, base, ports: answers(base), nports=2)
    got, d = with_launch(split, pd_body)
    for (images, _, generated), w, g in zip(cases, want, got):
        check(w[0] == generated, f"{images}: the colocated node's tokens {w[0]} are not "
              f"transformers' {generated}")
        check(g == w, f"{images}: the P/D answer differs from the colocated one:\n"
              f"  P/D:       {g}\n  colocated: {w}")
    return (f"{len(cases)} chat requests, {sum(len(c[0]) for c in cases)} images: P/D equal to "
            f"colocated and transformers; {d['transfer_pages_fetched_total']:.0f} pages fetched")


SCENARIOS = [("pd-local", pd_local), ("local", local),
             ("local-tensor-parallel", local_tensor_parallel),
             ("local-rank-processes", local_rank_processes), ("kill-decode", kill_decode),
             ("tls", tls_mode), ("rogue-peer", rogue_peer), ("bad-yaml", bad_yaml),
             ("never-joins", never_joins), ("kill-decode-mid-transfer", kill_decode_mid_transfer),
             ("kill-prefill", kill_prefill), ("corrupt-transfer", corrupt_transfer),
             ("local-adoption", local_adoption), ("pd-images", pd_images)]


def main():
    global BIN
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if sys.argv[1] == "--list":
        # tests/CMakeLists.txt registers one ctest test per scenario from this.
        print(";".join(name for name, _ in SCENARIOS))
        return
    known = {name for name, _ in SCENARIOS}
    unknown = [name for name in sys.argv[2:] if name not in known]
    if unknown:
        sys.exit(f"unknown scenario(s) {', '.join(unknown)}; the scenarios: {', '.join(sorted(known))}")
    BIN = os.path.join(os.path.abspath(sys.argv[1]), "launcher")
    for b in ("mstar-launch", "mstar-node", "mstar-run"):
        if not os.access(os.path.join(BIN, b), os.X_OK):
            sys.exit(f"missing binary {os.path.join(BIN, b)}")
    only = set(sys.argv[2:])
    failed = []
    t_all = time.monotonic()
    for name, fn in SCENARIOS:
        if only and name not in only:
            continue
        t0 = time.monotonic()
        try:
            note = fn()
            print(f"PASS {name} ({time.monotonic() - t0:.1f} s){': ' + note if note else ''}",
                  flush=True)
        except Exception as e:  # noqa: BLE001 - every scenario runs; report all
            failed.append(name)
            print(f"FAIL {name} ({time.monotonic() - t0:.1f} s): {type(e).__name__}: {e}",
                  flush=True)
    print(f"{'FAILED: ' + ', '.join(failed) if failed else 'all passed'} "
          f"({time.monotonic() - t_all:.1f} s)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
