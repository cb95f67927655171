#!/usr/bin/env bash
# make release: every package of one version (VERSION) into dist/, built from
# a copy of the tracked tree so nothing is written into the checkout (no
# target/ under clients/java, no build/ or *.egg-info under clients/python,
# no node_modules or dist/ under clients/node). make release runs `make dist`
# first (the module archive and .deb, scripts/dist.sh), then this adds:
#   maven/    a Maven repository: every published Java artifact (both Spring
#             Boot lines) with its POM (name, description, url, licenses,
#             developers, scm), -sources.jar and -javadoc.jar
#   python/   redis_ratelimit_client-<v>.tar.gz (sdist) and the pure wheel
#             redis_ratelimit_client-<v>-py3-none-any.whl (python -m build)
#   npm/      redis-ratelimit-<v>.tgz (npm pack)
#   SHA256SUMS over every file of dist/ (replacing make dist's)
# The Python and npm packages' READMEs link to the tag v<version> in the
# repository instead of relatively (scripts/absolute_links.py).
# Maven builds with -Dmaven.install.skip: your ~/.m2 gets no dev/redisratelimit
# artifact. Needs mvn, Java 17, npm and $PY (make release installs
# packaging/requirements-release.txt into .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
py=${PY:-$root/.venv/bin/python}

python3 scripts/stamp_version.py --check
version=$(cat VERSION)
out=$root/dist
archive=$out/redis-ratelimit-$version-linux-$(uname -m).tar.gz
[ -f "$archive" ] || { echo "release: $archive is missing: make release runs make dist first" >&2; exit 1; }
rm -rf "$out/maven" "$out/python" "$out/npm"

work=$(mktemp -d "${TMPDIR:-/tmp}/rl-release.XXXXXX")
trap 'rm -rf "$work"' EXIT
# What the checkout holds now, ignored files included: the same at the end
# (scripts/checkout_state.sh says what changed otherwise).
scripts/checkout_state.sh save "$work/checkout-state"
# The tracked files (and new ones not yet committed; never ignored ones such
# as node_modules or target/), as a clean checkout holds them.
mkdir "$work/src"
git ls-files -co --exclude-standard -z |
  while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - | tar -C "$work/src" -xf -
# The Python and npm READMEs' relative links, in the copy, to the release's
# tag in the repository (PyPI and npm cannot follow them; the script says why).
repo_url=$(sed -n 's|^  <url>\(.*\)</url>$|\1|p' clients/java/pom.xml | head -1)
python3 scripts/absolute_links.py "$work/src" "$repo_url" "v$version" \
  "$work/src/clients/python/README.md" "$work/src/clients/node/README.md"

step() { echo "release: $*"; }
# A tool's output goes to a log, shown only when it fails.
quiet() {
  local log=$work/$1.log
  shift
  "$@" >"$log" 2>&1 || { tail -n 60 "$log" >&2; echo "release: failed: $*" >&2; exit 1; }
}

# Python and npm build beside Maven (it keeps one core busy; they are short).
python_and_npm() {
  # The Functions library into the copy's package, so the sdist carries it and
  # the wheel built from that sdist too (setup.py finds ../../functions only
  # in a tree, not in an unpacked sdist).
  local lib=$work/src/functions/ratelimit.lua node=$work/src/clients/node
  [ ! -f "$lib" ] || cp "$lib" "$work/src/clients/python/src/redis_rl/ratelimit.lua"
  quiet python "$py" -m build --no-isolation --outdir "$out/python" "$work/src/clients/python"
  step "Python sdist and wheel -> dist/python"
  mkdir -p "$out/npm"
  quiet npm-ci npm ci --prefix "$node" --no-audit --no-fund --loglevel=error
  quiet npm-build npm run --prefix "$node" build
  quiet npm-pack npm pack "$node" --pack-destination "$out/npm"
  step "npm tarball -> dist/npm"
}
python_and_npm &
side=$!

# Java: the Boot 3.5 line, then the Boot 4.0 line (each reactor also builds the
# client jars; the second deploy of those is the same content). Tests ran in
# make test (java-test); -DskipTests compiles them (the examples use the
# autoconfigure module's test jar) but runs none.
mvn_deploy() {
  quiet maven mvn -B -ntp -q -Dstyle.color=never -f "$work/src/clients/java/pom.xml" -Prelease \
    -DskipTests -Dmaven.install.skip=true \
    -DaltDeploymentRepository="local::file:$out/maven" "$@" deploy
}
mvn_deploy -Dboot3
step "Maven artifacts (Spring Boot 3.5 line) -> dist/maven"
mvn_deploy
step "Maven artifacts (Spring Boot 4.0 line and the clients) -> dist/maven"
wait "$side" || { echo "release: the Python or npm build failed (above)" >&2; exit 1; }

(cd "$out" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
step "dist/ holds $(cd "$out" && find . -type f | wc -l) files, $(du -sh "$out" | cut -f1)"
scripts/checkout_state.sh compare "$work/checkout-state"
