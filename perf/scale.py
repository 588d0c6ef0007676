"""Where does a run stop scaling? (issue 19, part 3)

Runs --episodes short episodes (HotpotQA dev-qa7405, cot-no-context, one trial: one model call
each, cache off) against a loopback model server answering after --latency-ms, first with the
local executor, then with the Ray executor on a local cluster (`ray.init(num_cpus=...)` in this
process). Prints, per executor, episodes/s and the driver's CPU per episode (this process: the
schedule, the store, and for Ray the task submission; the server runs in a child process). Then
appends --records records to each store it can open (a run directory, SQLite; PostgreSQL with
--postgres URL, or --postgres auto: a throwaway server, perf/postgres_server.py) and prints the write latency per record (append_async, as the driver does it, 64
at a time: group commit).

The extrapolation to --workers workers assumes each worker runs one episode at a time, each taking
the latency of its calls: the demand is workers / episode time episodes/s; the driver can serve
1 / (CPU per episode) and a store about 1 / (write latency) when writes do not overlap. The
smallest of these is where the first bottleneck is.

    .venv/bin/python perf/scale.py [--episodes 1000] [--latency-ms 200] [--workers 100] [--no-ray]
        [--postgres auto|URL]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perf.server_process import ServerProcess  # noqa: E402
from reinagent.config import RunConfig  # noqa: E402
from reinagent.records import TrialRecord  # noqa: E402
from reinagent.runner import load_run, run_experiment  # noqa: E402


def one_run(server: ServerProcess, args, executor: str, run_dir: Path) -> dict[str, float]:
    config = RunConfig(benchmark="hotpotqa", agent="cot-no-context", split="dev-qa7405", strategy="none",
                       num_trials=1, num_envs=args.episodes, model="openai/fake", base_url=server.base_url,
                       max_concurrency=args.concurrency, cache=False, run_dir=str(run_dir), executor=executor)
    wall, cpu = time.perf_counter(), time.process_time()
    run_experiment(config, progress=False)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    records = load_run(run_dir)[1]
    return {"wall_s": wall, "cpu_s": cpu, "episodes": len(records), "errors": sum(r.error is not None for r in records)}


def store_latency(url: str, count: int, tmp: Path) -> float:
    """Seconds per record appended through the store's writer, `count` records, 64 in flight."""
    from reinagent.records import RunSpec
    from reinagent.stores import open_store

    store = open_store(url)
    spec = RunSpec(config={"benchmark": "hotpotqa"}, task_ids=[str(i) for i in range(count)], created_at=time.time(),
                   reinagent_version="perf", python_version=sys.version.split()[0])
    writer = store.create_run(f"perf-{time.time_ns()}", spec, tmp / f"log-{time.time_ns()}")
    records = [TrialRecord(task_id=str(i), trial=1, answer="x" * 200) for i in range(count)]

    async def write_all() -> None:
        limit = asyncio.Semaphore(64)

        async def one(rec: TrialRecord) -> None:
            async with limit:
                await writer.append_async(rec)

        await asyncio.gather(*(one(r) for r in records))

    started = time.perf_counter()
    asyncio.run(write_all())
    elapsed = time.perf_counter() - started
    writer.close()
    if hasattr(store, "close"):
        store.close()
    return elapsed / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=100, help="episodes in flight (--max-concurrency)")
    parser.add_argument("--ray-cpus", type=int, default=2, help="CPUs of the local Ray cluster")
    parser.add_argument("--workers", type=int, default=100, help="workers to extrapolate to")
    parser.add_argument("--records", type=int, default=2000, help="records per store for the write latency")
    parser.add_argument("--postgres", help="also time a PostgreSQL store: a URL, or auto (a throwaway local server)")
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    load_before = os.getloadavg()[0]
    postgres: contextlib.AbstractContextManager = contextlib.nullcontext(args.postgres)
    if args.postgres == "auto":
        from perf.postgres_server import postgres_server

        postgres = postgres_server()
    with ServerProcess(latency_s=args.latency_ms / 1000) as server, tempfile.TemporaryDirectory() as tmp, \
            postgres as postgres_url:
        root = Path(tmp)
        one_run(server, argparse.Namespace(**{**vars(args), "episodes": 20}), "local", root / "warmup")
        results["local"] = one_run(server, args, "local", root / "local")
        if not args.no_ray:
            try:
                import ray

                ray.init(num_cpus=args.ray_cpus, include_dashboard=False, log_to_driver=False)
            except Exception as err:  # noqa: BLE001 - a loaded machine may not start Ray at all
                print(f"ray: no local cluster ({str(err).splitlines()[0]}); skipped")
            else:
                results["ray"] = one_run(server, args, "ray", root / "ray")
                os.environ["REINAGENT_RAY_EPISODE_CPUS"] = "0.1"  # ten episodes per CPU: they wait on the server
                results["ray, 0.1 CPU/episode"] = one_run(server, args, "ray", root / "ray-light")
                ray.shutdown()
        stores = {"directory": str(root / "store-dir"), "sqlite": f"sqlite:///{root}/store.db"}
        if postgres_url:
            stores["postgresql"] = postgres_url
        latencies = {name: store_latency(url, args.records, root) for name, url in stores.items()}
    episode_s = args.latency_ms / 1000
    print(f"{args.episodes} episodes, 1 model call each, answered in {args.latency_ms:.0f} ms, "
          f"{args.concurrency} in flight")
    capacities = {}
    for name, r in results.items():
        per_episode = r["cpu_s"] / max(r["episodes"], 1)
        capacities[f"driver ({name} executor)"] = 1 / per_episode
        print(f"{name:>6}: {r['episodes'] / r['wall_s']:.1f} episodes/s (wall {r['wall_s']:.1f} s), driver CPU "
              f"{per_episode * 1000:.2f} ms/episode, {r['errors']:.0f} errors")
    for name, latency in latencies.items():
        capacities[f"store ({name})"] = 1 / latency
        print(f"store {name:>10}: {latency * 1000:.3f} ms per record ({args.records} records, 64 in flight)")
    demand = args.workers / episode_s
    print(f"{args.workers} workers x 1 episode each, {episode_s:.2f} s per episode: demand {demand:.0f} episodes/s")
    for name, capacity in sorted(capacities.items(), key=lambda kv: kv[1]):
        verdict = "BOTTLENECK" if capacity < demand else "ok"
        print(f"  {name:<28} serves {capacity:8.0f} episodes/s  {verdict}")
    first = min(capacities.items(), key=lambda kv: kv[1])
    print(f"first bottleneck: {first[0]} at {first[1]:.0f} episodes/s "
          f"({'below' if first[1] < demand else 'above'} the demand of {demand:.0f}); "
          f"load average {load_before:.1f} at start, {os.getloadavg()[0]:.1f} at end ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
