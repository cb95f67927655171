# redis-ratelimit. `make run` starts Redis with the module; `make test` runs every test.
SHELL := /bin/bash
PORT ?= 6379
MODULE := $(CURDIR)/target/release/libredis_ratelimit.so
PY := $(CURDIR)/.venv/bin/python
export RL_MODULE := $(MODULE)
# The servers of the test matrix (README "Servers tested"); SERVERS=redis8
# make test runs one.
SERVERS ?= redis7 redis8 valkey8 valkey9


.PHONY: all build run port-free test unit rust-it py-it functions-it lint deps bench bench-quick bench-profile clean

all: build

deps:
	@scripts/deps.sh system

build: deps
	cargo build --release

# Foreground redis-server with the module loaded; PORT=6380 make run to move
# it. Not persistent: a restart forgets every limit, unless RUN_ARGS adds
# persistence (RUN_ARGS='--appendonly yes --dir /var/lib/ratelimit').
RUN_ARGS ?=
# The port is checked before the build, so a taken port is said at once
# (and again after it, in case something took it meanwhile).
run: port-free build
	@$(MAKE) --no-print-directory port-free
	@echo "make run: no persistence (--save '' --appendonly no): a restart forgets every limit; RUN_ARGS='--appendonly yes' keeps them"
	redis-server --port $(PORT) --save '' --appendonly no --loadmodule $(MODULE) $(RUN_ARGS)

port-free:
	@port=$(PORT); if (exec 3<>/dev/tcp/127.0.0.1/$$port) 2>/dev/null; then \
	  next=$$((port + 1)); while (exec 3<>/dev/tcp/127.0.0.1/$$next) 2>/dev/null; do next=$$((next + 1)); done; \
	  echo "make run: something already listens on port $$port (Debian's redis-server service?); use PORT=$$next make run (port $$next is free)"; exit 1; fi

test: build
	@scripts/deps.sh python
	@scripts/deps.sh node
	$(MAKE) --no-print-directory unit rust-it py-it functions-it $(EXTRA_TESTS)

# The client packages (clients/java, clients/python, clients/node), their
# example apps and the packaging step add their own targets in mk/*.mk and
# appends its test target to EXTRA_TESTS there, so `make test` runs it.
EXTRA_TESTS :=
-include $(sort $(wildcard mk/*.mk))

# The pure decision core, no server.
unit:
	cargo test --release --lib

# Rust integration tests against real server processes, on every server of
# the matrix (RL_SERVER is the binary's path here; see integration/servers.py).
rust-it:
	@failed=""; for s in $(SERVERS); do \
	  echo "== Rust integration tests against $$s"; \
	  bin=$$($(PY) integration/servers.py $$s) && \
	  RL_SERVER=$$bin cargo test --release --test '*' || failed="$$failed $$s"; \
	done; \
	if [ -n "$$failed" ]; then echo "Rust integration tests failed on:$$failed"; exit 1; fi

# redis-py tests: application use, seed interoperability, replicas, AOF,
# Cluster, ACL, hot upgrade; against every server of the matrix (README
# "Servers tested"). Each server's run goes on after another's failure; the
# target fails if any did. SERVERS=redis8 make py-it runs one.
py-it:
	@failed=""; for s in $(SERVERS); do \
	  echo "== integration tests against $$s"; \
	  RL_SERVER=$$s $(PY) -m pytest integration -q -p no:cacheprovider || failed="$$failed $$s"; \
	done; \
	if [ -n "$$failed" ]; then echo "integration tests failed on:$$failed"; exit 1; fi

# The Functions library (functions/ratelimit.lua, for servers without the
# module) through the same Rust and redis-py integration tests: RL_BACKEND=
# functions loads the library instead of the module and the tests send
# `RL.X ...` as `FCALL rl_x ...` (tests/common, integration/functions_backend.py);
# the tests that cannot apply skip naming the SPEC clause. On Redis 7.0 and
# Valkey 9.1 (FUNCTIONS_SERVERS=... to change). The module-vs-library
# differential test runs in py-it.
FUNCTIONS_SERVERS ?= redis7 valkey9
functions-it:
	@failed=""; for s in $(FUNCTIONS_SERVERS); do \
	  echo "== Functions library: Rust and Python integration tests against $$s"; \
	  bin=$$($(PY) integration/servers.py $$s) && \
	  RL_BACKEND=functions RL_SERVER=$$bin cargo test --release --test '*' || failed="$$failed $$s(rust)"; \
	  RL_BACKEND=functions RL_SERVER=$$s $(PY) -m pytest integration -q -p no:cacheprovider || failed="$$failed $$s(python)"; \
	done; \
	if [ -n "$$failed" ]; then echo "Functions library tests failed on:$$failed"; exit 1; fi

# Module vs Lua vs native commands, one interleaved run; writes bench-out/.
# Then one hot key, RL.THROTTLE vs redis-cell's CL.THROTTLE (built from
# crates.io into target/redis-cell/ on first use).
bench: build
	@scripts/deps.sh python
	$(PY) bench/bench.py
	$(PY) bench/hot_key.py
	$(PY) bench/functions_bench.py

# The same in under a minute (CI runs it to check the bench still works).
bench-quick: build
	@scripts/deps.sh python
	$(PY) bench/bench.py --quick
	$(PY) bench/functions_bench.py --quick

# Instructions per whole request under callgrind (needs valgrind), in three
# settings (no replica, a replica, AOF everysec), redis-cell beside
# RL.THROTTLE; on the profiling build: the release code with the line tables
# callgrind names functions by (Cargo.toml [profile.profiling]).
bench-profile: deps
	cargo build --profile profiling
	@scripts/deps.sh python
	RL_MODULE=$(CURDIR)/target/profiling/libredis_ratelimit.so $(PY) bench/profile_callgrind.py

lint:
	cargo fmt --all -- --check
	cargo clippy --release --all-targets -- -D warnings

clean:
	cargo clean
	rm -rf .venv
