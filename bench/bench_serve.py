#!/usr/bin/env python3
"""bench-serve: tern-serve under open-loop Poisson load, against its own batching modes and the
offline tern-translate, in one run.

For each batching mode (continuous, static, serial) it starts tern-serve on 127.0.0.1, and for
each request size (1 and 16 sentences, drawn in order from the source file, e.g. the test books
corpus/bible/test.es) and each offered load (sentences/s; requests/s = load / size) it sends requests at exponentially
distributed gaps for 10 to 40 seconds, whatever the answers do (open loop: a slow server gets a
queue, not fewer requests), each on a fresh connection; a burst of every sentence at once gives
the throughput at saturation. Per load it prints and writes as a JSON
line: throughput (output words/s of the answered requests over the window), latency p50/p95/p99,
429s and other failures, and the CPU time the server and this load generator took over the
window (both share the machine: a burst's words per server CPU second against offline's words per
CPU second tells the server's own cost from the cores the client takes), and for one-sentence
requests the slowdown: each request's latency over its sentence's lone latency (p50, p99).
Before the load it measures a lone one-sentence request's latency (each sentence once, alone:
p50 and p99), and
the offline reference: tern-translate on the same sentences with the same runtime switches and
threads, its words/s taken from the sentences once and --offline-times over (the difference:
neither the model's load nor a GPU's start-up counts, as neither does for a server already
running; the whole process's rate is kept beside it). Standard library only (asyncio).

With --crowd N (hostile clients), each load runs twice in a row: alone, then with N connections
held open against the server, half idle and half trickling a byte a second into a header that
never ends, each reconnecting as soon as the server lets it go (as an attacker would); before the
second run, /health's latency on a fresh connection with the crowd held (kind "health", p50, p99,
max), and the second run's record carries crowd=N and its p99 over the first's (p99_vs_alone).

  bench/bench_serve.py --model M.tern [--bin build/bin] [--src corpus/bible/test.es]
      [--threads 2 | --workers 2] [--loads 5,10,20] [--sizes 1,16] [--modes continuous,static,serial]
      [--min-requests 40] [--seconds 10,40] [--runtime "--beam 4 --fused-output"]
      [--lone N] [--bursts N] [--crowd N] [--json out.jsonl]
"""
import argparse
import asyncio
import http.client
import json
import os
import random
import re
import resource
import subprocess
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="the .tern model to serve")
    p.add_argument("--bin", default="build/bin", help="folder of tern-serve and tern-translate")
    p.add_argument("--src", default="corpus/bible/test.es", help="source sentences, one a line")
    p.add_argument("--threads", type=int, default=2, help="kernel threads (server and offline)")
    p.add_argument("--workers", type=int, default=1,
                   help="batches decoded at once, a thread each (tern-serve and tern-translate "
                        "--workers, with --threads 1); the serial server, one batch at a time, "
                        "gets --threads of this many instead")
    p.add_argument("--runtime", default="--beam 4 --shortlist-per-sentence --fused-output",
                   help="runtime switches for tern-serve and tern-translate alike")
    p.add_argument("--serve-flags", default="", help="further tern-serve options")
    p.add_argument("--loads", default="5,10,15,20,25,30,40",
                   help="offered sentences/s (requests/s = load / size), comma-separated")
    p.add_argument("--sizes", default="1,16", help="sentences per request, comma-separated")
    p.add_argument("--modes", default="continuous,static,serial")
    p.add_argument("--min-requests", type=int, default=40, help="arrivals per load at least")
    p.add_argument("--seconds", default="10,40",
                   help="MIN,MAX seconds of arrivals per load (enough for --min-requests)")
    p.add_argument("--give-up", type=float, default=20,
                   help="skip a mode's higher loads once its p99 passes this many seconds")
    p.add_argument("--drain", type=float, default=120, help="seconds to wait for the last answers")
    p.add_argument("--offline-times", type=int, default=2,
                   help="the offline rate: the sentences this many times over less once (more "
                        "on a GPU, whose start-up varies more than the sentences take)")
    p.add_argument("--lone", type=int, default=0,
                   help="lone requests: the first N sentences (0: every sentence)")
    p.add_argument("--bursts", type=int, default=1,
                   help="bursts per mode and size; above 1, each after an offline run of its own "
                        "(words/s against it: vs_offline)")
    p.add_argument("--crowd", type=int, default=0,
                   help="each load again with this many idle and trickling connections held open")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", default="", help="append one JSON line per measurement here")
    return p.parse_args()


def percentile(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def words(text):
    return len(text.split())


async def post(port, body):
    """One POST /v1/translate on a fresh connection: (status, parsed body or None, seconds)."""
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = body.encode()
    writer.write(b"POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                 b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    m = re.search(rb"(?i)content-length: *(\d+)", head)
    payload = await reader.readexactly(int(m.group(1))) if m else await reader.read()
    writer.close()
    seconds = time.perf_counter() - start
    try:
        return status, json.loads(payload), seconds
    except ValueError:
        return status, None, seconds


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu(pid):
    """CPU seconds (user + system, all threads) process `pid` has taken so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def request_bodies(lines, size):
    """Requests of `size` consecutive sentences, cycling through the file."""
    bodies, i = [], 0
    while i < len(lines):
        chunk = [lines[(i + j) % len(lines)] for j in range(size)]
        bodies.append(json.dumps({"text": chunk}))
        i += size
    return bodies


async def load(port, bodies, rate, duration, drain, rng, server_pid=None, lone=None):
    """Open-loop Poisson arrivals at `rate` requests/s for `duration` s (rate 0: every body at
    once, a burst); returns the measurement (with the server's CPU time when its pid is given;
    with `lone`, lone latencies by body, the slowdown of each request whose body has one: its
    latency over that body's lone latency)."""
    tasks, sent, t, k = [], [], 0.0, 0
    client_cpu = time.process_time()
    server_cpu = process_cpu(server_pid) if server_pid else 0.0
    start = time.perf_counter()
    if rate == 0:
        tasks = [asyncio.ensure_future(post(port, b)) for b in bodies]
        sent = list(bodies)
    while rate > 0:
        t += rng.expovariate(rate)
        if t > duration:
            break
        delay = start + t - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        sent.append(bodies[k % len(bodies)])
        tasks.append(asyncio.ensure_future(post(port, sent[-1])))
        k += 1
    done, pending = await asyncio.wait(tasks, timeout=drain) if tasks else (set(), set())
    end = time.perf_counter()
    client_cpu = time.process_time() - client_cpu
    server_cpu = process_cpu(server_pid) - server_cpu if server_pid else None
    for p in pending:
        p.cancel()
    latencies, slowdowns, n_words, too_many, failed = [], [], 0, 0, len(pending)
    for task, sent_body in zip(tasks, sent):
        if task not in done:
            continue
        if task.exception() is not None:
            failed += 1
            continue
        status, body, seconds = task.result()
        if status == 200 and body is not None:
            latencies.append(seconds)
            if lone and sent_body in lone:
                slowdowns.append(seconds / lone[sent_body])
            n_words += sum(words(x["text"]) for x in body["translations"])
        elif status == 429:
            too_many += 1
        else:
            failed += 1
    window = end - start  # from the first arrival to the last answer
    return {
        "requests": len(tasks), "answered": len(latencies), "too_many": too_many,
        "failed": failed, "words": n_words, "seconds": window,
        "words_per_second": n_words / window,
        "p50": percentile(latencies, 0.5), "p95": percentile(latencies, 0.95),
        "p99": percentile(latencies, 0.99),
        "slowdown_p50": percentile(slowdowns, 0.5) if slowdowns else None,
        "slowdown_p99": percentile(slowdowns, 0.99) if slowdowns else None,
        "client_cpu_s": client_cpu, "server_cpu_s": server_cpu,
        "words_per_server_cpu_s": n_words / server_cpu if server_cpu else None,
    }


async def crowd_member(port, trickle, stop, counts):
    """One hostile connection, held until `stop` is set: idle, or trickling a byte a second into a
    header that never ends; reconnects whenever the server closes it."""
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            counts["refused"] += 1
            await asyncio.sleep(0.1)
            continue
        counts["connects"] += 1
        try:
            if trickle:
                writer.write(b"POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            while not stop.is_set():
                if trickle:
                    writer.write(b"a")
                    await writer.drain()
                try:
                    if await asyncio.wait_for(reader.read(4096), timeout=1.0) == b"":
                        break  # the server let it go: come back
                except asyncio.TimeoutError:
                    pass
        except OSError:
            pass
        writer.close()


async def health_latencies(port, n):
    """/health on a fresh connection, n times one after another: the seconds of each."""
    seconds = []
    for _ in range(n):
        start = time.perf_counter()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        await writer.drain()
        await reader.read()
        writer.close()
        seconds.append(time.perf_counter() - start)
        await asyncio.sleep(0.05)
    return seconds


async def load_with_crowd(port, n, bodies, rate, duration, drain, rng, server_pid, lone):
    """`load` while n hostile connections are held (crowd_member), after /health's latencies."""
    stop, counts = asyncio.Event(), {"connects": 0, "refused": 0}
    members = [asyncio.ensure_future(crowd_member(port, i % 2 == 1, stop, counts))
               for i in range(n)]
    while counts["connects"] < n:
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)
    health = await health_latencies(port, 20)
    result = await load(port, bodies, rate, duration, drain, rng, server_pid, lone)
    stop.set()
    await asyncio.gather(*members, return_exceptions=True)
    return health, result, counts


class Server:
    def __init__(self, args, mode):
        cmd = [os.path.join(args.bin, "tern-serve"), "--model", "bench=" + args.model,
               "--listen", "127.0.0.1:0", "--batching", mode,
               "--max-queue-tokens", "200000", "--timeout", "300"] + threading(args, mode)
        cmd += args.runtime.split() + args.serve_flags.split()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r":(\d+)\s*$", line)
        if not m:
            raise SystemExit("bench-serve: tern-serve did not start: " + line +
                             self.proc.stderr.read())
        self.port = int(m.group(1))
        while True:  # ready
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/ready")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.05)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=300)


def threading(args, mode):
    """The threads switches of a server in `mode` ("offline": tern-translate)."""
    if args.workers <= 1:
        return ["--threads", str(args.threads)]
    if mode == "serial":  # one request at a time: its products split over the cores
        return ["--threads", str(max(args.threads, args.workers))]
    return ["--workers", str(args.workers), "--threads", "1"]


def offline(args, lines):
    """tern-translate on the same sentences, threads and switches: output words/s of the sentences
    decoded again (words and seconds of a run on them --offline-times over, less a run on them
    once), and of the whole process on them once."""
    cmd = [os.path.join(args.bin, "tern-translate"), "--model", args.model] + \
        threading(args, "offline") + args.runtime.split()
    runs = []
    for times in (1, max(2, args.offline_times)):
        src = "\n".join(lines * times) + "\n"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        out = subprocess.run(cmd, input=src, capture_output=True, text=True, check=True).stdout
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        runs.append((sum(words(line) for line in out.splitlines()), wall, cpu))
    (once, once_s, once_cpu), (many, many_s, many_cpu) = runs
    return {"words": many - once, "seconds": many_s - once_s,
            "words_per_second": (many - once) / max(many_s - once_s, 1e-9),
            "cpu_s": many_cpu - once_cpu,
            "words_per_cpu_s": (many - once) / max(many_cpu - once_cpu, 1e-9),
            "process_seconds": once_s, "process_words_per_second": once / once_s}


def emit(args, record):
    line = json.dumps(record, sort_keys=True)
    if record["kind"] in ("load", "burst"):
        print("%-10s %2d sentences  %6.2f req/s: %7.1f words/s  p50 %6.3f s  p95 %6.3f s  "
              "p99 %6.3f s  429: %d  failed: %d  cores: server %.2f, client %.2f" % (
                  record["mode"], record["size"], record["rate"], record["words_per_second"],
                  record["p50"], record["p95"], record["p99"], record["too_many"],
                  record["failed"], (record["server_cpu_s"] or 0) / record["seconds"],
                  record["client_cpu_s"] / record["seconds"]) +
              ("  slowdown p50 %.2f p99 %.2f" % (record["slowdown_p50"], record["slowdown_p99"])
               if record.get("slowdown_p99") is not None else ""), file=sys.stderr, flush=True)
    elif record["kind"] == "offline":
        print("%-10s offline: %7.1f words/s, %.2f cores, %7.1f words per CPU second" % (
            record["mode"], record["words_per_second"], record["cpu_s"] / record["seconds"],
            record["words_per_cpu_s"]), file=sys.stderr, flush=True)
    print(line, flush=True)
    if args.json:
        with open(args.json, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def main():
    args = parse_args()
    # A burst opens a connection per request at once: past a soft limit of 1024 descriptors.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass  # as many as the soft limit allows
    with open(args.src, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    loads = [float(r) for r in args.loads.split(",")]
    low, high = (float(x) for x in args.seconds.split(","))
    sizes = [int(s) for s in args.sizes.split(",")]
    common = {"model": args.model, "threads": args.threads, "workers": args.workers,
              "serve_flags": args.serve_flags,
              "runtime": args.runtime,
              "sentences": len(lines), "run": time.strftime("%Y-%m-%dT%H:%M:%S")}
    rng = random.Random(args.seed)
    for mode in args.modes.split(","):
        # The offline reference before each mode, so that drifts in the machine's speed hit both.
        emit(args, dict(common, kind="offline", mode=mode, **offline(args, lines)))
        server = Server(args, mode)
        try:
            # A lone one-sentence request's latency: every sentence once, one at a time, nothing
            # else running (p99: the long sentences' own time, the floor of any p99 under load).
            alone = lines[:args.lone] if args.lone > 0 else lines
            lone, lone_by_body = [], {}
            for s in alone:
                body = json.dumps({"text": [s]})
                lone.append(asyncio.run(post(server.port, body))[2])
                lone_by_body[body] = lone[-1]
            emit(args, dict(common, kind="lone", mode=mode, p50=percentile(lone, 0.5),
                            p95=percentile(lone, 0.95), p99=percentile(lone, 0.99),
                            mean=sum(lone) / len(lone)))
            for size in sizes:
                bodies = request_bodies(lines, size)
                # Every sentence at once: the throughput at saturation, against offline. With
                # --bursts N, N bursts, each right after an offline run of its own (the server
                # idles meanwhile), so that each ratio compares two runs a few seconds apart.
                ratios = []
                for b in range(args.bursts):
                    pair = {}
                    if args.bursts > 1:
                        ref = offline(args, lines)
                        pair = {"offline_words_per_second": ref["words_per_second"],
                                "offline_words_per_cpu_s": ref["words_per_cpu_s"]}
                    result = asyncio.run(load(server.port, bodies, 0, 0, args.drain, rng,
                                              server.proc.pid, lone_by_body))
                    if pair:
                        pair["vs_offline"] = (result["words_per_second"] /
                                              pair["offline_words_per_second"])
                        ratios.append(pair["vs_offline"])
                    emit(args, dict(common, kind="burst", mode=mode, size=size, rate=0, load=0,
                                    burst=b + 1, **result, **pair))
                if ratios:
                    print("%-10s %2d sentences: bursts against offline run before each: median "
                          "%.3f, range %.3f-%.3f over %d" % (
                              mode, size, percentile(ratios, 0.5), min(ratios), max(ratios),
                              len(ratios)), file=sys.stderr, flush=True)
                for offered in loads:
                    rate = offered / size
                    duration = min(high, max(low, args.min_requests / rate))
                    result = asyncio.run(load(server.port, bodies, rate, duration, args.drain,
                                              rng, server.proc.pid, lone_by_body))
                    emit(args, dict(common, kind="load", mode=mode, size=size, rate=rate,
                                    load=offered, duration=duration, **result))
                    if args.crowd > 0:
                        health, held, counts = asyncio.run(load_with_crowd(
                            server.port, args.crowd, bodies, rate, duration, args.drain, rng,
                            server.proc.pid, lone_by_body))
                        emit(args, dict(common, kind="health", mode=mode, crowd=args.crowd,
                                        p50=percentile(health, 0.5), p99=percentile(health, 0.99),
                                        max=max(health), crowd_connects=counts["connects"],
                                        crowd_refused=counts["refused"]))
                        print("%-10s /health with a crowd of %d: p50 %.4f s, p99 %.4f s, max "
                              "%.4f s" % (mode, args.crowd, percentile(health, 0.5),
                                          percentile(health, 0.99), max(health)),
                              file=sys.stderr, flush=True)
                        emit(args, dict(common, kind="load", mode=mode, size=size, rate=rate,
                                        load=offered, duration=duration, crowd=args.crowd,
                                        p99_vs_alone=held["p99"] / result["p99"], **held))
                    if result["p99"] > args.give_up or result["failed"] > 0:
                        break  # saturated well past the point of measuring
        finally:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
