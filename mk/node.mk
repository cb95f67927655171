# The Node client (clients/node, npm package `redis-ratelimit`) and its
# express example app (examples/node). `make node-test` installs both from
# their lockfiles (npm ci), builds, and runs their tests against real
# redis-server processes with $(RL_MODULE) loaded (Debian's Redis 7.0 and a
# three-primary Cluster). `make example-node` serves SERVICES.md.
NODE_PKG := clients/node
NODE_EXAMPLE := examples/node

.PHONY: node-deps node-build node-test example-node bench-node bench-clients

EXTRA_TESTS += node-test

# npm ci only when the lockfile changed since the last install.
node-deps:
	@scripts/deps.sh node
	@for d in $(NODE_PKG) $(wildcard $(NODE_EXAMPLE)); do \
	  if ! cmp -s $$d/package-lock.json $$d/node_modules/.package-lock.copy 2>/dev/null; then \
	    npm ci --prefix $$d --no-audit --no-fund --loglevel=error && cp $$d/package-lock.json $$d/node_modules/.package-lock.copy || exit 1; \
	  fi; \
	done

node-build: node-deps
	npm run --prefix $(NODE_PKG) build

# The package's suite, then the example app's HTTP tests (standalone, two
# instances, Redis stopped/paused and back, a three-primary Cluster), again
# with RL_BACKEND=functions on servers without the module.
node-test: build node-build
	cd $(NODE_PKG) && RL_MODULE=$(RL_MODULE) npm test
	cd $(NODE_EXAMPLE) && RL_MODULE=$(RL_MODULE) npm test
	cd $(NODE_EXAMPLE) && RL_BACKEND=functions RL_MODULE=$(RL_MODULE) npm test

# The example app in the foreground: PORT (8080), REDIS_URL or REDIS_CLUSTER, RL_PREFIX, RL_BACKEND.
example-node: node-build
	cd $(NODE_EXAMPLE) && node server.js

# The package's decision against the bare RL.ALL through the same ioredis
# client, and the same express endpoint guarded by the package against
# express-rate-limit + rate-limit-redis; interleaved, ratios printed.
# BENCH_ROUNDS, BENCH_BLOCK, BENCH_HTTP_SECONDS, BENCH_CONCURRENCY tune it.
bench-node: build node-build
	cd $(NODE_PKG) && RL_MODULE=$(RL_MODULE) node bench/bench.mjs

bench-clients: bench-node
