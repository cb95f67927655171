#!/usr/bin/env bash
# Builds redis-cell 0.2.2, the newest release on crates.io, into
# target/redis-cell/libredis_cell.so for the bench (`make bench`,
# `make bench-profile`), where its CL.THROTTLE runs beside RL.THROTTLE in the
# same server. Never committed; built once. Caveats: 0.2.2 is a Rust `dylib`,
# so loading it needs the toolchain's libstd on the loader's path (the bench
# sets LD_LIBRARY_PATH to `rustc --print sysroot`/lib), and it replicates
# nothing, so it is compared with no replica only. Prints the .so's path.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/target/redis-cell
so=$out/libredis_cell.so
if [ ! -f "$so" ]; then
  mkdir -p "$out/fetch/src"
  # A throwaway crate that depends on redis-cell, so cargo downloads it.
  cat > "$out/fetch/Cargo.toml" <<'EOF'
[package]
name = "fetch-redis-cell"
version = "0.0.0"
edition = "2021"

[dependencies]
redis-cell = "=0.2.2"

[workspace]
EOF
  : > "$out/fetch/src/lib.rs"
  (cd "$out/fetch" && cargo fetch -q)
  manifest=$(cd "$out/fetch" && cargo metadata -q --format-version 1 |
    python3 -c 'import json, sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"] == "redis-cell"))')
  rm -rf "$out/src"
  cp -r "$(dirname "$manifest")" "$out/src"
  printf '\n[workspace]\n' >> "$out/src/Cargo.toml"
  # Its own warnings (an old crate on a new compiler) go to a log.
  CARGO_TARGET_DIR=$out/build cargo build --release --manifest-path "$out/src/Cargo.toml" \
    >"$out/build.log" 2>&1 || { cat "$out/build.log" >&2; exit 1; }
  cp "$out/build/release/libredis_cell.so" "$so"
fi
echo "$so"
