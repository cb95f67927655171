# The Python client (clients/python) and its FastAPI example (examples/python).
# `make python-test` makes the package's own venv (clients/python/.venv) from
# pinned requirements and runs its pytest suite (real redis-server 7.0 from
# apt, standalone and a three-primary Cluster, module $(RL_MODULE)).

PYC_DIR := $(CURDIR)/clients/python
PYC_VENV := $(PYC_DIR)/.venv
PYC_PY := $(PYC_VENV)/bin/python

.PHONY: python-venv python-library python-test example-python example-flask bench-python bench-clients

EXTRA_TESTS += python-test

# Rebuilt when the pinned requirements or the package metadata change.
$(PYC_VENV)/.stamp: $(PYC_DIR)/requirements-test.txt $(PYC_DIR)/pyproject.toml
	@scripts/deps.sh system
	@test -x $(PYC_PY) || python3 -m venv $(PYC_VENV)
	$(PYC_PY) -m pip install -q --disable-pip-version-check -r $(PYC_DIR)/requirements-test.txt
	$(PYC_PY) -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e $(PYC_DIR)
	@touch $@

python-venv: $(PYC_VENV)/.stamp python-library

# The Functions library travels in the package as redis_rl/ratelimit.lua,
# copied from the repository's one source (never committed; setup.py does
# the same for `pip install ./clients/python` and wheels).
RL_LIBRARY ?= $(CURDIR)/functions/ratelimit.lua
python-library:
	@if [ -f $(RL_LIBRARY) ]; then cmp -s $(RL_LIBRARY) $(PYC_DIR)/src/redis_rl/ratelimit.lua || cp $(RL_LIBRARY) $(PYC_DIR)/src/redis_rl/ratelimit.lua; fi

# Two pytest runs (each directory has its own conftest); the example's tests
# start app.py as a process and drive it over HTTP, twice: with the module,
# then with RL_BACKEND=functions on servers without it.
python-test: build python-venv
	cd $(PYC_DIR) && RL_SERVER=redis7 $(PYC_PY) -m pytest -q -p no:cacheprovider tests
	cd $(CURDIR)/examples/python && RL_SERVER=redis7 $(PYC_PY) -m pytest -q -p no:cacheprovider tests
	cd $(CURDIR)/examples/python && RL_BACKEND=functions RL_SERVER=redis7 $(PYC_PY) -m pytest -q -p no:cacheprovider tests

# The example app in the foreground: PORT (8080), REDIS_URL or REDIS_CLUSTER, RL_PREFIX, RL_BACKEND.
example-python: python-venv
	cd $(CURDIR)/examples/python && $(PYC_PY) app.py

# SERVICES.md's endpoints 3, 5 and 6 on Flask (the sync adapter): the fault
# table's Python sync column (Flask is pinned in the client's test requirements).
example-flask: python-venv
	cd $(CURDIR)/examples/flask && $(PYC_PY) app.py

# Benchmarks (interleaved, ratios printed; not a test): a three-limit policy
# decision vs the bare RL.ALL through the same redis-py client, and the same
# endpoint guarded by redis_rl vs slowapi + limits' Redis storage.
# BENCH_ROUNDS, BENCH_BLOCK, BENCH_HTTP_SECONDS, BENCH_CONCURRENCY tune it.
bench-python: build python-venv
	$(PYC_PY) -m pip install -q --disable-pip-version-check -r $(PYC_DIR)/requirements-bench.txt
	cd $(PYC_DIR) && RL_SERVER=redis7 $(PYC_PY) bench/bench.py

bench-clients: bench-python

# docs/guides/faults.md's table: the example apps (Python FastAPI, Flask and
# Django, Node on ioredis and on node-redis, Fastify, Spring MVC in Java and
# Kotlin, Spring WebFlux, the Spring Cloud Gateway example) broken on purpose
# over HTTP, standalone and Cluster. A measurement, not a test (2-4 minutes
# per app): it prints the table. FAULTS_APPS picks apps; FAULTS_BACKEND=functions
# runs them on servers without the module (the Functions library).
FAULTS_APPS ?= python flask node node-redis mvc kotlin webflux django fastify gateway
.PHONY: faults-table
faults-table: build python-venv node-build fastify-deps spring-deps
	$(SPRING_MVN) -q -DskipTests package -am -pl :ratelimit-example-spring,:ratelimit-example-spring-kotlin,:ratelimit-example-spring-webflux,:ratelimit-example-spring-gateway
	RL_MODULE=$(RL_MODULE) $(PYC_PY) integration/faults_table.py $(FAULTS_APPS)
