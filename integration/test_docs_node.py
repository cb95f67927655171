"""The Node package's call next to the LLM gateway recipe
(docs/recipes/llm_gateway_node.js, shown verbatim in docs/guides/recipes.md),
run with node against a real server. It needs the package built
(clients/node/dist): `make docs-node-test` builds it and runs this file
(mk/docs.mk, part of `make test`); a py-it run before any build skips it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "clients" / "node"
RECIPE = ROOT / "docs" / "recipes" / "llm_gateway_node.js"

DRIVER = """
const Redis = require("ioredis");
const { RateLimiter } = require("redis-ratelimit");
const { complete } = require(process.env.RECIPE);
(async () => {
  const redis = new Redis({ port: Number(process.env.PORT), lazyConnect: false });
  const limiter = new RateLimiter(redis);
  const zone = "Europe/Paris";
  const out = [];
  out.push(await complete(limiter, "n1", zone, 2000, async () => 500));
  for (let i = 0; i < 3; i++) {
    try {
      await complete(limiter, "n1", zone, 2000, async () => { throw new Error("model down"); });
      out.push("resolved");
    } catch (e) {
      out.push(e.message);
    }
  }
  for (const token of ["a", "b"]) await redis.call("RL.LEASE", "llm:{llm}:n2:inflight", "*", 2, 60000, "TOKEN", token);
  out.push(await complete(limiter, "n2", zone, 10, async () => 1));
  out.push(await complete(limiter, "n3", zone, 100001, async () => 1));
  console.log(JSON.stringify(out));
  redis.disconnect();
})().catch((e) => { console.error(e); process.exit(1); });
"""


def node_paths(tmp_path: Path) -> str:
    """NODE_PATH where `redis-ratelimit` is this tree's package and its
    pinned dev dependencies (ioredis) resolve."""
    mods = tmp_path / "node_modules"
    mods.mkdir()
    (mods / "redis-ratelimit").symlink_to(PKG)
    return f"{mods}:{PKG / 'node_modules'}"


# Skipped in a plain py-it run before any build; `make docs-node-test` sets
# RL_DOCS_NODE=1 after building, and there a missing build is a failure.
@pytest.mark.skipif(not os.environ.get("RL_DOCS_NODE")
                    and (not (PKG / "dist" / "index.js").exists() or shutil.which("node") is None),
                    reason="the Node package is not built here: make docs-node-test builds and runs it")
def test_llm_gateway_with_the_node_package(server, tmp_path):
    r = server.client()
    env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "NODE_PATH": node_paths(tmp_path),
           "RECIPE": str(RECIPE), "PORT": str(server.port)}
    done = subprocess.run([shutil.which("node"), "-e", DRIVER], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out[0] == {"status": 200, "used": 500}
    assert sum(int(v) for v in r.hvals("llm:{llm}:n1:tokens")) == 500   # settled to the usage
    assert out[1:4] == ["model down"] * 3                                  # a raising model: charged 0
    assert not r.exists("llm:{llm}:n1:inflight")                          # and no lease left
    assert out[4] == {"status": 429, "retryAfterMs": 1000}                 # in flight: 1 s, not the TTL
    assert not r.exists("llm:{llm}:n2:tokens")                             # the refusal charged nothing
    assert out[5] == {"status": 429, "retryAfterMs": None}                 # above the day: no Retry-After
    assert r.zcard("llm:{llm}:global") == 4
    r.close()
