# The Fastify example app (examples/fastify: the redis-ratelimit package's
# Fastify plugin), installed from its own lockfile. Its tests are
# examples/node's: the same SERVICES.md checks, run against this app
# (EXAMPLE_SERVER), so one contract judges both Node apps; twice, as
# examples/node's: with the module, then with RL_BACKEND=functions on
# servers without it.
FASTIFY_EXAMPLE := examples/fastify

.PHONY: fastify-deps fastify-test example-fastify

EXTRA_TESTS += fastify-test

# npm ci only when the lockfile changed since the last install.
fastify-deps: node-deps
	@d=$(FASTIFY_EXAMPLE); if ! cmp -s $$d/package-lock.json $$d/node_modules/.package-lock.copy 2>/dev/null; then \
	  npm ci --prefix $$d --no-audit --no-fund --loglevel=error && cp $$d/package-lock.json $$d/node_modules/.package-lock.copy; \
	fi

fastify-test: build node-build fastify-deps
	cd $(FASTIFY_EXAMPLE) && RL_MODULE=$(RL_MODULE) npm test
	cd $(FASTIFY_EXAMPLE) && RL_BACKEND=functions RL_MODULE=$(RL_MODULE) npm test

# The example app in the foreground: PORT (8080), REDIS_URL or REDIS_CLUSTER, RL_PREFIX, RL_BACKEND.
example-fastify: node-build fastify-deps
	cd $(FASTIFY_EXAMPLE) && node server.js
