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
  starter; endpoints 3, 5 and 6);
- django: examples/django (Django on uvicorn, redis_rl's Django adapter);
- fastify: examples/fastify (Fastify on ioredis, the package's Fastify plugin);
- gateway: examples/spring-gateway (Spring Cloud Gateway): not the seed
  services, its own rows (``gateway_burst``): the RateLimit filter's route
  /api/** (policies api: a bucket of 5 then one a minute, 2 in flight, fail
  closed; daily) and SCG's RequestRateLimiter route /scg/** deciding the
  same policies (its in-flight lease given back once decided: SCG's filter
  has no end-of-response hook), in front of a backend stub here that counts
  the requests each caller has in flight at once.

For each fault: requests admitted beyond a limit (endpoint 3's fail-open
route aside), in-flight leases and token estimates still held once Redis
answers again, 500s, other unexpected answers, dropped connections and the
slowest time to response headers.

    RL_MODULE=.../libredis_ratelimit.so python integration/faults_table.py [python flask node node-redis mvc kotlin webflux django fastify gateway]

FAULTS_BACKEND=functions: the servers have no module; every app decides with
the Functions library, which it loads itself (RL_BACKEND=functions; the
gateway: ratelimit.backend), again after a restart (the server keeps no data).

Prints one markdown row per (app, fault). `make faults-table` runs it (FAULTS_APPS);
FAULTS_QUICK=1 runs only the baseline and "Redis killed" rows (a smoke)."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
from redis.crc import key_slot

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import Cluster, Server, free_port  # noqa: E402

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402

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
    "django": ([sys.executable, str(ROOT / "examples/django/app.py")], ROOT / "examples/django", {}),
    "fastify": (["node", str(ROOT / "examples/fastify/server.js")], ROOT / "examples/fastify", {}),
    "gateway": ([*JAVA, str(ROOT / "examples/spring-gateway/target/ratelimit-example-spring-gateway.jar")], ROOT, {}),
}
# The apps that serve endpoint 1 (SMS); the others are measured on endpoints 3, 5 and 6.
SMS = {"python", "node", "node-redis", "mvc", "django", "fastify"}
FUNCTIONS = os.environ.get("FAULTS_BACKEND", "module") == "functions"
NOTES: dict[tuple[str, int], str] = {}  # (app, status) -> the first such answer, for 500s and other answers
XFF = {"X-Forwarded-For": "203.0.113.50"}


class Backend:
    """The gateway's backend: ``/<route>/slow?ms=N`` answers 200 after N ms; counts, per X-Api-Key, the
    requests in flight at once (the most seen is what the gateway let through together). A request
    whose connection the gateway closed (its caller left: SCG cancels the routed call) stops counting
    then, as a backend that watches its connection stops working."""

    def __init__(self):
        self.lock = threading.Lock()
        self.now: dict[str, int] = {}
        self.most: dict[str, int] = {}
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                key = self.headers.get("X-Api-Key", "")
                with backend.lock:
                    backend.now[key] = backend.now.get(key, 0) + 1
                    backend.most[key] = max(backend.most.get(key, 0), backend.now[key])
                try:
                    m = re.search(r"ms=(\d+)", self.path)
                    end = time.monotonic() + (int(m.group(1)) / 1000 if m else 0)
                    while time.monotonic() < end:
                        if select.select([self.connection], [], [], min(0.01, max(0.0, end - time.monotonic())))[0] \
                                and self.connection.recv(1, socket.MSG_PEEK) == b"":
                            return  # the gateway closed the connection
                finally:
                    with backend.lock:
                        backend.now[key] -= 1
                body = b"hello"
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # closed as it answered
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.uri = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def app_env(kind: str, env: dict[str, str]) -> dict[str, str]:
    """The harness's settings as ``kind`` reads them (the gateway: Spring properties)."""
    if FUNCTIONS:
        env = dict(env, RL_BACKEND="functions")
    if kind != "gateway":
        return env
    out = {"RL_PREFIX": env["RL_PREFIX"], "BACKEND_URI": env["BACKEND_URI"]}
    if "REDIS_CLUSTER" in env:
        out["SPRING_DATA_REDIS_CLUSTER_NODES"] = env["REDIS_CLUSTER"]
    else:
        out["REDIS_URL"] = env["REDIS_URL"]
    if FUNCTIONS:
        out["RATELIMIT_BACKEND"] = "functions"
    return out


class App:
    def __init__(self, kind: str, env: dict[str, str]):
        cmd, cwd, extra = APPS[kind]
        self.kind = kind
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.backend = Backend() if kind == "gateway" else None
        if self.backend:
            env = dict(env, BACKEND_URI=self.backend.uri)
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=dict(os.environ, PORT=str(self.port), **extra, **app_env(kind, env)),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 180  # a JVM on a loaded 2-core machine
        while True:
            try:
                # the gateway has no /health: any answer of its own (404: no route) says it serves
                if httpx.get(self.url + "/health", timeout=1).status_code == (404 if self.backend else 200):
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"{kind} app did not start")
            time.sleep(0.2)

    def stop(self):
        if self.backend:
            self.backend.close()
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

    def gw(self, route: str = "api", sleep_ms: int = 200, leave_after: float | None = None) -> int:
        """The gateway: ``route`` api (the RateLimit filter) or scg (SCG's RequestRateLimiter), one caller each."""
        return self.send(route, "GET", f"/{route}/slow?ms={sleep_ms}", leave_after=leave_after,
                         headers={"X-Api-Key": gw_key(self.tag, route)})

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


def gw_key(tag: str, route: str) -> str:
    return f"{route}-{tag}"


def gw_after(app: App, tag: str) -> int | str | None:
    """The gateway: in-flight slots still held by both routes' callers (policy api), read from the
    RateLimit header of a request that returns at once (a 429 of the bucket still shows what the
    in-flight rule would leave); when Redis does not decide: its answer's status."""
    held = 0
    for route in ("api", "scg"):
        try:
            r = httpx.get(f"{app.url}/{route}/slow?ms=0", timeout=5, headers={"X-Api-Key": gw_key(tag, route)})
        except httpx.HTTPError:
            return "no answer"
        m = re.search(r'"inflight";r=(-?\d+)', r.headers.get("ratelimit", ""))
        if m is None:
            print(f"read-back on gateway /{route}: {r.status_code} {r.headers} {r.text[:200]}", file=sys.stderr)
            return f"– ({r.status_code})"
        held += 1 - int(m.group(1))
    return held


def gw_beyond(app: App, probe: Probe, seconds: float) -> int:
    """Admitted beyond the policy api on each route: more 200s than the bucket's 5 plus one a minute;
    on /api also more than 2 at once at the backend (SCG's RequestRateLimiter has no end-of-response
    hook: its route gives a lease back once decided, documented in GatewayRateLimiter)."""
    out = 0
    for route in ("api", "scg"):
        if route == "api":
            out += max(0, app.backend.most.get(gw_key(probe.tag, route), 0) - 2)
        ok = sum(1 for n, st, _ in probe.seen if n.startswith(route) and st == 200)
        out += max(0, ok - 5 - int(seconds // 60))
        if os.environ.get("FAULTS_DEBUG"):
            print(f"gateway /{route}: {app.backend.most.get(gw_key(probe.tag, route), 0)} at once, {ok} admitted, "
                  f"{sorted((n, st, round(t, 2)) for n, st, t in probe.seen if n.startswith(route))}", file=sys.stderr)
    return out


def burst(probe: Probe, kind: str, n: int = 6):
    """The limited endpoints at once: SMS (2 per 10 s), custom (5 per 30 s), LLM (2 in flight); the
    gateway: each route's caller n times (a bucket of 5, 2 in flight)."""
    if kind == "gateway":
        return [(probe.gw, (route,), {}) for route in ("api", "scg") for _ in range(n)]
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
    if os.environ.get("FAULTS_DEBUG"):
        print(f"{app.kind} {fault}: slowest {sorted(((round(t, 2), n, st) for n, st, t in during), reverse=True)[:5]}",
              file=sys.stderr)
    time.sleep(2.5)  # decisions back within 2 s; late replies given back
    if app.kind == "gateway":
        held = gw_after(app, probe.tag)
        return {"app": app.kind, "fault": fault, "slid": False,
                "beyond": gw_beyond(app, probe, time.monotonic() - started), "held": held, "tokens": None,
                "500s": sum(1 for _, st, _ in probe.seen if st == 500),
                "other": sorted({st for _, st, _ in probe.seen if st not in {0, 200, 429, 503, 500}}),
                "dropped": sum(1 for n, st, _ in during if st == 0 and not n.endswith("-left")),
                "slowest": max(took for _, _, took in during)}
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
    with Server(module=not FUNCTIONS) as s:
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
                                           *([] if FUNCTIONS else ["--loadmodule", os.environ["RL_MODULE"]]), *s.extra],
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
                if kind == "gateway":
                    return [(p.gw, (route,), {"sleep_ms": 0}) for route in ("api", "scg") for _ in range(6)]
                return [c for c in b(p) if c[0] != p.llm] + [(p.llm, (), {"sleep_ms": 0})] * 6
            rows.append(measure(app, "a 0.7 s stall of the app", stalled, heal_it=stall_app, heal_at=0.05))

            # Clients that leave mid-request: 1,000-token estimates, nothing used (X-Used-Tokens 0),
            # so every token still charged after is held beyond use; then 3 more on the same key.
            def leavers(p):
                if kind == "gateway":  # 3 leave each route at 0.3 s while the backend works 1.5 s; 3 more come
                    # at 0.6 s (after the gateway closed the leavers' backend connections: a newcomer admitted in
                    # the same millisecond as a leaver's slot freed would be counted at once by the stub)
                    def later(route):
                        time.sleep(0.6)
                        return p.gw(route)
                    return [(p.gw, (route,), {"sleep_ms": 1500, "leave_after": 0.3}) for route in ("api", "scg")
                            for _ in range(3)] + [(later, (route,), {}) for route in ("api", "scg") for _ in range(3)]
                return [(p.llm, (), {"sleep_ms": 1500, "used": 0, "leave_after": 0.3})] * 3 + b(p)[:8]
            # the admitted leavers used nothing; U = 500 of every other LLM call answered 200
            rows.append(measure(app, "client disconnect mid-request", leavers))
            if kind == "gateway":  # no streams, no used(): a gateway forwards what the backend sends
                return rows

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
    with Cluster(3, module=not FUNCTIONS, args=["--cluster-require-full-coverage", "no", "--cluster-node-timeout", "1000"]) as cl:
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
