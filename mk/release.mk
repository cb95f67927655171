# One release (issue 42). VERSION (the repository's root) is the version of
# every package: `make version` stamps it into Cargo.toml/Cargo.lock, every
# pom, pyproject.toml, package.json/lockfiles, the Functions library's
# RL_VERSION line and the docs' install snippets (scripts/stamp_version.py
# says which); every build first checks they agree (version-check), so a
# bumped VERSION fails the build until `make version` ran and was committed.
# `make release-test` (in make test) builds the release and tests it:
# packaging/tests (the stamping, what dist/ holds, and its consumers).

.PHONY: version version-check release-test

EXTRA_TESTS += release-test

version:
	python3 scripts/stamp_version.py

version-check:
	@python3 scripts/stamp_version.py --check

build: version-check

release-test: release actionlint
	@cmp -s packaging/lint/package-lock.json packaging/lint/node_modules/.package-lock.copy 2>/dev/null || { \
	  npm ci --prefix packaging/lint --no-audit --no-fund --loglevel=error && \
	  cp packaging/lint/package-lock.json packaging/lint/node_modules/.package-lock.copy; }
	$(PY) -m pytest -q -p no:cacheprovider packaging/tests

# make release: dist/ filled from a copy of the tracked tree (scripts/release.sh
# says what each part holds), after make dist's module archive and .deb.
.PHONY: release release-deps

release: dist release-deps java-deps
	@scripts/deps.sh node
	PY=$(PY) scripts/release.sh

# The pinned build tools (packaging/requirements-release.txt) in .venv, only
# when that file changed since the last install.
release-deps:
	@scripts/deps.sh python
	@cmp -s packaging/requirements-release.txt .venv/.requirements-release 2>/dev/null || { \
	  $(PY) -m pip install -q --disable-pip-version-check -r packaging/requirements-release.txt && \
	  cp packaging/requirements-release.txt .venv/.requirements-release; }

# actionlint for .github/workflows (packaging/tests/test_workflow.py), pinned,
# built from the Go module proxy into target/tools once (about a minute;
# then only when the pin changes).
ACTIONLINT_VERSION := v1.7.12
.PHONY: actionlint
actionlint:
	@target/tools/actionlint -version 2>/dev/null | head -1 | grep -qx '$(ACTIONLINT_VERSION)' || { \
	  command -v go >/dev/null || { echo "make actionlint: needs Go (the machine's, 1.22 or later)" >&2; exit 1; }; \
	  GOBIN=$(CURDIR)/target/tools go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION); }
