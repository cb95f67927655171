# Release artefacts for operators without a Rust toolchain (issue 29).
# `make dist` writes dist/redis-ratelimit-<version>-linux-<arch>.tar.gz and
# dist/redis-ratelimit_<version>-1_<arch>.deb (scripts/dist.sh says what
# each holds); `make dist-test` unpacks both into temporary directories,
# checks the package's metadata and files, and loads the module from them
# into real servers (integration/dist_smoke.py): the package's into Debian's
# redis-server through its config snippet, the archive's into Redis 8.2 and
# Valkey 8.1 / 9.1 of the test matrix.

.PHONY: dist dist-test

EXTRA_TESTS += dist-test

dist: build
	scripts/dist.sh

dist-test: dist
	@scripts/deps.sh python
	$(PY) integration/dist_smoke.py
