#!/usr/bin/env bash
# Release artefacts from the release build (make dist runs it after
# `cargo build --release`), into dist/:
#   redis-ratelimit-<version>-linux-<arch>.tar.gz  the stripped module,
#       ratelimit.conf (loadmodule + every module config, commented), LICENSE,
#       README.md, CHANGELOG.md, docs/, the documents they link to
#       (packaging/archive-docs.txt, at their repository paths) and SHA256SUMS
#       of those files
#   redis-ratelimit_<version>-1_<debian arch>.deb  the module under
#       /usr/lib/redis/modules/, the snippet as /etc/redis/modules.d/ratelimit.conf
#   SHA256SUMS  of the archive and the package (what a download page lists)
# Byte-for-byte repeatable from one commit: file times are the commit's
# (SOURCE_DATE_EPOCH), owners root, names sorted, gzip without a timestamp.
# Needs only coreutils, tar, gzip, binutils (strip, objdump) and dpkg-deb.
set -euo pipefail
cd "$(dirname "$0")/.."

so=target/release/libredis_ratelimit.so
[ -f "$so" ] || { echo "dist: $so is missing (make dist builds it)" >&2; exit 1; }
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
arch=$(uname -m)
deb_arch=$(dpkg --print-architecture)
deb_version="$version-1"
maintainer=${DEB_MAINTAINER:-"The redis-ratelimit authors <maintainers@redis-ratelimit.invalid>"}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

name=redis-ratelimit-$version-linux-$arch
rm -rf dist
mkdir -p dist/stage/"$name"
stage=dist/stage/$name

# --strip-unneeded drops the symbol table (the function names gdb and perf
# read); Redis's own crash report names frames through the dynamic symbols
# (backtrace_symbols/dladdr), which stay. 1.8 MB -> 1.5 MB (0.2.0).
strip --strip-unneeded -o "$stage/libredis_ratelimit.so" "$so"
# Executable: Redis 7.0+ refuses to load a module file without an execute
# bit ("It does not have execute permissions"), unlike ld.so.
chmod 0755 "$stage/libredis_ratelimit.so"
install -m 0644 LICENSE README.md CHANGELOG.md packaging/ratelimit.conf "$stage/"
# docs/ and the other documents the README and docs/ link to, so their
# links work in the unpacked directory (packaging/tests/test_dist.py).
{ git ls-files docs; grep -Ev '^(#|$)' packaging/archive-docs.txt; } |
  while IFS= read -r f; do install -D -m 0644 "$f" "$stage/$f"; done
(cd "$stage" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum > SHA256SUMS)

repeatable_tar() { # dir-to-enter member out.tar.gz
  tar -C "$1" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
    -cf - "$2" | gzip -9n > "$3"
}
repeatable_tar dist/stage "$name" "dist/$name.tar.gz"

# The Debian package.
root=dist/stage/deb
install -d "$root/DEBIAN" "$root/usr/lib/redis/modules" "$root/etc/redis/modules.d" \
  "$root/usr/share/doc/redis-ratelimit"
install -m 0755 "$stage/libredis_ratelimit.so" "$root/usr/lib/redis/modules/"
install -m 0644 packaging/ratelimit.conf "$root/etc/redis/modules.d/ratelimit.conf"
doc=$root/usr/share/doc/redis-ratelimit
install -m 0644 packaging/debian/copyright packaging/debian/README.Debian "$doc/"
gzip -9n < README.md > "$doc/README.md.gz"
gzip -9n < CHANGELOG.md > "$doc/changelog.gz"
chmod 0644 "$doc"/*.gz
install -m 0644 packaging/debian/conffiles "$root/DEBIAN/"

# libc6 from the newest GLIBC_x.y symbol version the module imports (what
# dpkg-shlibdeps would find; the module links nothing else, checked below).
needed=$(objdump -p "$so" | awk '/NEEDED/ {print $2}' | sort | tr '\n' ' ')
for lib in $needed; do
  case "$lib" in libc.so.6 | libm.so.6 | libdl.so.2 | libpthread.so.0 | libgcc_s.so.1 | ld-linux*) ;;
    *) echo "dist: the module links $lib; add its package to Depends" >&2; exit 1 ;;
  esac
done
glibc=$(objdump -T "$so" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
depends="libc6 (>= $glibc)"
case " $needed " in *" libgcc_s.so.1 "*) depends="$depends, libgcc-s1" ;; esac
size_kb=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@DEB_VERSION@/$deb_version/" -e "s/@DEB_ARCH@/$deb_arch/" -e "s/@MAINTAINER@/$maintainer/" \
  -e "s/@INSTALLED_SIZE@/$size_kb/" -e "s/@DEPENDS@/$depends/" packaging/debian/control.in > "$root/DEBIAN/control"
(cd "$root" && find etc usr -type f | sort | xargs md5sum > DEBIAN/md5sums)
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums" "$root/DEBIAN/conffiles"
find "$root" -type d -exec chmod 0755 {} +
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
deb=redis-ratelimit_${deb_version}_$deb_arch.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "dist/$deb" >/dev/null

rm -rf dist/stage
(cd dist && sha256sum "$name.tar.gz" "$deb" > SHA256SUMS)
echo "dist: $(cd dist && ls -s --block-size=K "$name.tar.gz" "$deb" | tr '\n' ' ')"
