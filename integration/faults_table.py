"""The fault table of docs/guides/faults.md, measured over HTTP against the
example apps, each on a real redis-server and a three-primary Cluster
broken on purpose:

- python: examples/python (FastAPI on redis.asyncio); flask: examples/flask
  (Flask on redis-py, the sync adapter; endpoints 3, 5 and 6);
- node: examples/node (express on ioredis); node-redis: the same app with
  RL_DRIVER=node-redis (@redis/client);
- mvc: examples/spring (Spring MVC, the Boot starter over Lettuce);
- kotlin: examples/spring-kotlin (Spring MVC from Kotlin);
- webflux: examples/spring-webflux (Spring WebFlux on Reactor Netty, the same
  starter; endpoints 3, 5 and 6).

For each fault: requests admitted beyond a limit (endpoint 3's fail-open
route aside), in-flight leases and token estimates still held once Redis
answers again, 500s, other unexpected answers, dropped connections and the
slowest time to response headers.

    RL_MODULE=.../libredis_ratelimit.so python integration/faults_table.py [python flask node node-redis mvc kotlin webflux]

Prints one markdown row per (app, fault). `make faults-table` runs it (FAULTS_APPS);
FAULTS_QUICK=1 runs only the baseline and "Redis killed" rows (a smoke)."""

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
JAVA = ["java", "-XX:TieredStopAtLevel=1", "-jar"]
APPS = {
    "python": ([sys.executable, str(ROOT / "examples/python/app.py")], ROOT / "examples/python", {}),
    "flask": ([sys.executable, str(ROOT / "examples/flask/app.py")], ROOT / "examples/flask", {}),
    "node": (["node", str(ROOT / "examples/node/server.js")], ROOT / "examples/node", {}),
    "node-redis": (["node", str(ROOT / "examples/node/server.js")], ROOT / "examples/node", {"RL_DRIVER": "node-redis"}),
    "mvc": ([*JAVA, str(ROOT / "examples/spring/target/ratelimit-example-spring.jar")], ROOT, {}),
    "kotlin": ([*JAVA, str(ROOT / "examples/spring-kotlin/target/ratelimit-example-spring-kotlin.jar")], ROOT, {}),
    "webflux": ([*JAVA, str(ROOT / "examples/spring-webflux/target/ratelimit-example-spring-webflux.jar")], ROOT, {}),
}
# The apps that serve endpoint 1 (SMS); the others are measured on endpoints 3, 5 and 6.
SMS = {"python", "node", "node-redis", "mvc"}
NOTES: dict[tuple[str, int], str] = {}  # (app, status) -> the first such answer, for 500s and other answers
XFF = {"X-Forwarded-For": "203.0.113.50"}


class App:
    def __init__(self, kind: str, env: dict[str, str]):
        cmd, cwd, extra = APPS[kind]
        self.kind = kind
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=dict(os.environ, PORT=str(self.port), **extra, **env),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 180  # a JVM on a loaded 2-core machine
        while True:
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"{kind} app did not start")
            time.sleep(0.2)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Probe:
    """Sends requests; records (endpoint, status, seconds to headers). Status 0: no answer (dropped or left)."""

    def __init__(self, app: App, tag: str):
        self.app = app
        self.tag = tag
        self.seen: list[tuple[str, int, float]] = []
        self.lines = 0  # tokens of the stream lines received
        self.lock = threading.Lock()

    def send(self, name: str, method: str, path: str, leave_after: float | None = None, **kw) -> int:
        """``leave_after`` seconds: the client goes away (closes the connection) at that time, before
        the answer's headers (a read timeout) or mid-body; recorded as ``<name>-left``."""
        t0 = time.monotonic()
        status, took, tokens = 0, 0.0, 0
        try:
            with httpx.Client(base_url=self.app.url, timeout=leave_after or 15) as c:
                with c.stream(method, path, **kw) as r:
                    status, took = r.status_code, time.monotonic() - t0
                    if status not in (200, 429, 503):  # kept for the notes under the table
                        NOTES.setdefault((self.app.kind, status), f"{method} {path}: {r.read()[:200]!r}")
                    for line in r.iter_lines():
                        if line.strip() and status == 200 and name == "stream":
                            tokens += json.loads(line).get("tokens", 0)
                        if leave_after is not None and time.monotonic() - t0 >= leave_after:
                            break
        except httpx.HTTPError:
            took = took or time.monotonic() - t0
        if leave_after is not None:
            name += "-left"
        with self.lock:
            self.seen.append((name, status, took))
            self.lines += tokens
        return status

    def sms(self, n: int) -> int:
        return self.send("sms", "POST", "/seed000/sms", json={"phone": f"9{abs(hash(self.tag)) % 10**8}", "n": n})

    def custom(self) -> int:
        return self.send("custom", "GET", "/seed002/api/custom",
                         headers={"X-Forwarded-For": f"198.51.100.{abs(hash(self.tag)) % 200 + 1}"})

    def llm_headers(self, sleep_ms: int, used: int | str) -> dict[str, str]:
        return {"X-Api-Key": f"fault-{self.tag}", "X-Zone": "UTC", "X-Sleep-Ms": str(sleep_ms),
                "X-Used-Tokens": str(used), **XFF}

    def llm(self, sleep_ms: int = 200, used: int | str = 500, leave_after: float | None = None) -> int:
        return self.send("llm", "POST", "/llm/complete", leave_after=leave_after, json={"max_tokens": 1000},
                         headers=self.llm_headers(sleep_ms, used))

    def stream(self, sleep_ms: int = 300, used: int | str = 300, leave_after: float | None = None) -> int:
        return self.send("stream", "POST", "/llm/stream", leave_after=leave_after, json={"max_tokens": 1000},
                         headers=self.llm_headers(sleep_ms, used))

    def run(self, calls) -> None:
        threads = [threading.Thread(target=f, args=a, kwargs=k) for f, a, k in calls]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def llm_after(app: App, key: str) -> tuple[int | str | None, int | None]:
    """(in-flight slots held, tokens charged) for ``key``, read by a request that returns at
    once and uses nothing; when Redis does not decide that key: (its answer's status, None)."""
    try:
        r = httpx.post(app.url + "/llm/complete", json={"max_tokens": 1}, timeout=5, headers={
            "X-Api-Key": key, "X-Zone": "UTC", "X-Sleep-Ms": "0", "X-Used-Tokens": "0", **XFF})
    except httpx.HTTPError:
        return "no answer", None
    if r.status_code != 200:
        print(f"read-back of {key} on {app.kind}: {r.status_code} {r.text[:300]}", file=sys.stderr)
        return f"– ({r.status_code})", None
    items = {}
    for item in r.headers["ratelimit"].split(","):
        name, *params = item.strip().split(";")
        items[json.loads(name)] = {k: int(v) for k, v in (p.split("=") for p in params)}
    return 1 - items["inflight"]["r"], 100_000 - 1 - items["tokens"]["r"]


def burst(probe: Probe, kind: str, n: int = 6):
    """The limited endpoints at once: SMS (2 per 10 s), custom (5 per 30 s), LLM (2 in flight)."""
    calls = []
    for i in range(n):
        if kind in SMS:
            calls.append((probe.sms, (i,), {}))
        calls.append((probe.custom, (), {}))
        calls.append((probe.llm, (), {}))
    return calls


def measure(app: App, fault: str, calls, break_it=lambda: None, heal_it=lambda: None, used_of=None,
            heal_at: float = 0.3, beyond_of=lambda p: 0) -> dict:
    """Breaks, sends ``calls`` at once, heals (``heal_it`` runs while they are in flight), waits for
    Redis to be used again, then counts what the fault let through or left behind."""
    tag = f"{app.kind}-{fault}-{time.time_ns()}"
    probe = Probe(app, tag)
    calls = calls(probe)
    started = time.monotonic()
    break_it()
    t = threading.Thread(target=probe.run, args=(calls,))
    t.start()
    time.sleep(heal_at)
    heal_it()
    t.join()
    during = list(probe.seen)
    time.sleep(2.5)  # decisions back within 2 s; late replies given back
    # What the limits then say: SMS 2 per 10 s and custom 5 per 30 s for this tag's keys.
    if app.kind in SMS:
        for i in range(4):
            probe.sms(100 + i)
    for _ in range(7):
        probe.custom()
    ok = {name: sum(1 for n, st, _ in probe.seen if n == name and st == 200) for name in ("sms", "custom")}
    # SMS allows 2 per 10 s: when the load stretched the row past 10 s, later admissions are legitimate
    # (the window slid), so the SMS count is left out of that row ("*" in the table).
    slid = app.kind in SMS and time.monotonic() - started >= 10
    if slid:
        ok["sms"] = 0
    held, charged = llm_after(app, f"fault-{tag}")
    # The tokens the admitted LLM calls really used: U of every 200, the lines a stream sent.
    used = used_of(probe) if used_of else 500 * sum(1 for n, st, _ in during if n == "llm" and st == 200)
    return {"app": app.kind, "fault": fault, "slid": slid,
            "beyond": max(0, ok["sms"] - 2) + max(0, ok["custom"] - 5) + beyond_of(probe),
            "held": held, "tokens": None if charged is None else charged - used,
            "500s": sum(1 for _, st, _ in probe.seen if st == 500),
            "other": sorted({st for _, st, _ in probe.seen if st not in {0, 200, 429, 503, 500}}),
            "dropped": sum(1 for n, st, _ in during if st == 0 and not n.endswith("-left")),
            "slowest": max(took for _, _, took in during)}


def standalone_rows(kind: str, quick: bool) -> list[dict]:
    rows = []
    with Server() as s:
        port = s.port
        app = App(kind, {"REDIS_URL": f"redis://127.0.0.1:{port}", "RL_PREFIX": f"ft-{kind}:"})
        try:
            def stop():
                s.proc.kill()
                s.proc.wait()

            def restart():  # the same port: the app reconnects to where it was
                time.sleep(0.7)  # down for 1 s in all
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

            def pause():
                s.proc.send_signal(signal.SIGSTOP)

            def resume_after(seconds):
                def go():
                    time.sleep(seconds)
                    s.proc.send_signal(signal.SIGCONT)
                return go

            def stall_app():  # the app's own process stops for 0.7 s (GC pause, a blocked event loop, a VM steal)
                app.proc.send_signal(signal.SIGSTOP)
                time.sleep(0.7)
                app.proc.send_signal(signal.SIGCONT)

            b = lambda p: burst(p, kind)  # noqa: E731
            # The same burst with nothing broken: what the machine's load alone costs.
            rows.append(measure(app, "none (baseline)", b))
            rows.append(measure(app, "Redis killed (1 s)", b, stop, restart))
            if quick:
                return rows
            rows.append(measure(app, "Redis paused 4 s", b, pause, resume_after(3.7)))
            rows.append(measure(app, "replies delayed 1.5 s", b, pause, resume_after(1.2)))

            def stalled(p):  # the LLM calls return at once, so their decisions are what the stall meets
                return [c for c in b(p) if c[0] != p.llm] + [(p.llm, (), {"sleep_ms": 0})] * 6
            rows.append(measure(app, "a 0.7 s stall of the app", stalled, heal_it=stall_app, heal_at=0.05))

            # Clients that leave mid-request: 1,000-token estimates, nothing used (X-Used-Tokens 0),
            # so every token still charged after is held beyond use; then 3 more on the same key.
            def leavers(p):
                return [(p.llm, (), {"sleep_ms": 1500, "used": 0, "leave_after": 0.3})] * 3 + b(p)[:8]
            # the admitted leavers used nothing; U = 500 of every other LLM call answered 200
            rows.append(measure(app, "client disconnect mid-request", leavers))

            # Endpoint 6: four streams of 2 s at once on one key (2 in flight allowed): two run to their
            # end (U = 300), two leave after 1 s; settled to what was sent (U, or the lines received:
            # a leaver's server may send one more line than the client read, 15 tokens). More than 2
            # answered 200 before any left is admitted beyond the in-flight limit.
            def streams(p):
                return ([(p.stream, (), {"sleep_ms": 2000})] * 2
                        + [(p.stream, (), {"sleep_ms": 2000, "leave_after": 1.0})] * 2)
            rows.append(measure(app, "stream (/llm/stream), 2 leave", streams, used_of=lambda p: p.lines,
                                beyond_of=lambda p: max(0, sum(1 for n, st, took in p.seen
                                                               if n.startswith("stream") and st == 200 and took < 0.9) - 2)))

            # used(10**20): a model that reports more than N counts as N (SERVICES.md), never a 500.
            def huge(p):
                return ([(p.llm, (), {"sleep_ms": 0, "used": 10**20})]
                        + [(p.stream, (), {"sleep_ms": 100, "used": 10**20})])
            rows.append(measure(app, "used(10**20)", huge,
                                used_of=lambda p: 1000 * sum(1 for n, st, _ in p.seen if n in ("llm", "stream") and st == 200)))
        finally:
            app.stop()
    return rows


def cluster_rows(kind: str) -> list[dict]:
    rows = []
    with Cluster(3, args=["--cluster-require-full-coverage", "no", "--cluster-node-timeout", "1000"]) as cl:
        app = App(kind, {"REDIS_CLUSTER": ",".join(f"127.0.0.1:{n.port}" for n in cl.nodes), "RL_PREFIX": f"ftc-{kind}:"})
        try:
            b = lambda p: burst(p, kind)  # noqa: E731
            # Endpoint 5's keys share the hash tag {llm}: kill a primary that does not serve it, so the
            # leases and estimates can be read back; the others' keys (SMS, custom) spread over all three.
            llm_home = cl.slot_owner(key_slot(b"llm"))
            others = [n for n in cl.nodes if n is not llm_home]
            rows.append(measure(app, "one primary of three killed", b, others[0].stop))

            def clusterdown():  # two of three gone: the last one answers CLUSTERDOWN
                others[1].stop()
                c = llm_home.client()
                while c.execute_command("CLUSTER INFO")["cluster_state"] != "fail":
                    time.sleep(0.1)

            rows.append(measure(app, "CLUSTERDOWN", b, clusterdown))
        finally:
            app.stop()
    return rows


def grid(rows: list[dict], kinds: list[str]) -> None:
    """The same rows as docs/guides/faults.md's grid: a fault per line, an app per column, each cell
    admitted beyond / leases held after (+ tokens charged beyond use) / 500s / slowest headers."""
    print("\n| fault | " + " | ".join(kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    for fault in dict.fromkeys(r["fault"] for r in rows):
        cells = []
        for kind in kinds:
            r = next((r for r in rows if r["app"] == kind and r["fault"] == fault), None)
            if r is None:
                cells.append("")
                continue
            held = str(r["held"]) + (f" + {r['tokens']} tokens" if r["tokens"] else "")
            extra = f" (+{', '.join(map(str, r['other']))})" if r["other"] else ""
            cells.append(f"{r['beyond']}{'*' if r['slid'] else ''} / {held} / {r['500s']}{extra} / {r['slowest']:.2f} s")
        print(f"| {fault} | " + " | ".join(cells) + " |")


def main() -> None:
    kinds = sys.argv[1:] or list(APPS)
    quick = os.environ.get("FAULTS_QUICK") == "1"
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")
    print("| app | fault | admitted beyond a limit | leases held after | tokens held beyond use | 500s "
          "| other answers | dropped | slowest headers |")
    print("|---|---|---|---|---|---|---|---|---|")
    failures = 0
    everything: list[dict] = []
    for kind in kinds:
        rows = standalone_rows(kind, quick) + ([] if quick else cluster_rows(kind))
        everything += rows
        for r in rows:
            held = "–" if r["held"] is None else r["held"]
            tok = "–" if r["tokens"] is None else r["tokens"]
            other = ", ".join(map(str, r["other"])) or "0"
            print(f"| {r['app']} | {r['fault']} | {r['beyond']}{'*' if r['slid'] else ''} | {held} | {tok} | {r['500s']} | {other} "
                  f"| {r['dropped']} | {r['slowest']:.2f} s |", flush=True)
            failures += bool(r["beyond"] or r["500s"] or r["other"] or (isinstance(r["held"], int) and r["held"] > 0))
    grid(everything, kinds)
    if any(r["slid"] for r in everything):
        print("\n*: the row outlasted SMS's 10 s window (load), so only endpoint 3's custom limit (30 s) and the"
              " streams' in-flight limit are counted there")
    for (kind, status), what in sorted(NOTES.items()):
        print(f"\n- {kind}, first {status}: {what}")
    if quick and failures:
        sys.exit(f"{failures} rows admitted beyond a limit, held a lease, or answered 500 or another error")


if __name__ == "__main__":
    main()
