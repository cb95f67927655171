"""The Cluster client snippets of docs/guides/cluster.md, run from the files
the guide shows verbatim (docs/recipes/cluster_*; integration/test_docs.py
checks the page and the files agree) — redis-py, ioredis and node-redis — against three primaries:
every RL command, single calls and a pipeline, reaches its key's node with
no redirect (`errorstat_MOVED` stays absent on every node after `CONFIG
RESETSTAT`) and no extra round trip (no `COMMAND GETKEYS`, one call counted
per call sent). The Node packages are pinned in integration/node (installed
by `make test` through scripts/deps.sh node)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from servers import Cluster, redis_cli

ROOT = Path(__file__).resolve().parent.parent
NODE_DIR = ROOT / "integration" / "node"

pytestmark = pytest.mark.skipif(redis_cli() is None, reason="redis-cli is needed to create a cluster")


SNIPPETS = {
    "# redis-py:": ROOT / "docs" / "recipes" / "cluster_redis_py.py",
    "// ioredis:": ROOT / "docs" / "recipes" / "cluster_ioredis.js",
    "// node-redis:": ROOT / "docs" / "recipes" / "cluster_node_redis.js",
}


def readme_block(first_line: str) -> str:
    """The snippet file whose first line starts with `first_line`."""
    text = SNIPPETS[first_line].read_text()
    assert text.startswith(first_line), SNIPPETS[first_line]
    return text


@pytest.fixture(scope="module")
def cluster():
    cl = Cluster(3)
    cl.start()
    try:
        yield cl
    finally:
        cl.stop()


def workload(prefix: str):
    """Every RL command on ten keys each (spread over the three nodes), and a
    pipeline of three calls on keys of one hash tag."""
    single = []
    for i in range(10):
        k = f"{prefix}:{i}"
        single += [
            ["RL.CHECK", f"{k}:c", "*", 10, 60000],
            ["RL.PEEK", f"{k}:c", "*", 10, 60000],
            ["RL.THROTTLE", f"{k}:t", "*", 5, 5, 1000],
            ["RL.THROTTLEPEEK", f"{k}:t", "*", 5, 5, 1000],
            ["RL.QUOTA", f"{k}:q", "*", "UTC", "DAY", 5],
            ["RL.QUOTAPEEK", f"{k}:q", "*", "UTC", "DAY", 5],
            ["RL.DAYHOUR", f"{{{k}}}:d", f"{{{k}}}:h", 10, 5, 86_400_000, 3_600_000],
            ["RL.LOCKCOUNT", f"{{{k}}}:l", f"{{{k}}}:n", 60000, 3, 120000],
            ["RL.ALL", 2, f"{{{k}}}:a1", f"{{{k}}}:a2", "*", "CHECK", 1, 10, 60000, "THROTTLE", 2, 5, 5, 1000],
            ["RL.ALLPEEK", 2, f"{{{k}}}:a1", f"{{{k}}}:a2", "*", "CHECK", 1, 10, 60000, "THROTTLE", 2, 5, 5, 1000],
        ]
    tag = f"{{{prefix}:user:42}}"
    pipeline = [["RL.CHECK", f"rl:{tag}:{name}", "*", 10, 60000] for name in ("ocr", "sms", "api")]
    return single, pipeline


def expected_replies(single, pipeline):
    """What a fresh key answers to each call (the calls are the first ones on
    their keys; `now = *`, so only these fields are asserted)."""
    out = []
    for args in single:
        name = args[0]
        if name in ("RL.CHECK", "RL.THROTTLE", "RL.QUOTA"):
            out.append([0, 1, args[-3] if name == "RL.THROTTLE" else args[-2 if name == "RL.CHECK" else -1]])
        elif name == "RL.PEEK":
            out.append([0, 1, 10])
        elif name == "RL.THROTTLEPEEK":
            out.append([0, 1, 5])
        elif name == "RL.QUOTAPEEK":
            out.append([0, 1, 5])
        elif name == "RL.DAYHOUR":
            out.append([1, 1])
        elif name in ("RL.ALL", "RL.ALLPEEK"):  # the bucket binds: clause 2, rule 1
            out.append([0, 2, 1])
        else:  # RL.LOCKCOUNT: admitted, count 1
            out.append([0, 1])
    return out, [[0, 1, 10]] * len(pipeline)


def head(reply, n):
    return [int(x) for x in reply[:n]]


def reset_stats(cluster):
    for node in cluster.nodes:
        c = node.client()
        c.config_resetstat()
        c.close()


def routing_stats(cluster):
    """Summed over the nodes: MOVED replies, COMMAND GETKEYS calls, and RL
    command calls (Redis counts a redirected call as rejected, not called)."""
    moved = getkeys = rl_calls = rejected = 0
    for node in cluster.nodes:
        c = node.client()
        errors = c.info("errorstats")
        moved += int(errors.get("errorstat_MOVED", {}).get("count", 0))
        for name, stat in c.info("commandstats").items():
            if name.startswith("cmdstat_rl."):
                rl_calls += int(stat["calls"])
                rejected += int(stat.get("rejected_calls", 0))
            if name == "cmdstat_command|getkeys":
                getkeys += int(stat["calls"])
        c.close()
    return {"moved": moved, "getkeys": getkeys, "rl_calls": rl_calls, "rejected": rejected}


def check_replies(got_single, got_pipeline, single, pipeline):
    want_single, want_pipeline = expected_replies(single, pipeline)
    assert [head(r, len(w)) for r, w in zip(got_single, want_single)] == want_single
    assert len(got_single) == len(single)
    assert [head(r, 3) for r in got_pipeline] == want_pipeline


def test_redirect_counter_sees_a_misrouted_call(cluster):
    """The counter the other tests read does count: one call sent to a node
    that does not own its key is one MOVED."""
    key = "misrouted"
    c0 = cluster.nodes[0].client()
    owner = cluster.slot_owner(int(c0.execute_command("CLUSTER KEYSLOT", key)))
    other = next(n for n in cluster.nodes if n is not owner).client()
    reset_stats(cluster)
    with pytest.raises(Exception, match="^MOVED"):
        other.execute_command("RL.CHECK", key, "*", 1, 1000)
    assert routing_stats(cluster)["moved"] == 1


def test_redis_py_snippet_routes_without_redirects(cluster):
    snippet = readme_block("# redis-py:")
    ns: dict = {}
    exec(compile(snippet, str(SNIPPETS["# redis-py:"]), "exec"), ns)
    rc = cluster.client()
    single, pipeline = workload("py")
    reset_stats(cluster)
    got_single = [ns["rl"](rc, *args) for args in single]
    got_pipeline = ns["rl_pipeline"](rc, pipeline)
    on_node = [ns["rl_on_key_node"](rc, args[1], *args) for args in pipeline]
    rc.close()
    check_replies(got_single, got_pipeline, single, pipeline)
    assert [head(r, 4) for r in on_node] == [[0, 1, 10, 8]] * 3
    assert routing_stats(cluster) == {"moved": 0, "getkeys": 0, "rejected": 0,
                                      "rl_calls": len(single) + 2 * len(pipeline)}


def node_bin():
    return shutil.which("node")


def run_node(snippet_first_line: str, driver: str, cluster, single, pipeline, mode: str = "routed"):
    if node_bin() is None or not (NODE_DIR / "node_modules").is_dir():
        pytest.fail("node and integration/node/node_modules are needed: run scripts/deps.sh node")
    source = readme_block(snippet_first_line) + "\n" + (NODE_DIR / driver).read_text()
    payload = json.dumps({"port": cluster.nodes[0].port, "mode": mode, "single": single, "pipeline": pipeline})
    done = subprocess.run([node_bin(), "-e", source], input=payload, capture_output=True, text=True,
                          timeout=60, cwd=NODE_DIR)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_ioredis_snippet_routes_without_redirects(cluster):
    single, pipeline = workload("io")
    reset_stats(cluster)
    out = run_node("// ioredis:", "drive_ioredis.js", cluster, single, pipeline)
    check_replies(out["single"], out["pipeline"], single, pipeline)
    assert routing_stats(cluster) == {"moved": 0, "getkeys": 0, "rejected": 0,
                                      "rl_calls": len(single) + len(pipeline)}


def test_ioredis_plain_call_is_redirected(cluster):
    """Why the snippet is needed: `cluster.call` sends RL commands to any
    node; most come back MOVED (ioredis follows them: a second round trip)."""
    single, pipeline = workload("io-plain")
    reset_stats(cluster)
    out = run_node("// ioredis:", "drive_ioredis.js", cluster, single, pipeline, mode="plain")
    assert len(out["single"]) == len(single)
    assert routing_stats(cluster)["moved"] > 0


def test_node_redis_snippet_routes_without_redirects(cluster):
    single, pipeline = workload("nr")
    reset_stats(cluster)
    out = run_node("// node-redis:", "drive_node_redis.js", cluster, single, pipeline)
    check_replies(out["single"], out["pipeline"], single, pipeline)
    assert routing_stats(cluster) == {"moved": 0, "getkeys": 0, "rejected": 0,
                                      "rl_calls": len(single) + len(pipeline)}
