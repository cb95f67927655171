"""SERVICES.md over HTTP against the example app (one Redis 7.0 with the
module; a second instance and a later one; a three-primary Cluster; Redis
stopped and restarted mid-run)."""

from __future__ import annotations

import concurrent.futures as cf
import math
import subprocess
import time

import httpx
import pytest

from conftest import BACKEND, App, Cluster, Server, redis_cli, rl

PROBLEM = "https://redis-ratelimit.dev/problems/"


def problem(r, status, kind):
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    body = r.json()
    assert body["type"] == PROBLEM + kind and body["status"] == status and body["title"] and body["detail"]


def test_sms_rules_duplicates_and_headers(app, details):
    h = app.http
    t0 = time.monotonic()

    def counts_down_from(header, w):
        # w seconds from the first request, rounded up: a loaded machine may
        # take more than a second between the requests.
        gone = math.ceil(time.monotonic() - t0)
        return w - gone <= int(header) <= w

    ok = h.post("/seed000/sms", json={"phone": "100"})
    assert ok.status_code == 200 and ok.json() == {"sent": True}
    assert ok.headers["RateLimit-Policy"] == '"short";q=2;w=10, "long";q=5;w=3600, "duplicate";q=1;w=5'
    if details:
        assert ok.headers["RateLimit"] == '"short";r=1;t=10, "long";r=4;t=3600, "duplicate";r=0;t=5'
    dup = h.post("/seed000/sms", json={"phone": "100"})
    problem(dup, 429, "duplicate")
    assert counts_down_from(dup.headers["Retry-After"], 5), dup.headers["Retry-After"]
    assert h.post("/seed000/sms", content=b'{"phone": "100"}').status_code == 200  # other bytes
    third = h.post("/seed000/sms", content=b'{"phone":"100" }')
    problem(third, 429, "rate-limited")
    assert counts_down_from(third.headers["Retry-After"], 10), third.headers["Retry-After"]
    # the refusal changed nothing: another phone is unaffected, this one still refused
    assert h.post("/seed000/sms", json={"phone": "101"}).status_code == 200


def test_bad_input_answered_before_redis(app):
    h = app.http
    problem(h.post("/seed000/sms", content=b"{nope"), 400, "bad-request")
    problem(h.post("/seed000/sms", json={"phone": "12a"}), 400, "bad-request")
    problem(h.post("/seed000/sms", json={"phone": "1" * 21}), 400, "bad-request")
    problem(h.post("/seed001/ocr"), 401, "unauthorized")
    problem(h.post("/llm/complete", json={"max_tokens": 10}, headers={"X-Zone": "UTC"}), 401, "unauthorized")
    # A fixed offset (RL.QUOTA takes it) and Debian's non-IANA zoneinfo files are no IANA zones.
    for zone, body in [("Mars/Base", {"max_tokens": 10}), ("+05:00", {"max_tokens": 10}),
                       ("localtime", {"max_tokens": 10}), ("posixrules", {"max_tokens": 10}), ("UTC", {"max_tokens": 0}),
                       ("UTC", {"max_tokens": 100_001}), ("UTC", {"max_tokens": "5"})]:
        r = h.post("/llm/complete", json=body, headers={"X-Api-Key": "bad", "X-Zone": zone})
        problem(r, 400, "bad-request")
    problem(h.put("/admin/limits/ocr", json={"day": -1, "hour": 1}), 400, "bad-request")
    # an integer is one written as an integer (as Jackson and the Node apps read JSON)
    for text in (b'{"max_tokens": 1e3}', b'{"max_tokens": 100.0}'):
        r = h.post("/llm/complete", content=text, headers={"X-Api-Key": "bad", "X-Zone": "UTC"})
        problem(r, 400, "bad-request")
    problem(h.put("/admin/limits/ocr", content=b'{"day": 5.0, "hour": 1}'), 400, "bad-request")
    problem(h.post("/seed000/sms", json={"phone": 123}), 400, "bad-request")
    # the body is JSON whatever its Content-Type: not JSON is 400, JSON is decided
    problem(h.post("/seed000/sms", content=b"phone=1", headers={"Content-Type": "text/plain"}), 400, "bad-request")
    sent = h.post("/seed000/sms", content=b'{"phone": "1005"}', headers={"Content-Type": "text/plain"})
    assert sent.status_code == 200, sent.text


def test_fake_model_knobs(app):
    """X-Used-Tokens above N (even beyond a long) counts as N; not a number: the default."""
    h = app.http
    r = h.post("/llm/complete", json={"max_tokens": 10}, headers={
        "X-Api-Key": "knobs", "X-Zone": "UTC", "X-Used-Tokens": "99999999999999999999999", "X-Sleep-Ms": "0"})
    assert (r.status_code, r.json()) == (200, {"used_tokens": 10})
    r = h.post("/llm/complete", json={"max_tokens": 10}, headers={
        "X-Api-Key": "knobs", "X-Zone": "UTC", "X-Used-Tokens": "x", "X-Sleep-Ms": "-5"})
    assert (r.status_code, r.json()) == (200, {"used_tokens": 5})
    r = h.post("/llm/complete", json={"max_tokens": 10}, headers={  # a digit to str.isdigit, no int: the default
        "X-Api-Key": "knobs", "X-Zone": "UTC", "X-Used-Tokens": b"\xb2", "X-Sleep-Ms": b"\xb2"})
    assert (r.status_code, r.json()) == (200, {"used_tokens": 5})


def test_a_body_nested_past_the_parsers_stack_is_a_400(app):
    """JSON nested 2000 deep (4 KB) is bad input like any other, not a 500 (RecursionError)."""
    deep = b"[" * 2000 + b"]" * 2000
    problem(app.http.post("/seed000/sms", content=b'{"phone": "1", "x": ' + deep + b"}"), 400, "bad-request")
    r = app.http.post("/llm/complete", content=b'{"max_tokens": 10, "x": ' + deep + b"}",
                      headers={"X-Api-Key": "deep", "X-Zone": "UTC"})
    problem(r, 400, "bad-request")


def test_model_knobs_past_any_integer_count_as_the_most(app):
    """X-Used-Tokens of 5000 digits (past int()'s 4300) counts as N; X-Sleep-Ms of 400 digits
    (past a float) sleeps the longest / streams the most lines (10,000) the apps allow: no 500."""
    h = app.http
    r = h.post("/llm/complete", json={"max_tokens": 10}, headers={
        "X-Api-Key": "huge-tokens", "X-Zone": "UTC", "X-Used-Tokens": "9" * 5000, "X-Sleep-Ms": "0" * 500 + "1"})
    assert (r.status_code, r.json()) == (200, {"used_tokens": 10})
    with h.stream("POST", "/llm/stream", json={"max_tokens": 100000}, headers={
            "X-Api-Key": "huge-stream", "X-Zone": "UTC", "X-Used-Tokens": "9" * 5000, "X-Sleep-Ms": "9" * 400}) as r:
        assert r.status_code == 200
        assert next(r.iter_lines()) == '{"tokens": 10}'  # 100,000 tokens over 10,000 lines (0 a line were it endless)
    with pytest.raises(httpx.ReadTimeout):  # still sleeping, not answered 500
        h.post("/llm/complete", json={"max_tokens": 10}, timeout=1.0,
               headers={"X-Api-Key": "huge-sleep", "X-Zone": "UTC", "X-Sleep-Ms": "9" * 400})


def test_ocr_limits_change_at_run_time_across_instances(app, redis_server, details):
    h = app.http
    user = {"X-User": "ocr-user"}
    got = [h.post("/seed001/ocr", headers=user).status_code for _ in range(6)]
    assert got == [200] * 5 + [429]
    second = App(redis_url=f"redis://127.0.0.1:{redis_server.port}", prefix="one:")
    try:
        assert second.http.post("/seed001/ocr", headers=user).status_code == 429  # one service
        assert h.put("/admin/limits/ocr", json={"day": 20, "hour": 7}).status_code == 204
        time.sleep(1.0)
        assert second.http.get("/admin/limits/ocr").json() == {"day": 20, "hour": 7}
        assert second.http.post("/seed001/ocr", headers=user).status_code == 200
        assert h.post("/seed001/ocr", headers=user).status_code == 200
        assert h.post("/seed001/ocr", headers=user).status_code == 429  # 7 counted, nothing reset
        assert second.http.put("/admin/limits/ocr", json={"day": 0, "hour": 7}).status_code == 204
        time.sleep(1.0)
        off = h.post("/seed001/ocr", headers={"X-User": "other"})
        problem(off, 429, "rate-limited")
        assert "Retry-After" not in off.headers
        assert off.headers["RateLimit-Policy"].startswith('"day";q=0;w=86400, "hour";q=7;w=3600')
        if details:  # a refusal: each rule's own peek at the request's cost
            assert off.headers["RateLimit"].startswith('"day";r=0;t=') and '"hour";r=6;' in off.headers["RateLimit"]
        later = App(redis_url=f"redis://127.0.0.1:{redis_server.port}", prefix="one:")
        assert later.http.get("/admin/limits/ocr").json() == {"day": 0, "hour": 7}
        later.stop()
    finally:
        h.put("/admin/limits/ocr", json={"day": 20, "hour": 5})
        second.stop()


def test_api_headers_ip_and_x_ratelimit(app):
    h = app.http
    xff = {"X-Forwarded-For": "203.0.113.9, 198.51.100.7, 127.0.0.1"}
    r = h.get("/seed002/api/custom", headers=xff)
    assert r.status_code == 200
    assert r.headers["RateLimit-Policy"] == '"custom";q=5;w=30'
    assert r.headers["RateLimit"] == '"custom";r=4;t=30'
    assert (r.headers["X-RateLimit-Limit"], r.headers["X-RateLimit-Remaining"], r.headers["X-RateLimit-Reset"]) \
        == ("5", "4", "30")
    for _ in range(4):
        assert h.get("/seed002/api/custom", headers=xff).status_code == 200
    refused = h.get("/seed002/api/custom", headers=xff)
    problem(refused, 429, "rate-limited")
    assert refused.headers["X-RateLimit-Remaining"] == "0" and int(refused.headers["Retry-After"]) in (29, 30)
    # the right-most non-loopback address is the client: another one is fresh
    assert h.get("/seed002/api/custom", headers={"X-Forwarded-For": "198.51.100.8"}).status_code == 200
    users = [h.get("/seed002/api/user/u7").status_code for _ in range(4)]
    assert users == [200, 200, 200, 429]
    assert h.get("/seed002/api/default").headers["RateLimit"] == '"default";r=9;t=60'


def test_login_lockout(app):
    h = app.http
    xff = {"X-Forwarded-For": "192.0.2.44"}
    got = [h.post("/seed004/login", headers=xff) for _ in range(7)]
    assert [r.status_code for r in got] == [200] * 5 + [429, 429]
    assert got[0].headers["RateLimit"] == '"login";r=4;t=10'
    problem(got[5], 429, "locked")
    assert got[5].headers["Retry-After"] == "30" and got[5].headers["RateLimit"] == '"login";r=0;t=30'


def test_llm_inflight_tokens_and_failures(app, redis_server, details):
    h = app.http
    key = {"X-Api-Key": "k1", "X-Zone": "Asia/Tokyo"}
    raw = redis_server.client()

    def used():
        d = rl(raw, "RL.QUOTAPEEK", "one:llm:{llm}:k1:tokens", "*", "Asia/Tokyo", "DAY", 100_000, "COST", 0)
        return 100_000 - d[3]

    def inflight():
        return 2 - rl(raw, "RL.LEASEPEEK", "one:llm:{llm}:k1:inflight", "*", 2, "COST", 0)[3]

    def eventually(predicate, timeout=5.0):
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.02)

    with cf.ThreadPoolExecutor(3) as pool:
        slow = [pool.submit(h.post, "/llm/complete", json={"max_tokens": 1000},
                            headers={**key, "X-Sleep-Ms": "3000", "X-Used-Tokens": "300"}) for _ in range(2)]
        eventually(lambda: inflight() == 2)
        assert used() == 2000
        third = h.post("/llm/complete", json={"max_tokens": 10}, headers=key)
        problem(third, 429, "rate-limited")
        assert third.headers["Retry-After"] == "1"
        assert [f.result().json() for f in slow] == [{"used_tokens": 300}] * 2
    assert inflight() == 0 and used() == 600
    failed = h.post("/llm/complete", json={"max_tokens": 5000}, headers={**key, "X-Fail": "1"})
    assert failed.status_code == 500
    assert inflight() == 0 and used() == 600
    ok = h.post("/llm/complete", json={"max_tokens": 100}, headers=key)
    assert ok.json() == {"used_tokens": 50} and used() == 650
    assert ok.headers["RateLimit-Policy"] == \
        '"rate";q=60;w=60, "inflight";q=2, "tokens";q=100000;w=86400, "global";q=1000;w=60'
    if details:  # every item: what remains with this request counted (its estimate of 100 included)
        items = ok.headers["RateLimit"].split(", ")
        assert [i.split(";")[0] for i in items] == ['"rate"', '"inflight"', '"tokens"', '"global"']
        assert items[1] == '"inflight";r=1;t=60' and items[2].startswith('"tokens";r=99300;')
        assert items[3].startswith('"global";r=') and items[0].startswith('"rate";r=')
    # a client that goes away: the lease is back when the model call ends —
    # it may end at the disconnect (SERVICES.md: Django cancels the view) or
    # run on (FastAPI), so 1 in flight may or may not be seen in between
    t0 = time.monotonic()
    with pytest.raises(httpx.TimeoutException):
        h.post("/llm/complete", json={"max_tokens": 10}, headers={**key, "X-Sleep-Ms": "800"}, timeout=0.2)
    eventually(lambda: inflight() == 0)
    assert time.monotonic() - t0 < 0.8 + 0.5 + 1.0  # X-Sleep-Ms + 500 ms, and slack for a loaded machine
    raw.close()


def test_model_knobs_that_are_not_integers_take_their_defaults(app):
    """X-Used-Tokens / X-Sleep-Ms that are not non-negative integers: the
    defaults (floor(N/2), 100 ms), in both example apps."""
    r = app.http.post("/llm/complete", json={"max_tokens": 10},
                      headers={"X-Api-Key": "knobs", "X-Zone": "UTC", "X-Used-Tokens": "-5", "X-Sleep-Ms": "soon"})
    assert (r.status_code, r.json()) == (200, {"used_tokens": 5})


def test_twenty_concurrent_clients_never_above_the_limit(app):
    with cf.ThreadPoolExecutor(20) as pool:
        codes = list(pool.map(lambda _: app.http.get("/seed002/api/user/conc").status_code, range(40)))
    assert codes.count(200) == 3 and codes.count(429) == 37


def test_redis_down_fails_open_or_closed_and_recovers(tmp_path):
    with Server() as s:
        a = App(redis_url=f"redis://127.0.0.1:{s.port}", prefix="down:")
        try:
            assert a.http.get("/seed002/api/default").status_code == 200
            args = s.proc.args  # to restart it on the same port
            with cf.ThreadPoolExecutor(1) as pool:  # admitted, then Redis goes away before the settlement
                running = pool.submit(a.http.post, "/llm/complete", json={"max_tokens": 10},
                                      headers={"X-Api-Key": "k", "X-Zone": "UTC", "X-Sleep-Ms": "700"})
                time.sleep(0.3)
                s.proc.terminate()
                s.proc.wait(10)
                done = running.result()
                assert done.status_code == 200 and done.json() == {"used_tokens": 5}
            for path in ["/seed002/api/default", "/seed002/api/custom"]:
                slack = a.overhead()  # 1 s plus what the machine adds to any answer now (conftest)
                t0 = time.monotonic()
                r = a.http.get(path)
                assert time.monotonic() - t0 < 1.0 + slack, (path, slack)
                if path.endswith("default"):
                    assert r.status_code == 200 and "RateLimit" not in r.headers
                else:
                    problem(r, 503, "unavailable")
            slack = a.overhead()
            t0 = time.monotonic()
            problem(a.http.post("/seed000/sms", json={"phone": "5"}), 503, "unavailable")
            assert time.monotonic() - t0 < 1.0 + slack
            assert a.http.get("/health").status_code == 200
            s.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    if s.client().ping():
                        break
                except Exception:
                    time.sleep(0.02)
            up = time.monotonic()
            while a.http.get("/seed002/api/custom").status_code != 200:
                assert time.monotonic() - up < 2.0, "not back within 2 s"
                time.sleep(0.05)
            assert "RateLimit" in a.http.get("/seed002/api/default").headers
        finally:
            a.stop()


@pytest.mark.skipif(redis_cli() is None, reason="redis-cli is needed to create a cluster")
def test_cluster_same_answers_zero_moved():
    with Cluster(3) as cl:
        a = App(cluster=",".join(f"127.0.0.1:{n.port}" for n in cl.nodes), prefix="cl:")
        try:
            for n in cl.nodes:
                n.client().config_resetstat()
            h = a.http
            assert [h.post("/seed000/sms", json={"phone": "77"}).status_code,
                    h.post("/seed000/sms", json={"phone": "77"}).status_code] == [200, 429]
            assert [h.post("/seed001/ocr", headers={"X-User": f"u{i % 3}"}).status_code for i in range(18)].count(200) \
                == 15
            assert [h.get(f"/seed002/api/user/x{i % 4}").status_code for i in range(16)].count(200) == 12
            assert [h.post("/seed004/login").status_code for _ in range(6)] == [200] * 5 + [429]
            for i in range(4):
                r = h.post("/llm/complete", json={"max_tokens": 10}, headers={"X-Api-Key": f"c{i}", "X-Zone": "UTC",
                                                                               "X-Sleep-Ms": "1"})
                assert r.json() == {"used_tokens": 5}
            moved = sum(int(n.client().info("errorstats").get("errorstat_MOVED", {}).get("count", 0))
                        for n in cl.nodes)
            assert moved == 0
        finally:
            a.stop()


def test_redis_accepting_but_never_answering(tmp_path):
    import signal
    with Server() as s:
        a = App(redis_url=f"redis://127.0.0.1:{s.port}", prefix="stop:")
        try:
            assert a.http.get("/seed002/api/custom").status_code == 200
            s.proc.send_signal(signal.SIGSTOP)  # our own server process: accepts, never answers
            try:
                slack = a.overhead(5)  # 1 s plus what the machine adds to 5 answers at once (conftest)
                with cf.ThreadPoolExecutor(5) as pool:
                    def timed(path):
                        t0 = time.monotonic()
                        r = a.http.get(path)
                        return r.status_code, "RateLimit" in r.headers, time.monotonic() - t0
                    got = list(pool.map(timed, ["/seed002/api/custom", "/seed002/api/default"] * 5))
                assert all(code == 503 for code, _, _ in got[0::2])
                assert all(code == 200 and not headers for code, headers, _ in got[1::2])
                assert max(t for _, _, t in got) < 1.0 + slack, (got, slack)
            finally:
                s.proc.send_signal(signal.SIGCONT)
            up = time.monotonic()
            while a.http.get("/seed002/api/custom").status_code != 200:
                assert time.monotonic() - up < 2.0, "not back within 2 s"
                time.sleep(0.05)
        finally:
            a.stop()


def test_app_refuses_to_start_without_the_module():
    import os
    import sys
    from conftest import APP, free_port
    with Server(module=False) as s:
        env = dict(os.environ, PORT=str(free_port()), REDIS_URL=f"redis://127.0.0.1:{s.port}", RL_BACKEND="module")
        done = subprocess.run([sys.executable, str(APP)], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "module is not loaded" in lines[0], done.stderr


def test_app_refuses_an_unknown_backend_in_one_line():
    import os
    import sys
    from conftest import APP, free_port
    env = dict(os.environ, PORT=str(free_port()), REDIS_URL="redis://127.0.0.1:1", RL_BACKEND="bogus")
    done = subprocess.run([sys.executable, str(APP)], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    assert done.stderr.strip() == (f"example-{'django' if APP.parent.name == 'django' else 'python'}: RL_BACKEND: "
                                   "invalid backend 'bogus': 'module', 'functions' or 'auto'"), done.stderr


@pytest.mark.parametrize("setting", [{"REDIS_CLUSTER": "127.0.0.1"}, {"REDIS_CLUSTER": "127.0.0.1:abc"},
                                     {"REDIS_CLUSTER": "127.0.0.1:7000,:"}, {"REDIS_URL": "http://127.0.0.1:6379"}])
def test_app_refuses_a_malformed_redis_setting_in_one_line(setting):
    """A typo in REDIS_CLUSTER or REDIS_URL is one line naming the setting and a non-zero exit at start,
    as RL_BACKEND's (SERVICES.md), not a traceback."""
    import os
    import sys
    from conftest import APP, free_port
    env = {**os.environ, "PORT": str(free_port()), "REDIS_URL": "redis://127.0.0.1:1", **setting}
    done = subprocess.run([sys.executable, str(APP)], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    name = next(iter(setting))
    assert done.stderr.strip().startswith(f"example-{'django' if APP.parent.name == 'django' else 'python'}: {name}: "), \
        done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_one_decision_is_one_command_of_the_backend(app, redis_server):
    """SERVICES.md: with RL_BACKEND=functions one decision is one FCALL (INFO
    commandstats), with the module one RL command."""
    raw = redis_server.client()
    raw.config_resetstat()
    assert app.http.get("/seed002/api/custom", headers={"X-Forwarded-For": "198.51.100.77"}).status_code == 200
    stats = raw.info("commandstats")
    raw.close()
    rl_calls = sum(v["calls"] for k, v in stats.items() if k.startswith("cmdstat_rl."))
    fcalls = sum(v["calls"] for k, v in stats.items() if k in ("cmdstat_fcall", "cmdstat_fcall_ro"))
    assert (fcalls, rl_calls) == ((1, 0) if BACKEND == "functions" else (0, 1)), stats


@pytest.mark.skipif(BACKEND == "functions", reason="needs a server with the module to lose it")
def test_auto_decides_with_the_library_once_the_module_is_gone():
    """RL_BACKEND=auto: a failover to a server without the module (here the
    module unloaded) is decided by the Functions library, not answered 503."""
    with Server(args=["--enable-module-command", "yes"]) as s:
        a = App(redis_url=f"redis://127.0.0.1:{s.port}", prefix="auto:", backend="auto")
        try:
            ip = {"X-Forwarded-For": "198.51.100.9"}
            assert a.http.get("/seed002/api/custom", headers=ip).status_code == 200
            s.client().execute_command("MODULE", "UNLOAD", "ratelimit")
            got = [a.http.get("/seed002/api/custom", headers=ip) for _ in range(5)]
            assert [r.status_code for r in got] == [200, 200, 200, 200, 429]  # 5 in 30 s, counted on
            assert got[0].headers["RateLimit"].startswith('"custom";r=3;')
        finally:
            a.stop()
