#!/usr/bin/env python3
"""mstar-launch and mstar-node as real processes: a prefill/decode deployment
(and a single `both` node) against mstar-run's greedy text, a decode node
killed mid-request, tls mode, a peer without the credential, bad files and a
node that never joins.

    python3 pd_processes_test.py BUILD [scenario ...]

BUILD is the build folder (binaries in BUILD/launcher). Standard library
only. Every scenario gets its own temp folder, free ports and YAML; every
wait is bounded; every process started is stopped at the end, on failure
too. Runs all scenarios, prints one line per scenario, exits 1 if any failed.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

BIN = None  # BUILD/launcher, set in main()
PROMPTS = [
    "The quick brown fox",
    "Once upon a time",
    "It was the best of times, it was the worst of times",
    "Call me Ishmael. Some years ago",
]
LONG_PROMPT = "In the beginning"
LONG_TOKENS = 400


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def free_ports(n):
    """n distinct free TCP ports on 127.0.0.1 (bound together, then released)."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


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


def reference(prompt, max_tokens, ignore_eos=False):
    """mstar-run's greedy text for one prompt (the same embedded model)."""
    key = (prompt, max_tokens, ignore_eos)
    if key not in _reference:
        cmd = [os.path.join(BIN, "mstar-run"), "--prompt", prompt, "--max-tokens",
               str(max_tokens), "--temperature", "0", "--json"]
        if ignore_eos:
            cmd.append("--ignore-eos")
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


def assert_pools_free(base, nodes, timeout=10):
    """The pools are back to their free counts: every page and slot but each
    node's sink is free, and the used gauges read 0."""
    last = {}

    def free():
        m = last["m"] = metrics(base)
        return (m["mstar:kv_pages_free"] == m["mstar:kv_pages_total"] - nodes
                and m["mstar:recurrent_slots_free"] == m["mstar:recurrent_slots_total"] - nodes
                and m["mstar:num_requests_running"] == 0
                and m["mstar:num_requests_waiting"] == 0)

    try:
        wait_until(free, timeout, "the pools to be free")
    except Failure:
        m = last["m"]
        raise Failure("pools not back to free counts within %d s (%d node(s), one sink each): "
                      "%s" % (timeout, nodes, {k: v for k, v in m.items() if "pages" in k
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

    def __init__(self, tmp, yaml_text, extra_args=()):
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
        env = dict(os.environ, XDG_RUNTIME_DIR=self.run_dir)
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


def with_launch(yaml_fn, body, nports=3, extra_args=(), killed=()):
    """Runs body(launch, base, ports) on a serving deployment, then stops it
    and checks it exits 0 leaving no node credential behind (but those of the
    nodes in `killed`, which got SIGKILL)."""
    with tempfile.TemporaryDirectory(prefix="mstar-pd-") as tmp:
        ports = free_ports(nports)
        launch = Launch(tmp, yaml_fn(ports), extra_args)
        try:
            base = launch.wait_serving()
            body(launch, base, ports)
            rc = launch.stop()
            check(rc == 0, f"mstar-launch exited {rc} after SIGTERM, not 0:\n{launch.log()}")
            left = {d: f for d, f in launch.leftover_credentials().items()
                    if not any(f"{k}-key.pem" in f for k in killed)}
            check(not left, f"nodes stopped with SIGTERM left their credential in "
                  f"$XDG_RUNTIME_DIR: {left}")
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


def local():
    def yaml(ports):
        return f"""deployment: local
auth: {{mode: secret, secret: "0123456789abcdef0123456789abcdef"}}
http: {{host: 127.0.0.1, port: {ports[0]}}}
timeouts: {{join_s: 20}}
nodes:
  - {{name: node-0, role: both, host: 127.0.0.1, control_port: {ports[1]}}}
"""

    def body(launch, base, ports):
        assert_greedy_equal(base, streaming=False)
        assert_pools_free(base, nodes=1)

    with_launch(yaml, body, nports=2)


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
        # decode-0). The node's SSL_read/SSL_write empty the queue first now
        # (actors/internal/tls_refusal_log.cpp): the link must stay up.
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


SCENARIOS = [("pd-local", pd_local), ("local", local), ("kill-decode", kill_decode),
             ("tls", tls_mode), ("rogue-peer", rogue_peer), ("bad-yaml", bad_yaml),
             ("never-joins", never_joins)]


def main():
    global BIN
    if len(sys.argv) < 2:
        sys.exit(__doc__)
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
