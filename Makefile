# redis-ratelimit. `make run` starts Redis with the module; `make test` runs every test.
SHELL := /bin/bash
PORT ?= 6379
MODULE := $(CURDIR)/target/release/libredis_ratelimit.so
PY := $(CURDIR)/.venv/bin/python
export RL_MODULE := $(MODULE)
# The servers of the test matrix (README "Servers tested"); SERVERS=redis8
# make test runs one.
SERVERS ?= redis7 redis8 valkey8 valkey9

.PHONY: all build run test unit rust-it py-it lint deps bench bench-quick bench-profile clean

all: build

deps:
	@scripts/deps.sh system

build: deps
	cargo build --release

# Foreground redis-server with the module loaded; PORT=6380 make run to move it.
run: build
	@if redis-cli -p $(PORT) ping >/dev/null 2>&1; then \
	  echo "make run: something already answers on port $(PORT) (Debian's redis-server service?); use PORT=6380 make run"; exit 1; fi
	redis-server --port $(PORT) --save '' --appendonly no --loadmodule $(MODULE)

test: build
	@scripts/deps.sh python
	@scripts/deps.sh node
	$(MAKE) --no-print-directory unit rust-it py-it

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

# Module vs Lua vs native commands, one interleaved run; writes bench-out/.
bench: build
	@scripts/deps.sh python
	$(PY) bench/bench.py

# The same in under a minute (CI runs it to check the bench still works).
bench-quick: build
	@scripts/deps.sh python
	$(PY) bench/bench.py --quick

# Instructions per request under callgrind (needs valgrind).
bench-profile: build
	@scripts/deps.sh python
	$(PY) bench/profile_callgrind.py

lint:
	cargo fmt --all -- --check
	cargo clippy --release --all-targets -- -D warnings

clean:
	cargo clean
	rm -rf .venv
