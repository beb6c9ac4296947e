#!/usr/bin/env python3
"""Disaggregated prefill/decode across two "hosts": two network namespaces
joined by a veth pair, created and removed by this test.

    python3 pd_netns_test.py BUILD

Starts BUILD/launcher/mstar-node twice (prefill-0, the front, in namespace A;
decode-0 in namespace B) on one deployment file, then from inside A:
- greedy completions equal `mstar-run` for the same prompts, every one handed
  off and adopted (the decode node pulled the KV pages and recurrent slots
  over UCX's TCP transport across the veth, whose byte counter grew);
- the decode node killed (SIGKILL) in the middle of a streaming request: the
  stream ends with an error or waits; the node restarted, a new request
  succeeds with the right text, and the pools are free again within lease_s
  (the front's /metrics sums the engine stats of every node it reaches);
- every GET /metrics answers within METRICS_S.
Standard library only. Exit 0 passed, 1 failed, 77 skipped (not root, no
`ip`, namespaces cannot be made here). Every namespace and process it made is
removed, also on failure.
"""
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
MAX_TOKENS = 24
LONG_TOKENS = 300
PROMPTS = [
    "It was a dark and stormy night",
    "The old captain looked at the sea and said",
    "In the morning the village was quiet, and",
]
JOIN_S, TRANSFER_S, LEASE_S = 10, 5, 5
METRICS_S = 1.0  # what one GET /metrics may take


class Skip(Exception):
    pass


def log(*parts):
    print("pd_netns:", *parts, flush=True)


def ip_binary():
    for path in ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"):
        if os.access(path, os.X_OK):
            return path
    return shutil.which("ip")


class NetnsPair:
    """Namespaces A and B, a veth pair between them (10.232.X.1/24 in A,
    .2/24 in B), lo up in each. close() removes what was made."""

    def __init__(self):
        pid = os.getpid()
        tag = str(pid % 100000)
        self.ns = ["mstar-pa-" + tag, "mstar-pb-" + tag]
        self.veth = ["mpa" + tag, "mpb" + tag]
        subnet = "10.232.%d." % (pid % 250)
        self.addr = [subnet + "1", subnet + "2"]
        self.made = 0
        self.ip = ip_binary()

    def create(self):
        if os.geteuid() != 0:
            raise Skip("not root: network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN")
        if not self.ip:
            raise Skip("no `ip` binary (iproute2) to create network namespaces")
        for k in range(2):
            err = self.run("netns", "add", self.ns[k])
            if err:
                raise Skip("cannot create a network namespace here: " + err)
            self.made += 1
        err = self.run("link", "add", self.veth[0], "type", "veth", "peer", "name", self.veth[1])
        if err:
            raise Skip("cannot create a veth pair: " + err)
        for k in range(2):
            for step in (["link", "set", self.veth[k], "netns", self.ns[k]],
                         ["-n", self.ns[k], "addr", "add", self.addr[k] + "/24", "dev", self.veth[k]],
                         ["-n", self.ns[k], "link", "set", self.veth[k], "up"],
                         ["-n", self.ns[k], "link", "set", "lo", "up"]):
                err = self.run(*step)
                if err:
                    raise RuntimeError("ip %s: %s" % (" ".join(step), err))

    def run(self, *args):
        """"" or what `ip ARGS` printed when it failed."""
        try:
            p = subprocess.run([self.ip, *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as e:
            return str(e)
        return "" if p.returncode == 0 else (p.stderr.strip() or "exit %d" % p.returncode)

    def exec_argv(self, k, argv):
        return [self.ip, "netns", "exec", self.ns[k], *argv]

    def veth_bytes(self, k, which):
        path = "/sys/class/net/%s/statistics/%s_bytes" % (self.veth[k], which)
        out = subprocess.run(self.exec_argv(k, ["cat", path]), capture_output=True, text=True,
                             timeout=10, check=True).stdout
        return int(out.strip())

    def close(self):
        # Deleting a namespace destroys the veth end inside it, and the pair.
        for k in range(self.made):
            err = self.run("netns", "del", self.ns[k])
            if err:
                log("warning: ip netns del %s: %s" % (self.ns[k], err))
        self.made = 0


class Node:
    """One mstar-node in one namespace, output to files in the temp dir."""

    def __init__(self, net, k, binary, config, name, workdir):
        self.net, self.k, self.name = net, k, name
        self.argv = net.exec_argv(k, [binary, "--config", config, "--node", name])
        self.workdir = workdir
        self.proc = None
        self.starts = 0

    def start(self):
        self.starts += 1
        base = os.path.join(self.workdir, "%s.%d" % (self.name, self.starts))
        self.out_path, self.err_path = base + ".out", base + ".err"
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            # `ip netns exec` execs the node: the pid is the node's. Its own
            # session, so stop() reaches anything it starts.
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=err, start_new_session=True)

    def wait_line(self, pattern, deadline):
        """The first match of `pattern` on its stdout, before `deadline`."""
        rx = re.compile(pattern, re.M)
        while time.monotonic() < deadline:
            with open(self.out_path, "r", errors="replace") as f:
                m = rx.search(f.read())
            if m:
                return m
            if self.proc.poll() is not None:
                raise AssertionError("%s exited (%d) before printing /%s/\n%s" %
                                     (self.name, self.proc.returncode, pattern, self.tail()))
            time.sleep(0.05)
        raise AssertionError("%s did not print /%s/ in time\n%s" % (self.name, pattern, self.tail()))

    def tail(self, n=15):
        text = []
        for path in (self.out_path, self.err_path):
            try:
                with open(path, "r", errors="replace") as f:
                    lines = f.read().splitlines()[-n:]
            except OSError:
                continue
            text += ["  [%s %s] %s" % (self.name, os.path.basename(path), l) for l in lines]
        return "\n".join(text)

    def kill9(self):
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self, grace=10):
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            log("%s ignored SIGTERM for %ds: SIGKILL" % (self.name, grace))
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        except ProcessLookupError:
            self.proc.wait(timeout=10)


# Runs inside namespace A: one HTTP request; prints the status line, then the
# body (streamed line by line, flushed, when the request streams).
CLIENT = r"""
import http.client, sys
host, port, method, path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
body = sys.argv[5] if len(sys.argv) > 5 else None
c = http.client.HTTPConnection(host, port, timeout=float(sys.argv[6]) if len(sys.argv) > 6 else 30)
c.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
r = c.getresponse()
print("HTTP", r.status, flush=True)
while True:
    line = r.readline()
    if not line:
        break
    sys.stdout.write(line.decode("utf-8", "replace"))
    sys.stdout.flush()
"""


class Front:
    def __init__(self, net, host, port):
        self.net, self.host, self.port = net, host, port
        self.slow_metrics = []  # (when, seconds) of each GET /metrics over METRICS_S

    def argv(self, method, path, body=None, timeout=30):
        args = [sys.executable, "-c", CLIENT, self.host, str(self.port), method, path]
        if body is not None:
            args += [json.dumps(body), str(timeout)]
        return self.net.exec_argv(0, args)

    def request(self, method, path, body=None, timeout=30):
        p = subprocess.run(self.argv(method, path, body, timeout), capture_output=True, text=True,
                           timeout=timeout + 10)
        if p.returncode != 0 or not p.stdout.startswith("HTTP "):
            raise AssertionError("%s %s failed (%d): %s%s" % (method, path, p.returncode, p.stdout,
                                                             p.stderr))
        status, _, rest = p.stdout.partition("\n")
        return int(status.split()[1]), rest

    def complete(self, prompt, max_tokens=MAX_TOKENS):
        status, body = self.request("POST", "/v1/completions",
                                    {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0})
        if status != 200:
            raise AssertionError("completion of %r: HTTP %d %s" % (prompt, status, body))
        return json.loads(body)["choices"][0]["text"]

    def metrics(self, when=""):
        start = time.monotonic()
        status, body = self.request("GET", "/metrics")
        took = time.monotonic() - start
        if took > METRICS_S:
            self.slow_metrics.append((when, took))
        assert status == 200, "GET /metrics: HTTP %d" % status
        values = {}
        for line in body.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                values[name] = float(value)
        return values


def reference_texts(build, prompts, max_tokens):
    """mstar-run's greedy completions (--json: the completion alone, exact)."""
    argv = [os.path.join(build, "launcher", "mstar-run"), "--max-tokens", str(max_tokens),
            "--temperature", "0", "--json"]
    for p in prompts:
        argv += ["--prompt", p]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
    texts = [json.loads(l)["text"] for l in out.splitlines() if l.startswith("{")]
    assert len(texts) == len(prompts), "mstar-run printed %d results for %d prompts:\n%s" % (
        len(texts), len(prompts), out)
    return dict(zip(prompts, texts))


def write_deployment(workdir, net):
    secret = os.path.join(workdir, "secret.txt")
    fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    path = os.path.join(workdir, "deploy.yaml")
    with open(path, "w") as f:
        f.write("""deployment: pd-netns
device: cpu
auth: {mode: secret, secret_file: secret.txt}
http: {host: %(a)s, port: 8000}
timeouts: {join_s: %(join)d, transfer_s: %(transfer)d, request_s: 60}
lease_s: %(lease)d
nodes:
  - name: prefill-0
    role: prefill
    host: %(a)s
    control_port: 7101
    pools: {kv_pages: 256, max_slots: 17}
  - name: decode-0
    role: decode
    host: %(b)s
    control_port: 7101
    pools: {kv_pages: 256, max_slots: 17}
front: prefill-0
""" % {"a": net.addr[0], "b": net.addr[1], "join": JOIN_S, "transfer": TRANSFER_S,
       "lease": LEASE_S})
    return path


def start_all(prefill, decode):
    deadline = time.monotonic() + 30
    prefill.start()
    decode.start()
    for n in (prefill, decode):
        n.wait_line(r"^mstar-node %s: ready control=\S+:\d+$" % n.name, deadline)
    m = prefill.wait_line(r"^mstar-node prefill-0: serving http://([\d.]+):(\d+)$", deadline)
    return m.group(1), int(m.group(2))


def check_completions(front, expected, net):
    before = net.veth_bytes(0, "tx")
    for prompt, want in expected.items():
        got = front.complete(prompt)
        assert got == want, "prompt %r:\n  served   %r\n  mstar-run %r" % (prompt, got, want)
        log("ok %r -> %r" % (prompt, got))
    crossed = net.veth_bytes(0, "tx") - before
    m = front.metrics("after the first requests")
    handoffs, adopted = m.get("mstar:handoffs_total"), m.get("mstar:handoffs_adopted_total")
    log("handoffs_total %s, handoffs_adopted_total %s, veth %s tx %d bytes (%.1f KiB)" %
        (handoffs, adopted, net.veth[0], crossed, crossed / 1024))
    assert handoffs == len(expected), "handoffs_total %s, want %d" % (handoffs, len(expected))
    assert adopted == len(expected), "handoffs_adopted_total %s, want %d" % (adopted, len(expected))
    assert crossed > 300 * 1024, "only %d bytes left namespace A over the veth" % crossed


def wait_pools_free(front, since, bound, when):
    """Seconds from `since` to the start of the first GET /metrics that reads
    no KV page and no recurrent slot in use (the call's own duration is
    checked against METRICS_S apart)."""
    while True:
        start = time.monotonic()
        m = front.metrics(when)
        kv, slots = m.get("mstar:kv_pages_used"), m.get("mstar:recurrent_slots_used")
        if kv == 0 and slots == 0:
            return start - since
        if time.monotonic() > since + bound:
            raise AssertionError("pools not free %.1f s %s: kv_pages_used %s, "
                                 "recurrent_slots_used %s" % (bound, when, kv, slots))
        time.sleep(0.2)


def stream_text(lines):
    """The completion text of SSE lines; the error events apart."""
    text, errors = "", []
    for line in lines:
        if not line.startswith("data: {"):
            continue
        event = json.loads(line[len("data: "):])
        if "error" in event:
            errors.append(event["error"])
        for choice in event.get("choices", []):
            text += choice.get("text", "")
    return text, errors


def kill_decode_mid_stream(front, decode):
    """SIGKILLs decode-0 after a few deltas of a long stream. Returns the
    client (still reading), the lines it read and when the kill was."""
    body = {"prompt": PROMPTS[0], "max_tokens": LONG_TOKENS, "temperature": 0, "stream": True}
    client = subprocess.Popen(front.argv("POST", "/v1/completions", body, timeout=60),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    deadline = time.monotonic() + 20
    while len([l for l in seen if l.startswith("data: {")]) < 5:
        line = client.stdout.readline()
        assert line and time.monotonic() < deadline, "stream ended early: %r %s" % (
            seen, client.stderr.read())
        seen.append(line.strip())
    assert seen[0] == "HTTP 200", "stream: %r" % seen
    decode.kill9()
    killed_at = time.monotonic()
    log("decode-0 SIGKILLed after %d stream deltas" % (len(seen) - 1))
    return client, seen, killed_at


def stream_rest(client, wait_s):
    """The rest of the stream, read for at most wait_s (then the client is
    stopped), and whether it was still open. Reads through the same buffered
    stdout as kill_decode_mid_stream: communicate() would read the pipe
    beneath it and lose what readline() had already buffered."""
    stopped = threading.Event()

    def stop():
        stopped.set()
        client.kill()

    timer = threading.Timer(wait_s, stop)
    timer.start()
    try:
        lines = [l.strip() for l in client.stdout]
    finally:
        timer.cancel()
    client.wait()
    client.stderr.read()
    return lines, stopped.is_set()


def run(build):
    node_bin = os.path.join(build, "launcher", "mstar-node")
    for b in (node_bin, os.path.join(build, "launcher", "mstar-run")):
        if not os.access(b, os.X_OK):
            raise AssertionError("no binary %s" % b)
    t0 = time.monotonic()
    expected = reference_texts(build, PROMPTS, MAX_TOKENS)
    long_expected = reference_texts(build, PROMPTS[:1], LONG_TOKENS)
    net = NetnsPair()
    nodes = []
    workdir = tempfile.mkdtemp(prefix="mstar-pd-netns-")
    ok = False
    try:
        net.create()
        log("namespaces %s (%s, %s) and %s (%s, %s)" % (net.ns[0], net.veth[0], net.addr[0],
                                                       net.ns[1], net.veth[1], net.addr[1]))
        config = write_deployment(workdir, net)
        prefill = Node(net, 0, node_bin, config, "prefill-0", workdir)
        decode = Node(net, 1, node_bin, config, "decode-0", workdir)
        nodes = [prefill, decode]
        host, port = start_all(prefill, decode)
        assert host == net.addr[0], "front serves on %s, want %s" % (host, net.addr[0])
        front = Front(net, host, port)
        log("both nodes joined, front serving http://%s:%d (%.1f s)" % (host, port,
                                                                         time.monotonic() - t0))
        check_completions(front, expected, net)

        client, head, killed_at = kill_decode_mid_stream(front, decode)
        m = front.metrics("just after the kill")
        log("just after the kill: kv_pages_used %s, recurrent_slots_used %s, nodes_alive %s" % (
            m.get("mstar:kv_pages_used"), m.get("mstar:recurrent_slots_used"),
            m.get("mstar:deployment_nodes_alive")))
        freed_after = wait_pools_free(front, killed_at, LEASE_S + 1.5, "after the kill")
        log("pools free %.2f s after the kill (lease_s %d)" % (freed_after, LEASE_S))
        decode.start()
        decode.wait_line(r"^mstar-node decode-0: ready control=\S+:\d+$",
                         time.monotonic() + 30)
        log("decode-0 restarted and ready")
        rest, waiting = stream_rest(client, JOIN_S + TRANSFER_S + 10)
        text, errors = stream_text(head + rest)
        done = [l for l in rest if l][-1:] == ["data: [DONE]"]
        log("interrupted stream: %s, %d chars, errors %r" % (
            "still open, client stopped" if waiting else "ended" + (" with [DONE]" if done else ""),
            len(text), errors))
        assert waiting or errors or done, "the interrupted stream ended with neither an error " \
            "nor [DONE]: %r" % rest[-5:]
        if done and not errors:
            want = long_expected[PROMPTS[0]]
            assert text == want, "the stream rerouted after the kill differs from mstar-run:\n" \
                "  streamed  %r\n  mstar-run %r" % (text, want)
            log("the rerouted stream equals mstar-run's %d tokens" % LONG_TOKENS)

        before = front.metrics("after the interrupted stream")
        prompt = PROMPTS[1]
        got = front.complete(prompt)
        assert got == expected[prompt], "after restart %r:\n  served   %r\n  mstar-run %r" % (
            prompt, got, expected[prompt])
        m = front.metrics("after the restart")
        log("after restart ok %r; handoffs_total %s, adopted %s, reroutes %s" % (
            got, m.get("mstar:handoffs_total"), m.get("mstar:handoffs_adopted_total"),
            m.get("mstar:reroutes_total")))
        for name in ("mstar:handoffs_total", "mstar:handoffs_adopted_total"):
            assert m.get(name) == before.get(name) + 1, "%s went from %s to %s over the request " \
                "after the restart, want +1" % (name, before.get(name), m.get(name))
        wait_pools_free(front, time.monotonic(), LEASE_S + 1.5, "after the last request")
        assert not front.slow_metrics, "GET /metrics took longer than %.1f s: %s" % (
            METRICS_S, ", ".join("%.2f s (%s)" % (t, w) for w, t in front.slow_metrics))
        ok = True
        log("passed in %.1f s" % (time.monotonic() - t0))
    finally:
        for n in reversed(nodes):
            n.stop()
        if not ok:
            for n in nodes:
                if n.proc is not None:
                    print(n.tail(), file=sys.stderr)
        net.close()
        shutil.rmtree(workdir, ignore_errors=True)


def main():
    if len(sys.argv) != 2:
        print("usage: pd_netns_test.py BUILD", file=sys.stderr)
        return 2
    try:
        run(os.path.abspath(sys.argv[1]))
    except Skip as e:
        print("SKIP: " + str(e), flush=True)
        return SKIP
    except AssertionError as e:
        print("FAIL: %s" % e, file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
