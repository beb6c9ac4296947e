#!/usr/bin/env python3
"""The HTTP serving benchmark (`bench/run serve`; the issue's benchmark section).

Starts mstar-serve on a free loopback port, waits for /health, and drives it
with AIPerf (NVIDIA's load generator, pinned in bench/serve-requirements.txt)
over streaming /v1/completions: closed-loop concurrency levels (1, 4, 16, 64)
and a few Poisson request rates, each a bounded number of requests, so every
run stops by itself. Beside each concurrency level it runs the baseline,
mstar-bench-serve-baseline: the same engine in-process (actors::runtime, what
mstar-serve embeds) under the same number of closed-loop clients, the same
prompt and output lengths and engine limits. The two are interleaved level by
level, so drift on a shared machine hits both alike.

Results: a table with the ratio HTTP / in-process output tokens/s (goal: at
least 0.9 at concurrency 64), JSON at bench/results/serve-<host>-<date>.json
and a plot beside it. Every figure is read from AIPerf's JSON export
(profile_export_aiperf.json) and the baseline's JSON lines, never from screen
output. Exits non-zero if any request failed, came back short, or was missing.

AIPerf runs with HF_HUB_OFFLINE=1: the tokenizer it generates prompts with is
the model folder's tokenizer.json, placed in a private Hugging Face cache; a
folder with mstar's byte tokenizer and no tokenizer.json gets an equivalent
byte-level tokenizer.json written there (ids = byte + offset).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import pathlib
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "scripts"))
from loopback_ports import free_ports  # noqa: E402  (ports below the ephemeral range)

ROOT = pathlib.Path(__file__).resolve().parent.parent
HF_REVISION = "0" * 40
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "vocab.json", "merges.txt", "added_tokens.json", "chat_template.jinja")


def log(msg: str) -> None:
    print(f"serve-bench: {msg}", file=sys.stderr, flush=True)


def die(msg: str) -> None:
    log(f"FAILED: {msg}")
    sys.exit(1)


# ---------------------------------------------------------------- tokenizer

def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (what ByteLevel uses)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    extra = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + extra)
            extra += 1
    return dict(zip(bs, map(chr, cs)))


def byte_tokenizer(offset: int) -> tuple[dict, dict]:
    """tokenizer.json / tokenizer_config.json equal to mstar's byte tokenizer:
    byte b is id b + offset; ids below the offset are <pad>, <s>, </s>."""
    specials = ["<pad>", "<s>", "</s>"][:offset]
    vocab = {t: i for i, t in enumerate(specials)}
    for b, c in bytes_to_unicode().items():
        vocab[c] = b + offset
    level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False}
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for i, t in enumerate(specials)],
        "normalizer": None, "pre_tokenizer": level, "post_processor": None, "decoder": level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1 << 20}
    for key, name in zip(("pad_token", "bos_token", "eos_token"), specials):
        config[key] = name
    return tok, config


def offline_tokenizer(model: pathlib.Path, hf_home: pathlib.Path) -> str:
    """Puts the tokenizer mstar-serve will use into a private HF cache as repo
    mstar/tokenizer (AIPerf loads tokenizers only from the cache when
    HF_HUB_OFFLINE=1). As models/tokenizer.cpp does, a config.json that
    declares `mstar_tokenizer` wins over a tokenizer.json."""
    repo = hf_home / "hub" / "models--mstar--tokenizer"
    snap = repo / "snapshots" / HF_REVISION
    snap.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(HF_REVISION)
    declared = json.loads((model / "config.json").read_text()).get("mstar_tokenizer")
    if declared is None and (model / "tokenizer.json").exists():
        for name in TOKENIZER_FILES:
            if (model / name).exists():
                shutil.copy(model / name, snap / name)
        if not (snap / "tokenizer_config.json").exists():
            (snap / "tokenizer_config.json").write_text(
                json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}))
        return "mstar/tokenizer"
    if declared is None:
        die(f"{model} has no tokenizer.json and declares no mstar_tokenizer")
    if declared == "bytes":
        declared = {"type": "bytes", "offset": 0}
    if declared.get("type") != "bytes":
        die(f"{model}: mstar_tokenizer {declared} is not a byte tokenizer")
    tok, config = byte_tokenizer(int(declared.get("offset", 0)))
    (snap / "tokenizer.json").write_text(json.dumps(tok))
    (snap / "tokenizer_config.json").write_text(json.dumps(config))
    return "mstar/tokenizer"


# ---------------------------------------------------------------- server

class Server:
    def __init__(self, url: str, pid: int):
        self.url, self.pid = url, pid

    def cpu_s(self) -> float:
        """User + system CPU seconds the server has used so far."""
        fields = pathlib.Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    """CPU seconds of this script's finished children and everything they waited for."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@contextlib.contextmanager
def serving(args, work: pathlib.Path):
    """mstar-serve on a free loopback port, up until the block ends."""
    port, = free_ports(1)
    cmd = [str(args.serve), "--model", str(args.model), "--host", "127.0.0.1",
           "--port", str(port), "--device", args.device,
           "--served-model-name", args.served_name] + limits(args) + args.server_arg
    cmd = pinned(args.server_cpus, cmd)
    log("$ " + " ".join(cmd))
    server_log = open(work / "server.log", "wb")
    proc = subprocess.Popen(cmd, stdout=server_log, stderr=subprocess.STDOUT,
                            start_new_session=True, env=engine_env(args))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + args.start_timeout
        while True:
            if proc.poll() is not None:
                die(f"mstar-serve exited with {proc.returncode} before /health answered:\n"
                    + (work / "server.log").read_text(errors="replace")[-4000:])
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            if time.monotonic() > deadline:
                die(f"/health did not answer within {args.start_timeout} s")
            time.sleep(0.2)
        yield Server(url, proc.pid)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        server_log.close()


def engine_env(args) -> dict:
    """The server's and the baseline's environment (the same for both)."""
    env = dict(os.environ)
    if args.blas_threads:
        env["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
    return env


def pinned(cpus: str | None, cmd: list[str]) -> list[str]:
    return ["taskset", "-c", cpus] + cmd if cpus else cmd


def limits(args) -> list[str]:
    return ["--max-running", str(args.max_running),
            "--max-batched-tokens", str(args.max_batched_tokens),
            "--max-pages", str(args.max_pages), "--max-slots", str(args.max_running + 1)]


# ---------------------------------------------------------------- AIPerf

def aiperf(args, server: Server, env: dict, out: pathlib.Path, *, requests: int,
           concurrency: int | None = None, rate: float | None = None) -> dict:
    """One AIPerf run; returns the figures read from its JSON export, and the
    CPU seconds the server and AIPerf (all its processes) used meanwhile."""
    cmd = [str(args.aiperf), "profile", "--model", args.served_name, "--url", server.url,
           "--tokenizer", args.tokenizer_name, "--endpoint-type", "completions",
           "--streaming", "--isl", str(args.isl), "--osl", str(args.osl),
           "--use-legacy-max-tokens", "--use-server-token-count",
           # Greedy, as the in-process baseline draws: the server's default
           # is OpenAI's temperature 1, which samples on the device.
           "--extra-inputs", "ignore_eos:true", "temperature:0", "--prompt-corpus", "sonnet",
           "--request-count", str(requests), "--random-seed", str(args.seed),
           "--ui", "none", "--no-gpu-telemetry", "--no-server-metrics",
           "--artifact-dir", str(out), "--request-timeout-seconds", str(args.request_timeout)]
    if concurrency is not None:
        cmd += ["--concurrency", str(concurrency),
                "--warmup-request-count", str(concurrency)]
    if rate is not None:
        cmd += ["--request-rate", str(rate), "--arrival-pattern", "poisson"]
    if args.aiperf_workers:
        cmd += ["--workers-max", str(args.aiperf_workers)]
    cmd = pinned(args.client_cpus, cmd)
    log("$ " + " ".join(cmd))
    log_path = out.parent / (out.name + ".log")
    with open(log_path, "wb") as f:
        server_cpu, client_cpu = server.cpu_s(), children_cpu_s()
        rc = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT,
                            timeout=args.run_timeout).returncode
        server_cpu, client_cpu = server.cpu_s() - server_cpu, children_cpu_s() - client_cpu
    export = out / "profile_export_aiperf.json"
    if rc != 0 or not export.exists():
        die(f"aiperf exited with {rc} (log: {log_path}):\n"
            + log_path.read_text(errors="replace")[-4000:])
    figures = read_aiperf(json.loads(export.read_text()), requests)
    figures.update(server_cpu_s=server_cpu, client_cpu_s=client_cpu)
    return figures


def read_aiperf(d: dict, requested: int) -> dict:
    def stat(name, key):
        return d.get(name, {}).get(key)

    errors = int(stat("error_request_count", "avg") or 0)
    done = int(stat("request_count", "avg") or 0)
    short = int(stat("osl_mismatch_count", "avg") or 0)
    return {
        "through": "http",
        "requests": done + errors,
        "failed": errors + short + max(0, requested - done - errors),
        "error_summary": d.get("error_summary", []),
        "osl_mismatch": short,
        "duration_s": stat("benchmark_duration", "avg"),
        "output_tokens": stat("total_output_tokens", "avg"),
        "output_tokens_per_s": stat("output_token_throughput", "avg"),
        "requests_per_s": stat("request_throughput", "avg"),
        "ttft_ms_p50": stat("time_to_first_token", "p50"),
        "ttft_ms_p99": stat("time_to_first_token", "p99"),
        "itl_ms_p50": stat("inter_token_latency", "p50"),
        "itl_ms_p99": stat("inter_token_latency", "p99"),
        "e2e_ms_p50": stat("request_latency", "p50"),
        "e2e_ms_p99": stat("request_latency", "p99"),
        "isl_mean": stat("input_sequence_length", "avg"),
        "osl_mean": stat("output_sequence_length", "avg"),
    }


# ---------------------------------------------------------------- baseline

def baseline(args, concurrency: int, requests: int) -> dict:
    cmd = [str(args.baseline), "--model", str(args.model), "--device", args.device,
           "--concurrency", str(concurrency), "--requests", str(requests),
           "--warmup", str(concurrency), "--isl", str(args.isl), "--osl", str(args.osl),
           "--seed", str(args.seed)] + limits(args)
    cmd = pinned(args.server_cpus, cmd)
    log("$ " + " ".join(cmd))
    cpu = children_cpu_s()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.run_timeout,
                       env=engine_env(args))
    cpu = children_cpu_s() - cpu
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    if not lines:
        die(f"the baseline exited with {r.returncode} and no result:\n{r.stderr[-4000:]}")
    return dict(lines[-1], process_cpu_s=cpu)


# ---------------------------------------------------------------- report

def median_of(rounds: list[dict], side: str) -> dict:
    """Each figure's median over the rounds (figures, not whole rounds: the
    tok/s of one round may sit beside the TTFT of another); failures add up."""
    out = dict(rounds[0][side])
    for key, value in rounds[0][side].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = statistics.median(r[side][key] for r in rounds)
    out["failed"] = sum(r[side]["failed"] for r in rounds)
    return out


COLUMNS = [("output_tokens_per_s", "tok/s", "{:,.0f}"), ("ttft_ms_p50", "TTFT p50", "{:.1f}"),
           ("ttft_ms_p99", "p99", "{:.1f}"), ("itl_ms_p50", "ITL p50", "{:.2f}"),
           ("itl_ms_p99", "p99", "{:.2f}"), ("e2e_ms_p50", "E2E p50", "{:.0f}"),
           ("e2e_ms_p99", "p99", "{:.0f}"), ("failed", "failed", "{}")]


def table(results: dict) -> str:
    head = ("| load | path | " + " | ".join(c[1] for c in COLUMNS)
            + " | CPU s: server / AIPerf (in-process: its process) | HTTP / in-process |")
    rows = [head, "|" + " --- |" * (len(COLUMNS) + 4)]

    def cpu(r):
        if "server_cpu_s" in r:
            return f"{r['server_cpu_s']:.1f} / {r['client_cpu_s']:.1f}"
        return f"{r['process_cpu_s']:.1f}" if "process_cpu_s" in r else "-"

    for level in results["concurrency"]:
        for side in ("http", "in_process"):
            r = level[side]
            cells = [c[2].format(r[c[0]]) if r.get(c[0]) is not None else "-" for c in COLUMNS]
            spread = level.get("round_ratios", [])
            ratio = f"{level['ratio']:.3f}" if side == "http" else ""
            if side == "http" and len(spread) > 1:
                ratio += f" ({min(spread):.2f}-{max(spread):.2f})"
            rows.append(f"| C={level['concurrency']} | {side} | " + " | ".join(cells)
                        + f" | {cpu(r)} | {ratio} |")
    for level in results["rates"]:
        r = level["http"]
        cells = [c[2].format(r[c[0]]) if r.get(c[0]) is not None else "-" for c in COLUMNS]
        rows.append(f"| {level['rate']:g} req/s | http | " + " | ".join(cells)
                    + f" | {cpu(r)} |  |")
    rows.append("\nlatencies in ms; ITL = (E2E - TTFT) / (tokens - 1) per request; "
                "tok/s = output tokens / wall time")
    cpu = [f"C={x['concurrency']} {x['cpu_ratio']:.2f}" for x in results["concurrency"]
           if "cpu_ratio" in x]
    if cpu:
        rows.append("CPU seconds of mstar-serve over the in-process process's for the same "
                    "requests: " + ", ".join(cpu))
    if results.get("rounds", 1) > 1:
        rows.append(f"each concurrency: median of {results['rounds']} interleaved rounds per "
                    "figure; the ratio's range over the rounds in brackets")
    return "\n".join(rows)


def plot(results: dict, path: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from matplotlib.ticker import NullFormatter, ScalarFormatter

    levels = results["concurrency"]
    cs = [x["concurrency"] for x in levels]
    fig, ax = plt.subplots(2, 3, figsize=(15, 8.5))

    def concurrency_axis(a):
        a.set_xscale("log")
        a.set_xticks(cs)
        a.xaxis.set_major_formatter(ScalarFormatter())
        a.xaxis.set_minor_formatter(NullFormatter())

    title = (f"mstar-serve ({results['load_generator']['name']} "
             f"{results['load_generator']['version']}) vs in-process, {results['model_name']} "
             f"on {results['device_name']}, ISL {results['isl']} / OSL {results['osl']}")
    if results.get("server_cpus") or results.get("client_cpus"):
        title += (f"\nserver and in-process on CPUs {results.get('server_cpus') or 'all'}, "
                  f"AIPerf on CPUs {results.get('client_cpus') or 'all'}")
    fig.suptitle(title)
    a = ax[0][0]
    a.plot(cs, [x["http"]["output_tokens_per_s"] for x in levels], "o-", label="HTTP (AIPerf)")
    a.plot(cs, [x["in_process"]["output_tokens_per_s"] for x in levels], "s--",
           label="in-process (actors::runtime)")
    a.set(xlabel="concurrency", ylabel="output tokens/s", title="throughput")
    concurrency_axis(a)
    a.legend()
    a = ax[0][1]
    a.plot(cs, [x["ratio"] for x in levels], "o-")
    a.axhline(0.9, color="red", ls=":", label="goal 0.9")
    a.set(xlabel="concurrency", ylabel="HTTP / in-process tok/s",
          title="ratio", ylim=(0, max(1.1, max(x["ratio"] for x in levels) * 1.05)))
    concurrency_axis(a)
    a.legend()
    for a, key, name in ((ax[0][2], "ttft_ms", "TTFT"), (ax[1][0], "itl_ms", "ITL"),
                         (ax[1][1], "e2e_ms", "end to end")):
        for side, style in (("http", "o-"), ("in_process", "s--")):
            for p, alpha in (("p50", 1.0), ("p99", 0.5)):
                a.plot(cs, [x[side][f"{key}_{p}"] for x in levels], style, alpha=alpha,
                       label=f"{side} {p}")
        a.set(yscale="log", xlabel="concurrency", ylabel="ms", title=name)
        concurrency_axis(a)
        a.legend(fontsize=8)
    a = ax[1][2]
    if results["rates"]:
        rs = [x["rate"] for x in results["rates"]]
        a.plot(rs, [x["http"]["output_tokens_per_s"] for x in results["rates"]], "o-",
               label="output tok/s")
        a.set(xlabel="offered request rate (req/s, Poisson)", ylabel="output tokens/s",
              title="request-rate sweep (HTTP)")
        b = a.twinx()
        b.plot(rs, [x["http"]["ttft_ms_p99"] for x in results["rates"]], "r^--",
               label="TTFT p99 (ms)")
        b.set(ylabel="TTFT p99 ms")
        a.legend(loc="upper left")
        b.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# ---------------------------------------------------------------- main

def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="bench/serve_bench.py --replot RESULTS.json redraws "
                                       "a run's plot and table",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=pathlib.Path, default=ROOT / "models/embedded/default")
    p.add_argument("--device", default="cpu")
    p.add_argument("--served-name", default="mstar-bench")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--rates", type=float, nargs="*", default=None,
                   help="request rates (req/s); default: 25, 50 and 90%% of the HTTP "
                        "request throughput at the highest concurrency")
    p.add_argument("--rounds", type=int, default=2,
                   help="HTTP and in-process runs per concurrency, interleaved; medians "
                        "are reported (every round is in the JSON)")
    p.add_argument("--requests-per-client", type=int, default=2,
                   help="requests per concurrency level = this x concurrency (at least 16)")
    p.add_argument("--rate-seconds", type=float, default=10,
                   help="requests per rate = rate x this (at least 16)")
    p.add_argument("--isl", type=int, default=128)
    p.add_argument("--osl", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--max-running", type=int, default=None,
                   help="engine limit on both sides (default: the highest concurrency)")
    p.add_argument("--max-batched-tokens", type=int, default=2048)
    p.add_argument("--max-pages", type=int, default=None,
                   help="KV pages on both sides (default: enough for every running "
                        "request's ISL + OSL, plus one page each)")
    p.add_argument("--server-arg", action="append", default=None,
                   help="extra mstar-serve argument (repeatable), e.g. --server-arg=--no-request-log")
    p.add_argument("--serve", type=pathlib.Path, default=ROOT / "build/launcher/mstar-serve")
    p.add_argument("--baseline", type=pathlib.Path,
                   default=ROOT / "build/bench/mstar-bench-serve-baseline")
    p.add_argument("--aiperf", type=pathlib.Path,
                   default=pathlib.Path(sys.executable).parent / "aiperf")
    p.add_argument("--blas-threads", type=int, default=None,
                   help="OPENBLAS_NUM_THREADS for the server and the baseline alike (default: "
                        "unset, OpenBLAS's own). Its extra threads spin in sched_yield between "
                        "GEMMs, taking CPU the load generator needs on a small machine")
    p.add_argument("--server-cpus", default=None,
                   help="taskset CPU list for mstar-serve and, alike, the in-process baseline")
    p.add_argument("--client-cpus", default=None, help="taskset CPU list for AIPerf")
    p.add_argument("--aiperf-workers", type=int, default=0, help="AIPerf --workers-max (0: its own)")
    p.add_argument("--label", default=socket.gethostname().split(".")[0],
                   help="machine name in the result file names")
    p.add_argument("--out-dir", type=pathlib.Path, default=ROOT / "bench/results")
    p.add_argument("--keep-artifacts", action="store_true",
                   help="keep AIPerf's artifact folders and the server log (printed at the end)")
    p.add_argument("--work-dir", type=pathlib.Path, default=None,
                   help="where AIPerf's artifacts and the server log go (emptied first, "
                        "kept); default: a temporary folder, removed unless --keep-artifacts")
    p.add_argument("--start-timeout", type=float, default=180)
    p.add_argument("--request-timeout", type=float, default=600)
    p.add_argument("--run-timeout", type=float, default=1200,
                   help="seconds one AIPerf or baseline run may take")
    args = p.parse_args()
    args.model = args.model.resolve()
    if args.server_arg is None:
        args.server_arg = []
    args.max_running = args.max_running or max(args.concurrency)
    if args.max_pages is None:
        per = -(-(args.isl + args.osl) // 16) + 1
        args.max_pages = max(4096, args.max_running * per + 64)
    for binary in (args.serve, args.baseline, args.aiperf):
        if not binary.exists():
            die(f"{binary} is missing (bench/run serve builds the binaries and the venv)")
    return args


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--replot":
        src = pathlib.Path(sys.argv[2])
        plot(json.loads(src.read_text()), src.with_suffix(".png"))
        print(table(json.loads(src.read_text())))
        return
    args = parse_args()
    # `timeout` and the device's limit send SIGTERM: unwind, so mstar-serve
    # (in a session of its own) is stopped and the levels so far are saved.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.work_dir:
        shutil.rmtree(args.work_dir, ignore_errors=True)
        args.work_dir.mkdir(parents=True)
        args.keep_artifacts = True
    work = args.work_dir or pathlib.Path(tempfile.mkdtemp(prefix="serve-bench-"))
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HF_HOME=str(work / "hf"), HF_HUB_DISABLE_TELEMETRY="1",
               AIPERF_DISABLE_TELEMETRY="1")
    args.tokenizer_name = offline_tokenizer(args.model, work / "hf")
    version = subprocess.run([str(args.aiperf), "--version"], capture_output=True, text=True,
                             env=env).stdout.strip().split()[-1]
    started = datetime.datetime.now(datetime.timezone.utc)
    results = {
        "bench": "serve", "date": started.isoformat(timespec="seconds"), "host": args.label,
        "load_generator": {"name": "aiperf", "version": version},
        "model": str(args.model), "model_name": args.model.name, "device": args.device,
        "device_name": args.device if args.device == "cpu" else args.device + " (GPU)",
        "cpus": os.cpu_count(), "blas_threads": args.blas_threads or None,
        "server_cpus": args.server_cpus,
        "client_cpus": args.client_cpus, "rounds": args.rounds, "isl": args.isl, "osl": args.osl,
        "limits": {"max_running": args.max_running,
                   "max_batched_tokens": args.max_batched_tokens, "max_pages": args.max_pages},
        "concurrency": [], "rates": [], "complete": False,
        "load_average_before": os.getloadavg(),
    }
    with contextlib.suppress(Exception):
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
        if gpu and args.device != "cpu":
            results["device_name"] = gpu.splitlines()[0]
    stem = f"serve-{args.label}-{args.device.split(':')[0]}-{started:%Y%m%d-%H%M}"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out_json = args.out_dir / f"{stem}.json"

    def save() -> None:
        """Written after every run, so a run cut short still leaves its levels."""
        out_json.write_text(json.dumps(results, indent=1) + "\n")
        if results["concurrency"]:
            out_json.with_suffix(".md").write_text(table(results) + "\n")

    failed = 0
    with serving(args, work) as server:
        for c in args.concurrency:
            n = max(16, args.requests_per_client * c)
            rounds = []
            for r in range(args.rounds):
                http = aiperf(args, server, env, work / f"c{c}-{r}", requests=n, concurrency=c)
                base = baseline(args, c, n)
                rounds.append({"http": http, "in_process": base})
                failed += http["failed"] + base["failed"]
                log(f"C={c} round {r + 1}/{args.rounds}: HTTP {http['output_tokens_per_s']:,.0f} "
                    f"tok/s, in-process {base['output_tokens_per_s']:,.0f} tok/s, failed "
                    f"{http['failed']} + {base['failed']}")
            level = {"concurrency": c, "requests": n, "http": median_of(rounds, "http"),
                     "in_process": median_of(rounds, "in_process"), "rounds": rounds}
            level["ratio"] = (level["http"]["output_tokens_per_s"]
                              / level["in_process"]["output_tokens_per_s"])
            level["round_ratios"] = [x["http"]["output_tokens_per_s"]
                                     / x["in_process"]["output_tokens_per_s"] for x in rounds]
            # CPU seconds for the same work: the server's over the baseline process's.
            level["cpu_ratio"] = (level["http"]["server_cpu_s"]
                                  / level["in_process"]["process_cpu_s"])
            results["concurrency"].append(level)
            save()
        rates = args.rates
        if rates is None:
            top = results["concurrency"][-1]["http"]["requests_per_s"]
            rates = [round(top * f, 2) for f in (0.25, 0.5, 0.9)]
        for rate in rates:
            n = max(16, int(rate * args.rate_seconds))
            http = aiperf(args, server, env, work / f"r{rate:g}", requests=n, rate=rate)
            results["rates"].append({"rate": rate, "requests": n, "http": http})
            failed += http["failed"]
            save()
            log(f"{rate:g} req/s: {http['output_tokens_per_s']:,.0f} tok/s, TTFT p99 "
                f"{http['ttft_ms_p99']:.1f} ms, failed {http['failed']}")
    results["failed_requests"] = failed
    results["load_average_after"] = os.getloadavg()
    at = {x["concurrency"]: x for x in results["concurrency"]}
    top = at.get(64, results["concurrency"][-1])  # the goal is stated at 64
    results["goal"] = {"concurrency": top["concurrency"], "ratio": top["ratio"],
                       "want": 0.9, "met": top["ratio"] >= 0.9}
    results["complete"] = True
    save()
    text = table(results)
    try:
        plot(results, args.out_dir / f"{stem}.png")
    except ImportError as e:
        log(f"no plot ({e})")
    print(text)
    print(f"\nresults: {out_json} (+ .md, .png)")
    if args.keep_artifacts:
        print(f"AIPerf artifacts and server log: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    goal = results["goal"]
    print(f"HTTP / in-process output tok/s at concurrency {goal['concurrency']}: "
          f"{goal['ratio']:.3f} (goal 0.9: {'met' if goal['met'] else 'NOT met'})")
    if failed:
        die(f"{failed} request(s) failed or came back short (see the 'failed' column)")


if __name__ == "__main__":
    main()
