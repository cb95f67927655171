"""The fault table of docs/guides/faults.md, measured over HTTP against the
example apps (examples/python: FastAPI on redis.asyncio; examples/node:
express on ioredis), each on a real redis-server and a three-primary
Cluster broken on purpose. For each fault: requests admitted beyond a limit
(endpoint 3's fail-open route aside), in-flight leases or token estimates
still held once Redis answers again, 500s, and the slowest time to response
headers.

    RL_MODULE=.../libredis_ratelimit.so python integration/faults_table.py [python|node ...]

Prints one markdown row per (app, fault). `make faults-table` runs it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
from redis.crc import key_slot

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import Cluster, Server, free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
APPS = {
    "python": ([sys.executable, str(ROOT / "examples/python/app.py")], ROOT / "examples/python"),
    "node": (["node", str(ROOT / "examples/node/server.js")], ROOT / "examples/node"),
}
XFF = {"X-Forwarded-For": "203.0.113.50"}


class App:
    def __init__(self, kind: str, env: dict[str, str]):
        cmd, cwd = APPS[kind]
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=dict(os.environ, PORT=str(self.port), **env),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while True:
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"{kind} app did not start")
            time.sleep(0.1)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


class Probe:
    """Sends requests; records (endpoint, status, seconds to headers); a dropped connection is 0."""

    def __init__(self, app: App):
        self.app = app
        self.seen: list[tuple[str, int, float]] = []
        self.lock = threading.Lock()

    def send(self, name: str, method: str, path: str, **kw) -> int:
        t0 = time.monotonic()
        status, took = 0, 0.0
        try:
            with httpx.Client(base_url=self.app.url, timeout=15) as c:
                with c.stream(method, path, **kw) as r:
                    status, took = r.status_code, time.monotonic() - t0
                    r.read()
        except httpx.HTTPError:
            took = time.monotonic() - t0
        with self.lock:
            self.seen.append((name, status, took))
        return status

    def sms(self, tag: str, n: int) -> int:
        return self.send("sms", "POST", "/seed000/sms", json={"phone": f"9{abs(hash(tag)) % 10**8}", "n": n})

    def custom(self, tag: str) -> int:
        return self.send("custom", "GET", "/seed002/api/custom",
                         headers={"X-Forwarded-For": f"198.51.100.{abs(hash(tag)) % 200 + 1}"})

    def llm(self, tag: str) -> int:
        return self.send("llm", "POST", "/llm/complete", json={"max_tokens": 1000}, headers={
            "X-Api-Key": f"fault-{tag}", "X-Zone": "UTC", "X-Sleep-Ms": "200", **XFF})

    def burst(self, tag: str, n: int = 6) -> None:
        """The limited endpoints at once: SMS (2 per 10 s), custom (5 per 30 s), LLM (2 in flight)."""
        threads = [threading.Thread(target=f, args=a) for i in range(n)
                   for f, a in ((self.sms, (tag, i)), (self.custom, (tag,)), (self.llm, (tag,)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def llm_after(app: App, key: str) -> tuple[int | None, int | None]:
    """(in-flight slots held, tokens charged) for ``key``, read by a request that returns at
    once and uses nothing; (None, None) when Redis cannot decide that key."""
    r = httpx.post(app.url + "/llm/complete", json={"max_tokens": 1}, timeout=5, headers={
        "X-Api-Key": key, "X-Zone": "UTC", "X-Sleep-Ms": "0", "X-Used-Tokens": "0", **XFF})
    if r.status_code != 200:
        return None, None
    items = {}
    for item in r.headers["ratelimit"].split(","):
        name, *params = item.strip().split(";")
        items[json.loads(name)] = {k: int(v) for k, v in (p.split("=") for p in params)}
    return 1 - items["inflight"]["r"], 100_000 - 1 - items["tokens"]["r"]


def run_fault(kind: str, fault: str, env: dict[str, str], break_it, heal_it) -> dict:
    app = App(kind, env)
    try:
        probe = Probe(app)
        tag = f"{kind}-{fault}-{time.time_ns()}"
        break_it()
        t = threading.Thread(target=probe.burst, args=(tag,))
        t.start()
        time.sleep(0.3)
        heal_it()
        t.join()
        during = list(probe.seen)
        time.sleep(2.5)  # decisions back within 2 s; late replies given back
        for i in range(4):
            probe.sms(tag, 100 + i)
        for _ in range(7):
            probe.custom(tag)
        ok = {name: sum(1 for n, st, _ in probe.seen if n == name and st == 200) for name in ("sms", "custom", "llm")}
        held, charged = llm_after(app, f"fault-{tag}")
        return {"app": kind, "fault": fault,
                "beyond": max(0, ok["sms"] - 2) + max(0, ok["custom"] - 5),
                "held": held, "tokens": None if charged is None else charged - 500 * ok["llm"],
                "500s": sum(1 for _, st, _ in probe.seen if st == 500),
                "dropped": sum(1 for _, st, _ in probe.seen if st == 0),
                "slowest": max(took for _, _, took in during)}
    finally:
        app.stop()


def table(kinds: list[str]) -> list[dict]:
    rows = []
    for kind in kinds:
        with Server() as s:
            env = {"REDIS_URL": f"redis://127.0.0.1:{s.port}", "RL_PREFIX": "ft:"}

            port = s.port

            def stop():
                s.proc.kill()
                s.proc.wait()

            def restart():  # the same port: the app reconnects to where it was
                time.sleep(1.0)
                s.proc = subprocess.Popen([s.binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", s.dir,
                                           "--save", "", "--appendonly", "no", "--logfile", "server.log",
                                           "--loadmodule", os.environ["RL_MODULE"], *s.extra],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                deadline = time.time() + 10
                while time.time() < deadline:
                    try:
                        if s.client().ping():
                            return
                    except Exception:
                        time.sleep(0.05)

            # The same burst with nothing broken: what the machine's load alone costs.
            rows.append(run_fault(kind, "none (baseline)", env, lambda: None, lambda: None))
            rows.append(run_fault(kind, "Redis killed (1 s)", env, stop, restart))

            def pause():
                s.proc.send_signal(signal.SIGSTOP)

            def resume_after(seconds):
                def go():
                    time.sleep(seconds)
                    s.proc.send_signal(signal.SIGCONT)
                return go

            rows.append(run_fault(kind, "Redis paused 4 s", env, pause, resume_after(3.7)))
            rows.append(run_fault(kind, "replies delayed 1.5 s", env, pause, resume_after(1.2)))
        with Cluster(3, args=["--cluster-require-full-coverage", "no", "--cluster-node-timeout", "1000"]) as cl:
            env = {"REDIS_CLUSTER": ",".join(f"127.0.0.1:{n.port}" for n in cl.nodes), "RL_PREFIX": "ftc:"}
            rows.append(run_fault(kind, "one primary of three killed", env, cl.nodes[2].stop, lambda: None))
        with Cluster(3, args=["--cluster-require-full-coverage", "no", "--cluster-node-timeout", "1000"]) as cl:
            env = {"REDIS_CLUSTER": ",".join(f"127.0.0.1:{n.port}" for n in cl.nodes), "RL_PREFIX": "ftd:"}

            def clusterdown():
                cl.nodes[1].stop()
                cl.nodes[2].stop()
                c = cl.nodes[0].client()
                while c.execute_command("CLUSTER INFO")["cluster_state"] != "fail":
                    time.sleep(0.1)

            rows.append(run_fault(kind, "CLUSTERDOWN", env, clusterdown, lambda: None))
    return rows


def main() -> None:
    kinds = sys.argv[1:] or ["python", "node"]
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")
    print("| app | fault | admitted beyond a limit | leases held after | tokens held beyond use | 500s "
          "| dropped | slowest headers |")
    print("|---|---|---|---|---|---|---|---|")
    for r in table(kinds):
        held = "–" if r["held"] is None else r["held"]
        tok = "–" if r["tokens"] is None else r["tokens"]
        print(f"| {r['app']} | {r['fault']} | {r['beyond']} | {held} | {tok} | {r['500s']} | {r['dropped']} "
              f"| {r['slowest']:.2f} s |", flush=True)


if __name__ == "__main__":
    main()
