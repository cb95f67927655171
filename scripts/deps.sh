#!/usr/bin/env bash
# Installs what building and testing need, only when missing:
#   system: redis-server (and redis-cli), clang/libclang (bindgen), python3 venv
#   python: the packages in integration/requirements.txt, in .venv
# Usage: scripts/deps.sh [system|python|all]
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

have_libclang() { compgen -G '/usr/lib/llvm-*/lib/libclang*.so*' >/dev/null || compgen -G '/usr/lib/*/libclang*.so*' >/dev/null; }

system() {
  local pkgs=()
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null || pkgs+=(redis-server redis-tools)
  have_libclang || pkgs+=(clang)
  python3 -c 'import venv, ensurepip' 2>/dev/null || pkgs+=(python3-venv)
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

case "$what" in
  system) system ;;
  python) python ;;
  all) system; python ;;
  *) echo "usage: $0 [system|python|all]" >&2; exit 2 ;;
esac
