"""SERVICES.md's "Added for the next round", over HTTP, standalone and on a
three-primary Cluster: endpoint 6 (POST /llm/stream), a late reply that
changes nothing, part of a Cluster down, and the whole Cluster failed."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from redis.crc import key_slot

from conftest import App, Cluster, Server
from services_http import items, stream, wait_until

# This app's (app.py) checks; another example app run through these tests
# (EXAMPLE_APP, e.g. the Django one) adds them when it serves endpoint 6.
pytestmark = pytest.mark.skipif(os.environ.get("EXAMPLE_APP", "app.py") != "app.py",
                                reason="endpoint 6 and the next round's checks: app.py")

LLM_POLICY = '"rate";q=60;w=60, "inflight";q=2, "tokens";q=100000;w=86400, "global";q=1000;w=60'


def llm_state(app: App, key: str) -> dict:
    """What /llm/complete reports for ``key`` now: its 1-token estimate counted, settled to 0 after."""
    r = app.http.post("/llm/complete", json={"max_tokens": 1},
                      headers={"X-Api-Key": key, "X-Zone": "UTC", "X-Sleep-Ms": "0", "X-Used-Tokens": "0",
                               "X-Forwarded-For": "203.0.113.9"})
    it = items(r.headers.get("ratelimit"))
    return {"status": r.status_code, "tokens": it.get("tokens", {}).get("r")}


def endpoint6(app: App) -> None:
    r = stream(app, "s1", headers={"X-Sleep-Ms": "300", "X-Used-Tokens": "100"})
    assert r["status"] == 200
    assert r["headers"]["content-type"].startswith("application/x-ndjson")
    assert r["headers"]["ratelimit-policy"] == LLM_POLICY
    assert r["lines"] == [{"tokens": 33}, {"tokens": 33}, {"tokens": 34}, {"used_tokens": 100}]
    # the headers at once: before the first line (100 ms of "model" later)
    assert r["to_headers"] + 0.05 < r["to_first_line"], (r["to_headers"], r["to_first_line"])
    wait_until("settled to U", lambda: llm_state(app, "s1")["tokens"] == 100_000 - 100 - 1)

    # Two streams hold both in-flight slots (shared with endpoint 5) until their last byte.
    # Seen from their headers (200: each holds its slot until its last byte, 4 s on), not by polling
    # /llm/complete: an admitted poll takes a slot itself, and on a loaded machine it could take one
    # before a stream did, which was then refused.
    done: list[dict] = []
    answered: list[int] = []
    threads = [threading.Thread(target=lambda: done.append(
        stream(app, "s2", headers={"X-Sleep-Ms": "4000", "X-Used-Tokens": "10"}, on_headers=answered.append)))
        for _ in range(2)]
    for t in threads:
        t.start()
    wait_until("both streams answered", lambda: len(answered) == 2, 10)
    assert answered == [200, 200] and len(done) == 0, (answered, done)
    third = app.http.post("/llm/complete", json={"max_tokens": 5},
                          headers={"X-Api-Key": "s2", "X-Zone": "UTC", "X-Forwarded-For": "203.0.113.9"})
    assert third.status_code == 429 and third.headers["retry-after"] == "1"
    for t in threads:
        t.join()
    assert [d["status"] for d in done] == [200, 200]
    wait_until("slots back, each settled to 10", lambda: llm_state(app, "s2") == {"status": 200, "tokens": 100_000 - 21})

    # X-Fail: 500 before the first byte; a client that leaves mid-stream frees its slot within 500 ms.
    assert stream(app, "s3", headers={"X-Fail": "1"})["status"] == 500
    left = stream(app, "s3", headers={"X-Sleep-Ms": "2000", "X-Used-Tokens": "200"}, leave_after=2)
    assert left["lines"] == [{"tokens": 10}, {"tokens": 10}]
    stream(app, "s3", headers={"X-Sleep-Ms": "2000", "X-Used-Tokens": "200"}, leave_after=1)
    time.sleep(0.5)
    both: list[int] = []
    ts = [threading.Thread(target=lambda: both.append(app.http.post(
        "/llm/complete", json={"max_tokens": 1},
        headers={"X-Api-Key": "s3", "X-Zone": "UTC", "X-Sleep-Ms": "300", "X-Used-Tokens": "0",
                 "X-Forwarded-For": "203.0.113.9"}).status_code)) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert both == [200, 200], "a slot of a client that left is still held"
    tokens = llm_state(app, "s3")["tokens"]
    assert 100_000 - tokens - 1 in (30, 40, 50), tokens  # the lines sent (one more may have left as it went)


def test_standalone_stream_and_late_reply():
    with Server() as s:
        app = App(redis_url=f"redis://127.0.0.1:{s.port}", prefix="f1:")
        try:
            endpoint6(app)
            # A late reply changes nothing: answered 503 while Redis was paused, given back when it ran.
            phone = {"phone": "5550100"}
            assert app.http.post("/seed000/sms", json={**phone, "n": 1}).status_code == 200
            s.proc.send_signal(signal.SIGSTOP)
            try:
                slack = app.overhead()
                t0 = time.monotonic()
                late = app.http.post("/seed000/sms", json={**phone, "n": 2})
                assert time.monotonic() - t0 < 1.0 + slack
            finally:
                s.proc.send_signal(signal.SIGCONT)
            assert late.status_code == 503
            time.sleep(2.0)  # Redis runs the late RL.ALL; the app gives it back
            second = app.http.post("/seed000/sms", json={**phone, "n": 3})
            assert second.status_code == 200, "the late request took the second of 2 per 10 s"
            got = items(second.headers["ratelimit"])
            assert (got["short"]["r"], got["long"]["r"]) == (0, 3)
        finally:
            app.stop()


def test_cluster_stream_part_down_and_clusterdown():
    with Cluster(3, args=["--cluster-require-full-coverage", "no", "--cluster-node-timeout", "1000"]) as cl:
        app = App(cluster=",".join(f"127.0.0.1:{n.port}" for n in cl.nodes), prefix="f2:")
        try:
            endpoint6(app)
            # /seed002/api/user/{userId} is keyed by {userId}: its slot says which primary decides it.
            slots = cl.nodes[0].client().execute_command("CLUSTER SLOTS")
            owner = {}
            for entry in (slots.items() if isinstance(slots, dict) else []):
                (lo, hi), info = entry
                owner[(lo, hi)] = info["primary"][1]
            if not owner:  # redis-py's raw list form
                for lo, hi, primary, *_ in slots:
                    owner[(lo, hi)] = primary[1]
            dead = cl.nodes[2]

            def on(u: str) -> int:
                slot = key_slot(u.encode())
                return next(port for (lo, hi), port in owner.items() if lo <= slot <= hi)

            users = [f"u{i}" for i in range(30)]
            on_dead = {u for u in users if on(u) == dead.port}
            assert 0 < len(on_dead) < len(users)
            dead.stop()
            for _ in range(2):
                for u in users:
                    slack = app.overhead()
                    t0 = time.monotonic()
                    r = app.http.get(f"/seed002/api/user/{u}", headers={"X-Forwarded-For": "203.0.113.9"})
                    assert time.monotonic() - t0 < 1.0 + slack, (u, slack)
                    if u in on_dead:
                        assert r.status_code == 503, (u, r.status_code)
                    else:
                        assert r.status_code in (200, 429) and "ratelimit" in r.headers, (u, r.status_code)
            # The cluster failed: CLUSTERDOWN on the last primary once two of three are gone.
            cl.nodes[1].stop()
            last = cl.nodes[0].client()
            wait_until("cluster_state:fail", lambda: last.execute_command("CLUSTER INFO")["cluster_state"] == "fail",
                       timeout=10)
            for path, status in (("/seed002/api/default", 200), ("/seed002/api/custom", 503),
                                 ("/seed002/api/user/u1", 503)):
                slack = app.overhead()
                t0 = time.monotonic()
                r = app.http.get(path, headers={"X-Forwarded-For": "203.0.113.9"})
                assert time.monotonic() - t0 < 1.0 + slack and r.status_code == status, (path, r.status_code, slack)
        finally:
            app.stop()
