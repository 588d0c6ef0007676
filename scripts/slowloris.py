#!/usr/bin/env python
"""The slowloris bar of issue 38 (section 2), on loopback only: does `serve-env` (or `view`) keep
answering while clients hold more half-sent requests than it has file descriptors?

    python scripts/slowloris.py             # 22,000 from 2 clients vs 20,000 fds, held 60 s
    python scripts/slowloris.py --target view --connections 4000 --server-fds 2048 --seconds 20

It starts the server with RLIMIT_NOFILE = --server-fds, then --clients attacker processes that
together open --connections connections to it (a ramp of at most --ramp-seconds) and then hold
them for --seconds. Each connection sends a request line and one header line, then one more
header line every 5 s, never finishing; a dropped connection is opened again at once (at most
1024 connects in flight per client). Meanwhile a fresh client asks the server's probe path
(/health; /api/runs for view) every 0.5 s.

The bar (exit 0), in both phases: every probe answers within 5 s, the server lives, and its log
(stdout + stderr) stays under 1 MB, with more connections attempted than the server has
descriptors. How many the attackers hold at once (client view: established, accepted or still in
the kernel's queue) is reported: the server's header timeout and connection cap decide it. Bounded: at
most --connections sockets (capped at 60,000), --seconds and --ramp-seconds (capped at 600
each), loopback only. Needs a hard RLIMIT_NOFILE of at least connections / clients + 512.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
BAR_S, LOG_BAR = 5.0, 1 << 20


def _limit_fds(n: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    return apply


async def _hold_one(port: int, stats: dict, until: float, gate: asyncio.Semaphore) -> None:
    while time.monotonic() < until:
        try:
            async with gate:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), 10)
        except (OSError, asyncio.TimeoutError):
            stats["failed"] += 1
            await asyncio.sleep(0.5)
            continue
        stats["open"] += 1
        stats["opened"] += 1
        stats["peak"] = max(stats["peak"], stats["open"])
        try:
            writer.write(f"GET /health HTTP/1.1\r\nHost: {HOST}\r\n".encode())
            while time.monotonic() < until:
                try:
                    if not await asyncio.wait_for(reader.read(1024), 5.0):
                        break  # the server closed it
                except asyncio.TimeoutError:
                    writer.write(b"X-a: b\r\n")  # one more header line, never the blank line
        except OSError:
            pass
        finally:
            stats["open"] -= 1
            stats["dropped"] += 1
            writer.transport.abort()


async def _attack(port: int, connections: int, seconds: float) -> None:
    stats = {"open": 0, "opened": 0, "dropped": 0, "failed": 0, "peak": 0}
    until = time.monotonic() + seconds
    gate = asyncio.Semaphore(1024)
    tasks = [asyncio.create_task(_hold_one(port, stats, until, gate)) for _ in range(connections)]
    while time.monotonic() < until:
        await asyncio.sleep(1.0)
        print(json.dumps(stats), flush=True)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    print(json.dumps(stats), flush=True)


def attacker(port: int, connections: int, seconds: float) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, connections + 512), hard))
    asyncio.run(_attack(port, connections, seconds))


def start_server(target: str, fds: int, log, workdir: Path) -> tuple[subprocess.Popen, int, str]:
    cli = [sys.executable, "-m", "reinagent.cli"]
    if target == "view":
        (workdir / "runs").mkdir(exist_ok=True)
        args, path, pattern = [*cli, "view", str(workdir / "runs"), "--port", "0"], "/api/runs", r"http://127\.0\.0\.1:(\d+)/"
    else:
        args, path, pattern = ([*cli, "serve-env", "--benchmark", "hotpotqa", "--port", "0"], "/health",
                               r"on http://127\.0\.0\.1:(\d+)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True,
                            preexec_fn=_limit_fds(fds))
    line = proc.stdout.readline()
    log.write(line.encode())
    found = re.search(pattern, line)
    if not found:
        proc.kill()
        raise SystemExit(f"the server did not start: {line!r}")
    return proc, int(found.group(1)), path


def probe(port: int, path: str) -> float | None:
    """Seconds a fresh client took to get an answer (any status), or None (no answer in 30 s)."""
    start = time.monotonic()
    try:
        with httpx.Client(timeout=30) as client:
            client.get(f"http://{HOST}:{port}{path}")
    except httpx.HTTPError:
        return None
    return time.monotonic() - start


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=["serve-env", "view"], default="serve-env")
    parser.add_argument("--connections", type=int, default=22_000, help="half-open connections, all clients together")
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--server-fds", type=int, default=20_000, help="the server's RLIMIT_NOFILE")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to hold them all")
    parser.add_argument("--ramp-seconds", type=float, default=240.0, help="at most this long to open them")
    parser.add_argument("--attack", nargs=3, metavar=("PORT", "N", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.attack:
        attacker(int(args.attack[0]), int(args.attack[1]), float(args.attack[2]))
        return 0
    connections, seconds = min(args.connections, 60_000), min(args.seconds, 600.0)
    args.ramp_seconds = min(args.ramp_seconds, 600.0)
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "server.log"
        with open(log_path, "wb") as log:
            server, port, path = start_server(args.target, args.server_fds, log, Path(tmp))
            try:
                return _measure(args, server, port, path, connections, seconds, log_path)
            finally:
                server.terminate()
                try:
                    server.wait(30)
                except subprocess.TimeoutExpired:
                    server.kill()


def _follow(proc: subprocess.Popen, last: list) -> None:
    for line in proc.stdout:
        if line.startswith("{"):
            last[0] = json.loads(line)


def _measure(args, server, port: int, path: str, connections: int, seconds: float, log_path: Path) -> int:
    deadline = time.monotonic() + 60
    while probe(port, path) is None:
        if time.monotonic() > deadline:
            raise SystemExit("the server never answered")
    share = connections // args.clients
    attackers = [subprocess.Popen([sys.executable, __file__, "--attack", str(port), str(share),
                                   str(args.ramp_seconds + seconds + 30)], stdout=subprocess.PIPE, text=True)
                 for _ in range(args.clients)]
    stats = [[{}] for _ in attackers]
    for proc, last in zip(attackers, stats):
        threading.Thread(target=_follow, args=(proc, last), daemon=True).start()

    def held() -> int:
        return sum(last[0].get("open", 0) for last in stats)

    # Ramp: until the attackers hold (nearly) all their connections; probes go on meanwhile.
    phases: dict[str, list] = {"ramp": [], "held": []}
    peak_fds, peak_held, ramp_end = 0, 0, time.monotonic() + args.ramp_seconds
    phase, held_end = "ramp", None
    while server.poll() is None:
        now = time.monotonic()
        if phase == "ramp" and (held() >= 0.95 * share * args.clients or now > ramp_end):
            phase, held_end = "held", now + seconds  # all held, or as many as the server lets them
        if phase == "held" and now > held_end:
            break
        phases[phase].append(probe(port, path))
        peak_fds, peak_held = max(peak_fds, open_fds(server.pid)), max(peak_held, held())
        time.sleep(0.5)
    opened = sum(last[0].get("opened", 0) for last in stats)
    dropped = sum(last[0].get("dropped", 0) for last in stats)
    for proc in attackers:
        proc.terminate()
        proc.wait(60)
    log_size = log_path.stat().st_size
    print(f"target {args.target}: {connections} half-open connections from {args.clients} clients against a "
          f"server with {args.server_fds} file descriptors; held {seconds:g} s after a ramp of "
          f"{len(phases['ramp']) * 0.5:.0f}+ s")
    print(f"  attackers: open at once (client view) peak {peak_held}, opened {opened}, closed by the server {dropped}")
    print(f"  server: alive {server.poll() is None}, peak open descriptors {peak_fds}, log {log_size} bytes")
    ok = server.poll() is None and log_size < LOG_BAR
    for name, latencies in phases.items():
        answered = sorted(t for t in latencies if t is not None)
        worst = answered[-1] if answered else float("inf")
        median = answered[len(answered) // 2] if answered else float("nan")
        print(f"  {name}: {path} answered {len(answered)}/{len(latencies)} probes, median {median:.3f} s, "
              f"slowest {worst:.2f} s")
        ok = ok and len(answered) == len(latencies) and worst <= BAR_S
    # The attack's strength is what the attackers keep trying to hold: the server's header timeout
    # and cap decide how many they actually hold at once (reported above, not part of the bar).
    ok = ok and bool(phases["held"]) and connections > args.server_fds
    print(f"bar (more half-open connections attempted than the server's descriptors; {path} within {BAR_S:g} s "
          "every time; log under 1 MB): "
          f"{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
