"""`make dist-test`: the release artefacts in dist/ install and load without
a toolchain (issue 29).

- The Debian package: its metadata (`dpkg-deb --info`) and files
  (`dpkg-deb --contents`: paths, modes, root ownership), then unpacked with
  `dpkg-deb -x` into a temporary root (CI runs on this machine, so nothing is
  installed on it); Debian's redis-server 7.0 loads the module through the
  package's own config snippet (its `loadmodule` path moved under the
  temporary root, nothing else changed), once as shipped and once with every
  commented module config uncommented. Its README.Debian says where the
  README's relative links lead (the package does not ship those documents).
- The archive: its members, its SHA256SUMS, a stripped `.so`, loaded into
  Redis 8.2 and Valkey 8.1 / 9.1 of the test matrix.
- The install guide's archive steps (docs/guides/install.md, "The archive"),
  run as written with `sudo` dropped and `/usr/lib/redis/modules/` moved under
  a temporary directory: Debian's redis-server loads the module from where
  they put it (Redis 7.0+ refuses a module file without an execute bit).
- dist/SHA256SUMS matches both files.

Each server reports the crate's version (MODULE LIST `ver`, INFO
`ratelimit_version`) and answers RL.CHECK. Servers run on free ports and are
stopped here; run from the repository root with the repo's .venv.
"""

from __future__ import annotations

import gzip
import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import redis  # noqa: E402

from servers import ROOT, Server, server_binary  # noqa: E402

DIST = ROOT / "dist"
INSTALLED_SO = "/usr/lib/redis/modules/libredis_ratelimit.so"
SNIPPET = "/etc/redis/modules.d/ratelimit.conf"


def crate_version() -> str:
    m = re.search(r'^version = "([^"]+)"$', (ROOT / "Cargo.toml").read_text(), re.M)
    assert m, "no version in Cargo.toml"
    return m.group(1)


def module_number(version: str) -> int:
    major, minor, patch = (int(p) for p in re.split(r"[-+]", version)[0].split("."))
    return major * 10000 + minor * 100 + patch


def run(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_sums(directory: Path, sums: Path, want_names: set[str], more: bool = False) -> None:
    """`sums` lists exactly `want_names` (with `more`: at least them; make
    release lists every file of dist/), each matching its file."""
    listed = {}
    for line in sums.read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        listed[name.lstrip("*")] = digest
    if more:
        assert want_names <= set(listed), f"{sums}: {sorted(listed)}"
    else:
        assert set(listed) == want_names, f"{sums}: {sorted(listed)}"
    for name, digest in listed.items():
        assert sha256(directory / name) == digest, f"{sums}: {name} does not match"


def smoke(s: Server, version: str, so_path: str) -> redis.Redis:
    """The loaded module is ours, at its version, from `so_path`, and limits."""
    c = s.client()
    mods = [m for m in c.module_list() if m[b"name"] == b"ratelimit"]
    assert len(mods) == 1, mods
    assert mods[0][b"ver"] == module_number(version), mods[0]
    if b"path" in mods[0]:  # Redis 7.2+ and Valkey show where it came from
        assert mods[0][b"path"].decode() == so_path, mods[0]
    assert c.info("ratelimit")["ratelimit_version"] == version
    replies = [c.execute_command("RL.CHECK", "smoke", "*", 2, 60000)[0] for _ in range(3)]
    assert replies == [0, 0, 1], f"limited flags of three calls against 2 a minute: {replies}"
    return c


def check_deb(version: str, deb: Path, tmp: Path) -> None:
    deb_version = f"{version}-1"
    arch = run("dpkg", "--print-architecture").strip()
    assert deb.name == f"redis-ratelimit_{deb_version}_{arch}.deb", deb.name

    fields = dict(re.findall(r"^ (\S+): (.*)$", run("dpkg-deb", "--info", str(deb)), re.M))
    assert fields["Package"] == "redis-ratelimit", fields
    assert fields["Version"] == deb_version, fields
    assert fields["Architecture"] == arch, fields
    assert re.fullmatch(r"libc6 \(>= 2\.\d+\)(, libgcc-s1)?", fields["Depends"]), fields["Depends"]
    assert int(fields["Installed-Size"]) > 0, fields
    assert run("dpkg-deb", "--info", str(deb), "conffiles").split() == [SNIPPET]

    files = {}
    for line in run("dpkg-deb", "--contents", str(deb)).splitlines():
        mode, owner, _size, _day, _time, path = line.split(None, 5)
        assert owner == "root/root", line
        files[path.removeprefix(".")] = mode
    regular = {p: m for p, m in files.items() if not m.startswith("d")}
    doc = "/usr/share/doc/redis-ratelimit/"
    assert regular == {
        SNIPPET: "-rw-r--r--",
        INSTALLED_SO: "-rwxr-xr-x",  # Redis refuses a module without an execute bit
        doc + "README.Debian": "-rw-r--r--",
        doc + "README.md.gz": "-rw-r--r--",
        doc + "changelog.gz": "-rw-r--r--",
        doc + "copyright": "-rw-r--r--",
    }, regular
    assert all(m == "drwxr-xr-x" for m in files.values() if m.startswith("d")), files

    root = tmp / "root"
    run("dpkg-deb", "-x", str(deb), str(root))
    # The README's relative links name documents the package does not ship
    # (compressed, they could not be followed anyway): README.Debian says
    # where they are.
    readme = gzip.decompress((root / doc.lstrip("/") / "README.md.gz").read_bytes()).decode()
    if re.search(r"\]\((?![a-z][a-z0-9+.-]*:|#)", readme):
        note = " ".join((root / doc.lstrip("/") / "README.Debian").read_text().split())
        assert "relative links" in note and "redis-ratelimit-<version>-linux-<arch>.tar.gz holds them" in note, note
    snippet = (root / SNIPPET.lstrip("/")).read_text()
    # The snippet loads the path the package installs the module to.
    assert re.findall(r"^loadmodule (\S+)$", snippet, re.M) == [INSTALLED_SO], snippet
    so = str(root / INSTALLED_SO.lstrip("/"))
    as_shipped = tmp / "as-shipped.conf"
    as_shipped.write_text(snippet.replace(INSTALLED_SO, so))
    # Every module config the snippet documents, uncommented: valid lines.
    configs = re.findall(r"^# (ratelimit\.\S+) (\d+)$", snippet, re.M)
    assert [n for n, _ in configs] == ["ratelimit.max-future-ms", "ratelimit.max-past-ms"], configs
    uncommented = tmp / "uncommented.conf"
    uncommented.write_text(re.sub(r"^# (ratelimit\.\S+ \d+)$", r"\1", as_shipped.read_text(), flags=re.M))

    redis7 = server_binary("redis7")
    with Server(module=False, binary=redis7, args=["--include", str(as_shipped)]) as s:
        c = smoke(s, version, so)
        assert c.config_get("ratelimit.*") == {"ratelimit.max-future-ms": "0", "ratelimit.max-past-ms": "0"}
        c.close()
    with Server(module=False, binary=redis7, args=["--include", str(uncommented)]) as s:
        c = smoke(s, version, so)
        assert c.config_get("ratelimit.*") == dict(configs), c.config_get("ratelimit.*")
        future = int(c.time()[0]) * 1000 + 10 * 60 * 1000
        try:
            c.execute_command("RL.CHECK", "guarded", future, 1, 1000)
            raise AssertionError("a now 10 minutes ahead was admitted under max-future-ms 60000")
        except redis.ResponseError as e:
            assert "ratelimit.max-future-ms" in str(e), e
        c.close()
    print(f"dist-test: {deb.name}: metadata and files as expected; redis7 loads {INSTALLED_SO} "
          f"through {SNIPPET} (as shipped and with its configs uncommented)")


def check_tarball(version: str, tarball: Path, tmp: Path) -> None:
    name = tarball.name.removesuffix(".tar.gz")
    assert name == f"redis-ratelimit-{version}-linux-{run('uname', '-m').strip()}", name
    docs = run("git", "-C", str(ROOT), "ls-files", "docs").split()
    # and the documents they link to (test_dist.py checks every link)
    docs += [l for l in (ROOT / "packaging/archive-docs.txt").read_text().splitlines() if l and not l.startswith("#")]
    files = ["CHANGELOG.md", "LICENSE", "README.md", "SHA256SUMS", "libredis_ratelimit.so", "ratelimit.conf"] + docs
    with tarfile.open(tarball) as t:
        listed = t.getmembers()
        got = {m.name for m in listed if m.isfile()}
        assert got == {f"{name}/{f}" for f in files}, sorted(got ^ {f"{name}/{f}" for f in files})
        assert all(m.uid == 0 and m.gid == 0 for m in listed)
        assert all(m.isfile() or m.isdir() for m in listed), "only files and directories"
        t.extractall(tmp, filter="data")
    top = tmp / name
    check_sums(top, top / "SHA256SUMS", set(files) - {"SHA256SUMS"})
    for same in ["LICENSE", "README.md", "CHANGELOG.md"] + docs:
        assert (top / same).read_bytes() == (ROOT / same).read_bytes(), same
    # The README's and changelog's relative links resolve inside the archive.
    for doc in ["README.md", "CHANGELOG.md"]:
        for target in re.findall(r"\]\((docs/[^)#\s]*)", (top / doc).read_text()):
            assert (top / target).exists(), f"{doc} links to {target}, missing from the archive"
    assert (top / "ratelimit.conf").read_bytes() == (ROOT / "packaging/ratelimit.conf").read_bytes()
    so = top / "libredis_ratelimit.so"
    sections = run("readelf", "-S", "-W", str(so))
    assert ".symtab" not in sections and ".debug_" not in sections, "the archive's module is not stripped"
    loaded = []
    for server in ["redis8", "valkey8", "valkey9"]:
        with Server(module=False, binary=server_binary(server), args=["--loadmodule", str(so)]) as s:
            smoke(s, version, str(so)).close()
            info = s.client().info("server")
            loaded.append(f"{server} {info.get('valkey_version') or info['redis_version']}")
    print(f"dist-test: {tarball.name}: members and SHA256SUMS as expected, stripped; loads into {', '.join(loaded)}")


def archive_steps() -> str:
    """The shell block of the install guide's "The archive" section."""
    section = (ROOT / "docs/guides/install.md").read_text().split("\n## The archive\n", 1)[1]
    m = re.search(r"```sh\n(.*?)```", section, re.S)
    assert m, "docs/guides/install.md: no sh block under 'The archive'"
    return m.group(1)


def check_install_guide(version: str, tarball: Path, tmp: Path) -> None:
    work, modules = tmp / "download", tmp / "usr/lib/redis/modules"
    work.mkdir()
    shutil.copy(tarball, work)
    shutil.copy(DIST / "SHA256SUMS", work)
    name = tarball.name.removesuffix(".tar.gz")
    # The guide names one release's archive; this run's is the same but for
    # the version and architecture.
    script = re.sub(r"redis-ratelimit-[0-9][^ /]*-linux-[A-Za-z0-9_]+(?=\.tar\.gz|\s|$)", name,
                    archive_steps(), flags=re.M)
    script = script.replace("sudo ", "").replace("/usr/lib/redis/modules/", f"{modules}/")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, capture_output=True, text=True)
    assert done.returncode == 0, f"the install guide's archive steps failed:\n{script}\n{done.stderr}"
    so = modules / "libredis_ratelimit.so"
    with Server(module=False, binary=server_binary("redis7"), args=["--loadmodule", str(so)]) as s:
        smoke(s, version, str(so)).close()
    print(f"dist-test: docs/guides/install.md's archive steps install a module redis7 loads ({so.stat().st_mode:o})")


def main() -> None:
    version = crate_version()
    tarballs = sorted(DIST.glob("redis-ratelimit-*.tar.gz"))
    debs = sorted(DIST.glob("redis-ratelimit_*.deb"))
    assert len(tarballs) == 1 and len(debs) == 1, f"expected one archive and one package in {DIST}: make dist"
    check_sums(DIST, DIST / "SHA256SUMS", {tarballs[0].name, debs[0].name}, more=True)
    with tempfile.TemporaryDirectory(prefix="rl-dist-deb-") as tmp:
        check_deb(version, debs[0], Path(tmp))
    with tempfile.TemporaryDirectory(prefix="rl-dist-tar-") as tmp:
        check_tarball(version, tarballs[0], Path(tmp))
    with tempfile.TemporaryDirectory(prefix="rl-dist-guide-") as tmp:
        check_install_guide(version, tarballs[0], Path(tmp))


if __name__ == "__main__":
    main()
