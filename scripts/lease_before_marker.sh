#!/usr/bin/env bash
# Builds the module as it was before the lease's half-ms marker (commit
# 44abc84, the last one without it) into target/lease-before-marker/ and
# prints the path of its .so. For tests/lease_marker.rs's live comparison:
#   RL_MODULE_BEFORE=$(scripts/lease_before_marker.sh) cargo test --release --test lease_marker
# and for tests/fixtures/make_lease_dump.py. A clean release build: ~2 min
# on 2 cores, then cached.
set -euo pipefail
COMMIT=44abc84a60ef08c3fc09d23e4777d9c4790b4e0b
root=$(git rev-parse --show-toplevel)
out="$root/target/lease-before-marker"
src="$out/src"
commit=$(git -C "$root" rev-parse --verify "$COMMIT^{commit}")
if [ ! -d "$src" ]; then
  mkdir -p "$out"
  # A plain export of that commit's tree: no worktree to register or prune.
  mkdir -p "$src"
  git -C "$root" archive "$commit" | tar -x -C "$src"
fi
CARGO_TARGET_DIR="$out/target" cargo build --release --quiet --manifest-path "$src/Cargo.toml" >&2
echo "$out/target/release/libredis_ratelimit.so"
