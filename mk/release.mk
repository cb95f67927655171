# One release (issue 42). VERSION (the repository's root) is the version of
# every package: `make version` stamps it into Cargo.toml/Cargo.lock, every
# pom, pyproject.toml, package.json/lockfiles, the Functions library's
# RL_VERSION line and the docs' install snippets (scripts/stamp_version.py
# says which); every build first checks they agree (version-check), so a
# bumped VERSION fails the build until `make version` ran and was committed.
# `make release-tools-test` (in make test) tests the stamping itself.

.PHONY: version version-check release-tools-test

EXTRA_TESTS += release-tools-test

version:
	python3 scripts/stamp_version.py

version-check:
	@python3 scripts/stamp_version.py --check

build: version-check

release-tools-test:
	@scripts/deps.sh python
	$(PY) -m pytest -q -p no:cacheprovider packaging/tests
