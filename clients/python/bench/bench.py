"""`make bench-python`: interleaved, ratios printed (not a timed test).

1. One decision of a policy of three limits (sliding window, token bucket,
   calendar quota) through redis_rl against the bare RL.ALL with the same
   arguments through the same redis-py client: time per decision, and the
   RL.ALL calls the server counted (the package adds no round trip).
2. The same HTTP endpoint guarded by redis_rl and by slowapi + limits' Redis
   storage, each app under uvicorn (one process), driven at a fixed
   concurrency: requests per second and p99 latency.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import httpx
import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "integration"))

from servers import Server, free_port  # noqa: E402

from redis_rl import Policy, RateLimiter, quota, sliding_window, token_bucket  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "30"))
BLOCK = int(os.environ.get("BENCH_BLOCK", "200"))
HTTP_SECONDS = float(os.environ.get("BENCH_HTTP_SECONDS", "4"))
HTTP_RUNS = int(os.environ.get("BENCH_HTTP_RUNS", "3"))
CONCURRENCY = int(os.environ.get("BENCH_CONCURRENCY", "16"))


def rl_all_calls(client) -> int:
    return int(client.info("commandstats").get("cmdstat_rl.all", {}).get("calls", 0))


def decision_overhead(server: Server) -> None:
    client = redis.Redis(host="127.0.0.1", port=server.port)
    rl = RateLimiter(client)
    rl.ensure_module()
    policy = Policy("bench", [sliding_window("minute", 10**12, timedelta(minutes=1)),
                              token_bucket("rate", 10**6, timedelta(seconds=1), burst=10**6),
                              quota("day", "UTC", "day", 10**15)], prefix="pkg:")
    bare_args = policy.plan("user", details=bool(rl.details_supported)).call.args
    bare_args = tuple(a.replace("pkg:", "bare:", 1) if isinstance(a, str) else a for a in bare_args)

    def package_block() -> float:
        t0 = time.perf_counter()
        for _ in range(BLOCK):
            rl.decide(policy, "user")
        return (time.perf_counter() - t0) / BLOCK

    def package_states_block() -> float:
        # What an HTTP adapter does: the decision and every limit's state.
        t0 = time.perf_counter()
        for _ in range(BLOCK):
            rl.decide(policy, "user").states
        return (time.perf_counter() - t0) / BLOCK

    def bare_block() -> float:
        t0 = time.perf_counter()
        for _ in range(BLOCK):
            client.execute_command(*bare_args)
        return (time.perf_counter() - t0) / BLOCK

    blocks = {"decide": package_block, "decide+states": package_states_block, "bare": bare_block}
    for f in blocks.values():
        f()  # warm-up
    before = rl_all_calls(client)
    times: dict[str, list[float]] = {name: [] for name in blocks}
    order = list(blocks)
    for r in range(ROUNDS):  # interleaved, the order rotating per round
        for name in order[r % 3:] + order[:r % 3]:
            times[name].append(blocks[name]())
    calls = rl_all_calls(client) - before
    sent = 3 * ROUNDS * BLOCK
    decisions = 2 * ROUNDS * BLOCK
    details = "with DETAILS" if rl.details_supported else "without DETAILS"
    print(f"== 1. a decision of a three-limit policy (sliding window + token bucket + quota), sync redis-py, {details}")
    b = statistics.median(times["bare"])
    for name, label in [("decide", "redis_rl decide"), ("decide+states", "redis_rl decide + states"),
                        ("bare", "bare RL.ALL")]:
        line = f"   {label:26s}: {statistics.median(times[name]) * 1e6:8.1f} us (median of {ROUNDS} blocks of {BLOCK})"
        if name != "bare":
            # Each round's blocks ran back to back: their ratio is paired, so a
            # load spike on a shared machine moves both; the median of those ratios.
            paired = statistics.median(x / y for x, y in zip(times[name], times["bare"]))
            line += f"  ratio to bare {paired:.3f} ({100 * (paired - 1):+.1f}%)"
        print(line)
    print(f"   bare call: {b * 1e6:.1f} us. RL.ALL calls counted by the server: {calls} for {sent} sent "
          f"({decisions} decisions + {ROUNDS * BLOCK} bare) -> round trips per decision: "
          f"{(calls - ROUNDS * BLOCK) / decisions:.2f}")
    client.close()


def start_app(name: str, redis_port: int) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = dict(os.environ, BENCH_REDIS_PORT=str(redis_port))
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", f"apps:{name}", "--host", "127.0.0.1", "--port",
                             str(port), "--log-level", "warning", "--no-access-log"], cwd=HERE, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ping", timeout=1).status_code == 200:
                return proc, port
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{name} did not start: {proc.stderr.read().decode()}")


def load(port: int, seconds: float) -> tuple[float, float, int]:
    """CONCURRENCY threads, each a keep-alive httpx.Client sending GET /ping
    back to back (httpx's asyncio pool was itself the bottleneck)."""
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    # Clients made before the clock starts (each builds an SSL context).
    clients = [httpx.Client(base_url=f"http://127.0.0.1:{port}") for _ in range(CONCURRENCY)]
    stop = time.perf_counter() + seconds

    def worker(client: httpx.Client) -> None:
        nonlocal errors
        mine, bad = [], 0
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            r = client.get("/ping")
            mine.append(time.perf_counter() - t0)
            bad += r.status_code != 200
        client.close()
        with lock:
            latencies.extend(mine)
            errors += bad

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    latencies.sort()
    return len(latencies) / elapsed, latencies[int(0.99 * (len(latencies) - 1))], errors


def http_comparison(server: Server) -> None:
    apps = {name: start_app(name, server.port) for name in ("package_app", "slowapi_app")}
    try:
        results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in apps}
        for name in apps:
            load(apps[name][1], 1.0)  # warm-up
        order = list(apps)
        for r in range(HTTP_RUNS):
            for name in (order if r % 2 == 0 else order[::-1]):
                results[name].append(load(apps[name][1], HTTP_SECONDS))
        print(f"== 2. GET /ping guarded per client IP, uvicorn (1 process), concurrency {CONCURRENCY}, "
              f"{len(results['package_app'])} interleaved runs of {HTTP_SECONDS:g} s each")
        summary = {}
        for name, runs in results.items():
            rps = statistics.median(x[0] for x in runs)
            p99 = statistics.median(x[1] for x in runs)
            errors = sum(x[2] for x in runs)
            summary[name] = (rps, p99)
            label = "redis_rl (RL.CHECK)" if name == "package_app" else "slowapi + limits Redis (moving window)"
            print(f"   {label:40s}: {rps:8.0f} req/s, p99 {p99 * 1000:6.1f} ms, non-200: {errors}")
        (pr, pp), (sr, sp) = summary["package_app"], summary["slowapi_app"]
        print(f"   ratio redis_rl/slowapi: throughput {pr / sr:.2f}x, p99 {pp / sp:.2f}x "
              "(the load generator shares the machine's cores)")
    finally:
        for proc, _ in apps.values():
            proc.terminate()
            proc.wait(10)


def main() -> None:
    with Server() as server:
        decision_overhead(server)
        http_comparison(server)


if __name__ == "__main__":
    main()
