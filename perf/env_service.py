"""Environments as services: what HTTP costs per step, and how a server holds up (issue 15).

1. Step latency, HTTP (HttpEnv -> `reinagent serve-env` on loopback) vs in-process, for HotpotQA
   (docstore env: a step is microseconds, so the difference is the protocol's overhead) and
   ALFWorld (a step is a game-engine round trip in a worker process). Prints steps/s, p50 and p99
   and the overhead per step (target: under 2 ms for HotpotQA).
2. Load: 32 concurrent ALFWorld sessions on one server (each resets and plays steps); errors,
   the server's peak RSS (its own process, and with its worker processes), and its RSS after the
   sessions close. Then 500 create/reset/step/close cycles and the RSS and session count after.

    .venv/bin/python perf/env_service.py [--steps 2000] [--alfworld-steps 200] [--sessions 32]
                                         [--cycles 500] [--no-alfworld] [--no-load]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reinagent.env import aclose, areset, astep  # noqa: E402
from reinagent.service.client import EnvClient, HttpEnv  # noqa: E402
from reinagent.service.sessions import load_benchmark  # noqa: E402
from reinagent.settings import BenchmarkSettings  # noqa: E402

HOTPOT_ACTIONS = ["Search[{title}]", "Lookup[the]", "Lookup[in]", "Search[nothing like this]"]
ALFWORLD_ACTIONS = ["look", "inventory", "go to desk 1", "look", "examine desk 1"]


def start_server(benchmark: str, *extra: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "reinagent.cli", "serve-env", "--benchmark", benchmark,
                             "--port", "0", *extra], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stdout.readline()
    if not line.startswith("serving "):
        raise SystemExit(f"server did not start: {line!r}")
    return proc, line.rsplit(" on ", 1)[1].strip()


def stop_server(proc: subprocess.Popen) -> int:
    proc.terminate()
    return proc.wait(120)


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def tree(pid: int) -> list[int]:
    """pid and all its descendants."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def tree_rss_mb(pid: int) -> float:
    return sum(rss_mb(p) for p in tree(pid))


class PeakSampler:
    """Samples the server's RSS (own and with children) in a thread until stopped."""

    def __init__(self, pid: int):
        self.pid, self.own, self.total = pid, 0.0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.own = max(self.own, rss_mb(self.pid))
            self.total = max(self.total, tree_rss_mb(self.pid))
            self._stop.wait(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def summary(latencies_s: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in latencies_s)
    return {"steps_per_s": len(ms) / (sum(ms) / 1000), "p50": statistics.median(ms),
            "p99": ms[min(len(ms) - 1, int(0.99 * len(ms)))], "mean": statistics.fmean(ms)}


async def time_block(env, actions: list[str], start: int, n: int, out: list[float]) -> None:
    for i in range(start, start + n):
        t0 = time.perf_counter()
        await astep(env, actions[i % len(actions)])
        out.append(time.perf_counter() - t0)


def compare(name: str, steps: int, actions: list[str], *, agent: str, split: str | None = None) -> dict:
    bench = load_benchmark(name)
    config = BenchmarkSettings(benchmark=name, agent=agent, split=split or bench.default_split, max_steps=10**6,
                               max_concurrency=1)
    bench.check_config(config)
    task = bench.load_tasks(config.split)[0]
    if name == "hotpotqa":
        actions = [a.format(title=task.titles[0]) for a in actions]
    proc, url = start_server(name)
    client = EnvClient(url)

    async def both():
        # Blocks of steps alternate between the two sides, so a burst of load from other jobs on
        # the machine falls on both rather than on whichever ran second.
        http_env = HttpEnv(client, task.task_id, options={"max_steps": 10**6})
        local_env = bench.make_env(task, config)
        await areset(http_env), await areset(local_env)
        await time_block(http_env, actions, 0, min(50, steps), [])  # warm-up: connections, caches
        http, local, block = [], [], max(1, min(50, steps // 10))
        for start in range(0, steps, block):
            await time_block(http_env, actions, start, block, http)
            await time_block(local_env, actions, start, block, local)
        await aclose(http_env), await aclose(local_env)
        await client.aclose()
        return http, local

    try:
        http, local = asyncio.run(both())
    finally:
        bench.close()
        stop_server(proc)
    h, loc = summary(http), summary(local)
    print(f"{name:<9} {'in-process':<11} {loc['steps_per_s']:>10.0f} {loc['p50']:>9.3f} {loc['p99']:>9.3f}")
    print(f"{name:<9} {'HTTP':<11} {h['steps_per_s']:>10.0f} {h['p50']:>9.3f} {h['p99']:>9.3f}")
    print(f"{name:<9} overhead per step: p50 {h['p50'] - loc['p50']:.3f} ms, mean {h['mean'] - loc['mean']:.3f} ms "
          f"({steps} steps)")
    return {"http": h, "local": loc}


async def one_session(client: EnvClient, task_id: str, steps: int) -> None:
    env = HttpEnv(client, task_id, options={"max_steps": 10**6})
    try:
        await areset(env)
        for i in range(steps):
            await astep(env, ALFWORLD_ACTIONS[i % len(ALFWORLD_ACTIONS)])
    finally:
        await aclose(env)


def load(sessions: int, steps: int, cycles: int) -> None:
    # A short idle timeout: the server releases its pooled ALFWorld workers 5 s after the last
    # session closes, so the RSS after a round shows whether it returns to rest.
    proc, url = start_server("alfworld", "--max-sessions", str(max(64, sessions)), "--idle-timeout-s", "5")
    client = EnvClient(url)
    try:
        tasks = client.request("GET", "/tasks")["tasks"]
        base_own, base_total = rss_mb(proc.pid), tree_rss_mb(proc.pid)
        print(f"\nALFWorld server at rest: RSS {base_own:.0f} MB (with workers {base_total:.0f} MB)")

        async def concurrent():
            results = await asyncio.gather(*(one_session(client, tasks[i % len(tasks)], steps)
                                             for i in range(sessions)), return_exceptions=True)
            await client.aclose()
            return [r for r in results if isinstance(r, BaseException)]

        for round_ in (1, 2):  # a second round on the same server: no growth means no leak
            sampler = PeakSampler(proc.pid)
            started = time.perf_counter()
            errors = asyncio.run(concurrent())
            wall = time.perf_counter() - started
            sampler.stop()
            open_now = client.request("GET", "/health")["sessions"]
            pooled = tree_rss_mb(proc.pid)
            deadline = time.monotonic() + 300
            while len(tree(proc.pid)) > 1 and time.monotonic() < deadline:  # workers released when idle
                time.sleep(0.5)
            print(f"round {round_}: {sessions} concurrent sessions x (reset + {steps} steps): {len(errors)} errors, "
                  f"{wall:.1f} s; peak RSS {sampler.own:.0f} MB (with workers {sampler.total:.0f} MB); "
                  f"{open_now} sessions open after; with idle pooled workers {pooled:.0f} MB; after the idle "
                  f"timeout {rss_mb(proc.pid):.0f} MB (with workers {tree_rss_mb(proc.pid):.0f} MB, "
                  f"{len(tree(proc.pid)) - 1} child processes)")
            for err in errors[:3]:
                print(f"  error: {type(err).__name__}: {err}")
        before = rss_mb(proc.pid)
        for i in range(cycles):  # create/close without a game load: the server's own bookkeeping
            sid = client.request("POST", "/create", {"task_id": tasks[i % len(tasks)]})["id"]
            client.request("POST", "/close", {"id": sid})
        print(f"{cycles} create/close cycles (ALFWorld): RSS {before:.0f} -> {rss_mb(proc.pid):.0f} MB, "
              f"{client.request('GET', '/health')['sessions']} sessions open")
    finally:
        client.close()
        print(f"ALFWorld server exit code on SIGTERM: {stop_server(proc)}")

    proc, url = start_server("hotpotqa")
    client = EnvClient(url)
    try:
        task = client.request("GET", "/tasks")["tasks"][0]
        for _ in range(50):  # warm-up: first requests allocate caches
            env = HttpEnv(client, task)
            env.step("Search[x]")
            env.close()
        before = rss_mb(proc.pid)
        for _ in range(cycles):
            env = HttpEnv(client, task)
            env.reset()
            env.step("Search[x]")
            env.close()
        print(f"{cycles} create/reset/step/close cycles (HotpotQA): RSS {before:.0f} -> {rss_mb(proc.pid):.0f} MB, "
              f"{client.request('GET', '/health')['sessions']} sessions open")
    finally:
        client.close()
        stop_server(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000, help="HotpotQA steps per side")
    parser.add_argument("--alfworld-steps", type=int, default=200, help="ALFWorld steps per side")
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--session-steps", type=int, default=10, help="steps each concurrent session plays")
    parser.add_argument("--cycles", type=int, default=500)
    parser.add_argument("--no-alfworld", action="store_true")
    parser.add_argument("--no-load", action="store_true", help="skip the 32-session and create/close part")
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f} (other jobs on the machine inflate the latencies)")
    print(f"{'env':<9} {'where':<11} {'steps/s':>10} {'p50 ms':>9} {'p99 ms':>9}")
    compare("hotpotqa", args.steps, HOTPOT_ACTIONS, agent="react")
    if not args.no_alfworld:
        compare("alfworld", args.alfworld_steps, ALFWORLD_ACTIONS, agent="react")
        if not args.no_load:
            load(args.sessions, args.session_steps, args.cycles)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
