"""Several policies on one request decided in ONE RL.ALL (redis_rl.combined):
one call per request (INFO commandstats), a refusal by the second policy
charges nothing on the first, every limit in the headers, one permit that
releases every lease and settles every estimate (return, exception,
cancellation); FastAPI and Flask; under Cluster slot by slot with refunds."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import flask
import pytest
import redis.asyncio
from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from redis_rl import (AsyncRateLimiter, Policy, RateLimiter, RateLimitExceeded, concurrency, lockout, quota,
                      sliding_window)
from redis_rl.adapters.flask import FlaskRateLimits
from redis_rl.adapters.starlette import RateLimits

S = timedelta(seconds=1)


def sms(prefix: str) -> tuple[Policy, Policy]:
    """20 an hour per IP, 1 a minute (and 5 a day) per phone: the new user's /sms/send."""
    per_ip = Policy("sms-ip", [sliding_window("ip", 20, timedelta(hours=1))], prefix=prefix)
    per_phone = Policy("sms-phone", [sliding_window("minute", 1, timedelta(minutes=1)),
                                     quota("day", "UTC", "day", 5)], prefix=prefix)
    return per_ip, per_phone


def jobs(prefix: str) -> tuple[Policy, Policy]:
    """A concurrency limit per user and a metered daily budget per tenant."""
    per_user = Policy("jobs", [concurrency("inflight", 1, timedelta(seconds=60))], prefix=prefix)
    per_tenant = Policy("tenant", [quota("units", "UTC", "day", 1000, metered=True)], prefix=prefix)
    return per_user, per_tenant


def used_ip(raw, prefix, ip) -> int:
    """Units the IP window holds (a peek: writes nothing)."""
    return 20 - raw.execute_command("RL.PEEK", f"{prefix}sms-ip:{{{ip}}}:ip", "*", 20, 3_600_000, "COST", 0)[3]


def leases(raw, prefix, user) -> int:
    return 1 - raw.execute_command("RL.LEASEPEEK", f"{prefix}jobs:{{{user}}}:inflight", "*", 1, "COST", 0)[3]


def units(raw, prefix, tenant) -> int:
    return 1000 - raw.execute_command("RL.QUOTAPEEK", f"{prefix}tenant:{{{tenant}}}:units", "*", "UTC", "DAY", 1000,
                                      "COST", 0)[3]


def rl_calls(client) -> dict[str, int]:
    return {k[len("cmdstat_"):]: int(v["calls"]) for k, v in client.info("commandstats").items()
            if k.startswith("cmdstat_rl.")}


def test_two_policies_one_rl_all_and_a_refusal_charges_nothing(server, raw, key):
    rl = RateLimiter(server.client())
    per_ip, per_phone = sms(key + ":")
    rl.ensure_module()
    raw.config_resetstat()
    first = rl.decide_all([per_ip.bind("192.0.2.1"), per_phone.bind("+15550001")])
    assert rl_calls(raw) == {"rl.all": 1}
    assert first.allowed and first.binding == "minute"  # 0 left of this shape: the tightest
    assert {n: (s.limited, s.remaining) for n, s in first.states.items()} == {
        "ip": (False, 19), "minute": (False, 0), "day": (False, 4)}
    second = rl.decide_all([per_ip.bind("192.0.2.1"), per_phone.bind("+15550001")])
    assert rl_calls(raw) == {"rl.all": 2}
    assert second.limited and second.binding == "minute" and second.problem == "rate-limited"
    assert timedelta(seconds=59) < second.retry_after <= timedelta(seconds=60)
    assert second.policy.origin("minute") is per_phone
    assert used_ip(raw, key + ":", "192.0.2.1") == 1  # the refused call charged nothing on the IP
    # a refusal by the first policy leaves the second's counters as they were
    tight_ip = Policy("sms-ip", [sliding_window("ip", 1, timedelta(hours=1))], prefix=key + ":x")
    rl.decide_all([tight_ip.bind("192.0.2.2"), per_phone.bind("+15550002")])
    refused = rl.decide_all([tight_ip.bind("192.0.2.2"), per_phone.bind("+15550003")])
    assert refused.limited and refused.binding == "ip"
    assert rl.decide(per_phone, "+15550003").allowed  # its minute was untouched


def test_one_binding_is_the_plain_decision_and_bad_bindings_are_refused(server, key):
    rl = RateLimiter(server.client())
    per_ip, per_phone = sms(key + ":")
    one = rl.decide_all([per_ip.bind("192.0.2.9")])
    assert one.policy is per_ip and one.states["ip"].remaining == 19
    lock = Policy("login", [lockout("fails", 3, 60 * S, 300 * S)])
    with pytest.raises(ValueError, match="lockout"):
        rl.decide_all([per_ip.bind("a"), lock.bind("a")])
    with pytest.raises(TypeError):
        rl.decide_all([per_ip.bind("a"), (per_phone, "b")])  # type: ignore[list-item]
    # the same policy for two keys: one name shown as <policy>.<limit>
    both = rl.decide_all([per_ip.bind("192.0.2.10"), per_ip.bind("192.0.2.11")])
    assert set(both.states) == {"ip", "sms-ip.ip"}
    # the same binding twice counts once
    twice = rl.decide_all([per_ip.bind("192.0.2.12"), per_ip.bind("192.0.2.12")])
    assert twice.states["ip"].remaining == 19


def test_one_permit_releases_every_lease_and_settles_every_estimate(server, raw, key):
    rl = RateLimiter(server.client())
    per_user, per_tenant = jobs(key + ":")
    p = key + ":"
    with rl.acquire_all([per_user.bind("u1"), per_tenant.bind("t1", estimate=300)]) as permit:
        assert leases(raw, p, "u1") == 1 and units(raw, p, "t1") == 300  # the lease and the estimate, up front
        with pytest.raises(RateLimitExceeded) as e:  # in flight: a second is refused, charging no units
            with rl.acquire_all([per_user.bind("u1"), per_tenant.bind("t1", estimate=300)]):
                pytest.fail("admitted a second in flight")
        assert e.value.decision.binding == "inflight" and e.value.decision.retry_after == S
        assert units(raw, p, "t1") == 300
        permit.used(120)
    assert leases(raw, p, "u1") == 0 and units(raw, p, "t1") == 120  # released, 180 refunded
    with pytest.raises(RuntimeError):
        with rl.acquire_all([per_user.bind("u1"), per_tenant.bind("t1", estimate=500)]):
            raise RuntimeError("the job failed")
    assert leases(raw, p, "u1") == 0 and units(raw, p, "t1") == 120  # released, all 500 refunded


@pytest.mark.anyio
async def test_async_permit_on_cancellation(server, raw, key):
    client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
    rl = AsyncRateLimiter(client)
    per_user, per_tenant = jobs(key + ":")
    p = key + ":"
    entered = asyncio.Event()

    async def job():
        async with rl.acquire_all([per_user.bind("u2"), per_tenant.bind("t2", estimate=400)]):
            entered.set()
            await asyncio.sleep(30)

    task = asyncio.create_task(job())
    await entered.wait()
    assert leases(raw, p, "u2") == 1 and units(raw, p, "t2") == 400
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert leases(raw, p, "u2") == 0 and units(raw, p, "t2") == 0
    await client.aclose()


@pytest.fixture
def unused_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fastapi_app(url_port: int, prefix: str):
    app = FastAPI()
    limits = RateLimits(AsyncRateLimiter(redis.asyncio.Redis(host="127.0.0.1", port=url_port)))
    limits.install(app)
    per_ip, per_phone = sms(prefix)
    per_user, per_tenant = jobs(prefix)

    @app.post("/sms/send", dependencies=[Depends(limits.depends([
        limits.bind(per_ip, limits.client_ip),
        limits.bind(per_phone, limits.header("X-Phone", problem="bad-request")),
    ]))])
    async def send():
        return {"sent": True}

    @app.post("/jobs")
    async def run(fail: bool = False, permit=Depends(limits.scope([
        limits.bind(per_user, limits.header("X-User")),
        limits.bind(per_tenant, lambda r: "t3", estimate=lambda r: 200),
    ]))):
        if fail:
            raise RuntimeError("the job failed")
        permit.used(50)
        return {"done": True}
    return app


def test_fastapi_list_of_bindings(server, raw, key):
    p = key + ":"
    with TestClient(fastapi_app(server.port, p), raise_server_exceptions=False) as client:
        assert client.post("/jobs", headers={"X-User": "warm"}).status_code == 200  # the first-use module check
        raw.config_resetstat()
        ok = client.post("/sms/send", headers={"X-Phone": "+15550100"})
        assert ok.status_code == 200 and rl_calls(raw) == {"rl.all": 1}
        assert ok.headers["RateLimit-Policy"] == '"ip";q=20;w=3600, "minute";q=1;w=60, "day";q=5;w=86400'
        assert ok.headers["RateLimit"].startswith('"ip";r=19;t=3600, "minute";r=0;t=60, "day";r=4;t=')
        no = client.post("/sms/send", headers={"X-Phone": "+15550100"})
        assert no.status_code == 429 and rl_calls(raw) == {"rl.all": 2}
        assert no.headers["Retry-After"] == "60"
        assert no.json()["detail"].startswith("limit 'minute' of 'sms-phone' exceeded")
        # a refusal's items are each limit's peek at the call's cost (SPEC DETAILS): 18 would be left
        assert no.headers["RateLimit"].startswith('"ip";r=18;t=3600, "minute";r=0;t=60, "day";r=3;t=')
        testclient_ip = "testclient"  # Starlette's TestClient peer
        assert used_ip(raw, p, testclient_ip) == 1  # the refused call charged nothing on the IP
        assert client.post("/sms/send").status_code == 400  # no phone: nothing decided
        assert used_ip(raw, p, testclient_ip) == 1

        assert client.post("/jobs", headers={"X-User": "u3"}).status_code == 200
        assert leases(raw, p, "u3") == 0 and units(raw, p, "t3") == 100  # 50 used twice (with the warm-up)
        assert client.post("/jobs?fail=true", headers={"X-User": "u3"}).status_code == 500
        assert leases(raw, p, "u3") == 0 and units(raw, p, "t3") == 100  # released and refunded on the raise


def test_fastapi_refuses_mixed_arguments():
    limits = RateLimits(AsyncRateLimiter(redis.asyncio.Redis(port=1), check_module=False))
    per_ip, _ = sms("")
    with pytest.raises(TypeError):
        limits.depends([limits.bind(per_ip, limits.client_ip)], limits.client_ip)
    with pytest.raises(TypeError):
        limits.depends(per_ip)


def test_fastapi_list_when_redis_is_down_fails_closed_if_any_policy_does(unused_port):
    app = FastAPI()
    limits = RateLimits(AsyncRateLimiter(redis.asyncio.Redis(host="127.0.0.1", port=unused_port)))
    limits.install(app)
    per_ip, per_phone = sms("")
    opened = Policy("open", [sliding_window("w", 5, 60 * S)], fail="open")

    @app.get("/closed", dependencies=[Depends(limits.depends([limits.bind(opened, limits.client_ip),
                                                              limits.bind(per_ip, limits.client_ip)]))])
    async def closed():
        return "ran"

    with TestClient(app) as client:
        r = client.get("/closed")
        assert r.status_code == 503 and r.json()["type"].endswith("/unavailable")
        assert "'open+sms-ip'" in r.json()["detail"]


def test_flask_list_and_stacked_decorators_decide_once(server, raw, key):
    p = key + ":"
    app = flask.Flask(__name__)
    limits = FlaskRateLimits(RateLimiter(server.client()))
    per_ip, per_phone = sms(p)
    per_user, per_tenant = jobs(p)
    phone = lambda: flask.request.headers["X-Phone"]  # noqa: E731

    @app.post("/sms/send")
    @limits.limit([limits.bind(per_ip, key=limits.client_ip), limits.bind(per_phone, key=phone)])
    def send():
        return {"sent": True}

    @app.post("/sms/stacked")
    @limits.limit(per_ip, key=limits.client_ip)
    @limits.limit(per_phone, key=phone)
    def stacked():
        return {"sent": True}

    @app.post("/jobs")
    @limits.limit(per_user, key=lambda: "u4", scope=True)
    @limits.limit(per_tenant, key=lambda: "t4", scope=True, estimate=lambda: 100)
    def job():
        if flask.request.args.get("fail"):
            raise RuntimeError("the job failed")
        flask.g.rate_limit_permit.used(30)
        return "done"

    c = app.test_client()
    limits.limiter.ensure_module()  # the first-use check, before counting calls
    for path, ip in (("/sms/send", "192.0.2.50"), ("/sms/stacked", "192.0.2.51")):
        raw.config_resetstat()
        ok = c.post(path, headers={"X-Phone": "+1555" + ip[-2:]}, environ_base={"REMOTE_ADDR": ip})
        assert ok.status_code == 200 and rl_calls(raw) == {"rl.all": 1}, path
        assert ok.headers["RateLimit-Policy"] == '"ip";q=20;w=3600, "minute";q=1;w=60, "day";q=5;w=86400'
        no = c.post(path, headers={"X-Phone": "+1555" + ip[-2:]}, environ_base={"REMOTE_ADDR": ip})
        assert no.status_code == 429 and rl_calls(raw) == {"rl.all": 2}, path
        assert used_ip(raw, p, ip) == 1, path
    assert c.post("/jobs").status_code == 200
    assert leases(raw, p, "u4") == 0 and units(raw, p, "t4") == 30
    app.testing = False  # a raising view answers 500 instead of propagating
    assert c.post("/jobs?fail=1").status_code == 500
    assert leases(raw, p, "u4") == 0 and units(raw, p, "t4") == 30


# --- Cluster: keys of two policies keyed differently hash to different slots ---

def cluster_calls(cluster) -> tuple[int, int]:
    """(RL.ALL calls, CROSSSLOT errors) across the primaries."""
    alls = crossslot = 0
    for node in cluster.nodes:
        c = node.client()
        alls += int(c.info("commandstats").get("cmdstat_rl.all", {}).get("calls", 0))
        crossslot += int(c.info("errorstats").get("errorstat_CROSSSLOT", {}).get("count", 0))
        c.close()
    return alls, crossslot


def on_owner(cluster, rc, k):
    return cluster.slot_owner(rc.keyslot(k)).client()


def test_cluster_slot_groups_refund_the_admitted_slot(cluster, server):
    rc = cluster.client()
    rl = RateLimiter(rc)
    rl.ensure_module()
    per_ip, per_phone = sms("cx:")
    ip, phone = "198.51.100.7", "+15550900"
    ip_key = f"cx:sms-ip:{{{ip}}}:ip"
    assert rc.keyslot(ip_key) != rc.keyslot(f"cx:sms-phone:{{{phone}}}:minute")
    for node in cluster.nodes:
        node.client().config_resetstat()
    ok = rl.decide_all([per_ip.bind(ip), per_phone.bind(phone)])
    assert ok.allowed and cluster_calls(cluster) == (2, 0)  # one RL.ALL per slot, no CROSSSLOT
    assert ok.states["ip"].remaining == 19 and ok.states["day"].remaining == 4
    no = rl.decide_all([per_ip.bind(ip), per_phone.bind(phone)])
    assert no.limited and no.binding == "minute"
    assert cluster_calls(cluster) == (5, 0)  # two more, and the refund of the IP slot
    # the IP slot admitted and was refunded: 1 unit, as after the first call
    owner = on_owner(cluster, rc, ip_key)
    assert 20 - owner.execute_command("RL.PEEK", ip_key, "*", 20, 3_600_000, "COST", 0)[3] == 1
    # as one server reports the same refusal: what the IP rule would leave (18), not 19 after the refund
    assert no.states["ip"].remaining == 18
    one = RateLimiter(server.client())
    s_ip, s_phone = sms("cx1:")
    one.decide_all([s_ip.bind(ip), s_phone.bind(phone)])
    alone = one.decide_all([s_ip.bind(ip), s_phone.bind(phone)])
    assert alone.limited and {k: v.remaining for k, v in alone.states.items()} == \
        {k: v.remaining for k, v in no.states.items()}
    for k, v in alone.states.items():  # and t, the seconds gone between the two aside
        assert abs((v.reset_after - no.states[k].reset_after).total_seconds()) <= 2, k
    # bound to keys of one slot: one call
    for node in cluster.nodes:
        node.client().config_resetstat()
    same = rl.decide_all([per_ip.bind("{u9}"), per_phone.bind("{u9}")])
    assert same.allowed and cluster_calls(cluster) == (1, 0)
    rc.close()


@pytest.mark.anyio
async def test_async_cluster_slot_groups_and_permit(cluster):
    rc = AsyncRedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)
    rl = AsyncRateLimiter(rc)
    await rl.ensure_module()
    per_user, per_tenant = jobs("acx:")
    sync = cluster.client()
    lease_key, units_key = "acx:jobs:{u5}:inflight", "acx:tenant:{t5}:units"
    assert sync.keyslot(lease_key) != sync.keyslot(units_key)

    def lease_held():
        return 1 - on_owner(cluster, sync, lease_key).execute_command("RL.LEASEPEEK", lease_key, "*", 1, "COST", 0)[3]

    def units_taken():
        return 1000 - on_owner(cluster, sync, units_key).execute_command(
            "RL.QUOTAPEEK", units_key, "*", "UTC", "DAY", 1000, "COST", 0)[3]

    async with rl.acquire_all([per_user.bind("u5"), per_tenant.bind("t5", estimate=300)]) as permit:
        assert lease_held() == 1 and units_taken() == 300
        # the lease slot refuses; the tenant slot admitted and is refunded
        with pytest.raises(RateLimitExceeded):
            async with rl.acquire_all([per_user.bind("u5"), per_tenant.bind("t5", estimate=300)]):
                pytest.fail("admitted a second in flight")
        assert units_taken() == 300
        permit.used(70)
    assert lease_held() == 0 and units_taken() == 70  # settled on both slots' nodes
    await rc.aclose()
    sync.close()
