"""What make release put in dist/: checksums over everything, a Maven
repository Maven Central would take, the Python sdist and pure wheel, the npm
tarball, all of VERSION."""
from __future__ import annotations

import email
import hashlib
import json
import re
import tarfile
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT

NS = {"m": "http://maven.apache.org/POM/4.0.0"}
GROUP = "dev/redisratelimit"
# Built by the Java reactor but never published (maven.deploy.skip).
UNPUBLISHED = {"ratelimit-it", "ratelimit-example-spring", "ratelimit-example-spring-kotlin"}


def test_sha256sums_cover_every_file(dist):
    listed = {}
    for line in (dist / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        listed[name] = digest
    files = {p.relative_to(dist).as_posix() for p in dist.rglob("*") if p.is_file() and p.name != "SHA256SUMS"}
    assert set(listed) == files
    for name, digest in listed.items():
        assert hashlib.sha256((dist / name).read_bytes()).hexdigest() == digest, name


def pom_chain(repo: Path, pom: Path) -> list[ET.Element]:
    """The POM and its parents, as Maven Central reads inherited metadata."""
    chain = []
    while pom is not None:
        project = ET.parse(pom).getroot()
        chain.append(project)
        parent = project.find("m:parent", NS)
        pom = None
        if parent is not None and parent.findtext("m:groupId", namespaces=NS) == "dev.redisratelimit":
            a, v = parent.findtext("m:artifactId", namespaces=NS), parent.findtext("m:version", namespaces=NS)
            pom = repo / GROUP / a / v / f"{a}-{v}.pom"
            assert pom.is_file(), f"parent {a} {v} is not in dist/maven"
    return chain


def inherited(chain: list[ET.Element], path: str) -> ET.Element | None:
    for project in chain:
        e = project.find(path, NS)
        if e is not None:
            return e
    return None


def test_maven_repository_holds_every_artifact_as_central_requires(dist, version):
    repo = dist / "maven"
    artifacts = sorted(p.name for p in (repo / GROUP).iterdir() if p.is_dir())
    # every module the Java build publishes, on both Spring Boot lines
    for want in ["ratelimit-parent", "ratelimit-client", "ratelimit-lettuce", "ratelimit-spring-data",
                 "ratelimit-spring-parent", "ratelimit-spring-boot-autoconfigure", "ratelimit-spring-boot-starter",
                 "ratelimit-spring-boot3-parent", "ratelimit-spring-boot3-autoconfigure",
                 "ratelimit-spring-boot3-starter"]:
        assert want in artifacts, artifacts
    assert not UNPUBLISHED & set(artifacts), artifacts
    for a in artifacts:
        d = repo / GROUP / a / version
        pom = d / f"{a}-{version}.pom"
        assert pom.is_file(), a
        chain = pom_chain(repo, pom)
        own = chain[0]
        assert own.findtext("m:name", namespaces=NS), f"{a}: no <name>"
        assert own.findtext("m:description", namespaces=NS), f"{a}: no <description>"
        for what in ["m:url", "m:licenses/m:license/m:name", "m:developers/m:developer/m:name",
                     "m:scm/m:url", "m:scm/m:connection"]:
            e = inherited(chain, what)
            assert e is not None and e.text, f"{a}: no {what} (own or inherited)"
        for f in d.iterdir():
            if f.suffix in {".jar", ".pom"}:
                assert (d / (f.name + ".sha1")).is_file() and (d / (f.name + ".md5")).is_file(), f.name
        packaging = own.findtext("m:packaging", namespaces=NS) or "jar"
        if packaging == "jar":
            main, sources, javadoc = (d / f"{a}-{version}{c}.jar" for c in ("", "-sources", "-javadoc"))
            assert main.is_file() and sources.is_file() and javadoc.is_file(), a
            with zipfile.ZipFile(main) as z:
                names = z.namelist()
            if "starter" in a:
                with zipfile.ZipFile(sources) as z:
                    assert "README.md" in z.namelist(), a  # says where the code is
            else:
                assert any(n.endswith(".class") for n in names), f"{a}: a jar without classes"
                with zipfile.ZipFile(sources) as z:
                    assert any(n.endswith(".java") for n in z.namelist()), a
                with zipfile.ZipFile(javadoc) as z:
                    assert "index.html" in z.namelist(), a


def test_python_sdist_and_pure_wheel(dist, version):
    wheels = sorted((dist / "python").glob("*.whl"))
    sdists = sorted((dist / "python").glob("*.tar.gz"))
    assert [w.name for w in wheels] == [f"redis_ratelimit_client-{version}-py3-none-any.whl"]
    assert [s.name for s in sdists] == [f"redis_ratelimit_client-{version}.tar.gz"]
    with zipfile.ZipFile(wheels[0]) as z:
        names = z.namelist()
        meta = email.message_from_bytes(z.read(f"redis_ratelimit_client-{version}.dist-info/METADATA"))
    assert meta["Name"] == "redis-ratelimit-client" and meta["Version"] == version
    assert meta.get_all("Requires-Dist")[0].startswith("redis")
    assert any(u.startswith("Source, https://github.com/") for u in meta.get_all("Project-URL") or []), meta
    assert "redis_rl/__init__.py" in names and "redis_rl/py.typed" in names
    assert not [n for n in names if n.startswith("tests/") or "/tests/" in n]
    with tarfile.open(sdists[0]) as t:
        pkg_info = t.extractfile(f"redis_ratelimit_client-{version}/PKG-INFO").read()
    assert email.message_from_bytes(pkg_info)["Version"] == version


def test_npm_tarball(dist, version):
    [tgz] = (dist / "npm").glob("*.tgz")
    assert tgz.name == f"redis-ratelimit-{version}.tgz"
    with tarfile.open(tgz) as t:
        names = t.getnames()
        pkg = json.load(t.extractfile("package/package.json"))
    assert pkg["name"] == "redis-ratelimit" and pkg["version"] == version
    for entry in ["package/dist/index.js", "package/dist/index.mjs", "package/dist/index.d.ts",
                  "package/dist/express.js", "package/README.md"]:
        assert entry in names, entry
    assert not [n for n in names if n.startswith(("package/src/", "package/test/", "package/node_modules/"))]
    assert pkg["repository"]["url"].startswith("git+https://github.com/")


def test_packages_carry_the_functions_library(dist, version):
    """functions/ratelimit.lua, byte for byte, in the wheel, the sdist and the
    npm tarball (once the library is in the tree)."""
    lib = ROOT / "functions" / "ratelimit.lua"
    if not lib.is_file():
        pytest.skip("no functions/ratelimit.lua in this tree: no library to carry")
    want = lib.read_bytes()
    [wheel] = (dist / "python").glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        assert z.read("redis_rl/ratelimit.lua") == want
    [sdist] = (dist / "python").glob("*.tar.gz")
    with tarfile.open(sdist) as t:
        assert t.extractfile(f"redis_ratelimit_client-{version}/src/redis_rl/ratelimit.lua").read() == want
    [tgz] = (dist / "npm").glob("*.tgz")
    with tarfile.open(tgz) as t:
        assert t.extractfile("package/dist/ratelimit.lua").read() == want


def test_module_archive_and_deb_carry_version(dist, version):
    assert len(list(dist.glob(f"redis-ratelimit-{version}-linux-*.tar.gz"))) == 1
    assert len(list(dist.glob(f"redis-ratelimit_{version}-1_*.deb"))) == 1


def source_only_links() -> set[str]:
    """The archive's links that docs/guides/install.md ("The archive") says
    point into the source repository: its list after "In the archive they
    are these:"."""
    text = (ROOT / "docs/guides/install.md").read_text()
    m = re.search(r"In the archive they are these:\n\n((?:- `[^`]+`\n)+)", text)
    assert m, "docs/guides/install.md: no list of the archive's links into the source repository"
    return set(re.findall(r"^- `([^`]+)`$", m.group(1), re.M))


def test_archive_markdown_links_resolve_inside_it(dist, version, tmp_path):
    """Every relative link of every Markdown file in the unpacked archive
    names a file or directory inside it (and a heading of a .md target, by
    GitHub's slug rules), except exactly the source files install.md lists."""
    from test_docs import anchors, links  # integration/, on sys.path (conftest)

    [archive] = dist.glob(f"redis-ratelimit-{version}-linux-*.tar.gz")
    with tarfile.open(archive) as t:
        t.extractall(tmp_path, filter="data")
    [top] = tmp_path.iterdir()
    pages = sorted(top.rglob("*.md"))
    assert len(pages) > 3, pages
    bad, outside = [], {}
    for page in pages:
        where = page.relative_to(top).as_posix()
        for target in links(page):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = (page.parent / file_part).resolve() if file_part else page
            if not dest.is_relative_to(top):
                bad.append(f"{where}: {target} leaves the archive")
            elif not dest.exists():
                name = dest.relative_to(top).as_posix() + ("/" if file_part.endswith("/") else "")
                outside.setdefault(name, []).append(where)
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(f"{where}: {target}: no heading #{anchor} in {dest.relative_to(top)}")
    documented = source_only_links()
    undocumented = {n: w for n, w in outside.items() if n not in documented}
    assert not bad and not undocumented, "\n".join(
        bad + [f"{n} (linked from {', '.join(sorted(set(w)))}) is not in the archive" for n, w in sorted(undocumented.items())])
    # The list is exactly the dead links (no stale entry), each a real path
    # of the repository, where the install guide sends the reader.
    assert set(outside) == documented, sorted(documented - set(outside))
    for name in documented:
        assert (ROOT / name).exists(), f"install.md lists {name}, which the repository does not hold"


def test_package_readmes_link_to_the_release_tag(dist, version):
    """The READMEs PyPI and npm show (the wheel's description, the sdist's
    and the npm tarball's README.md) hold no relative link (only #anchors):
    each points at a path of the repository at the tag v<version>."""
    url = ET.parse(ROOT / "clients/java/pom.xml").getroot().findtext("m:url", namespaces=NS)
    [wheel] = (dist / "python").glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        meta = email.message_from_bytes(z.read(f"redis_ratelimit_client-{version}.dist-info/METADATA"))
    [sdist] = (dist / "python").glob("*.tar.gz")
    [tgz] = (dist / "npm").glob("*.tgz")
    with tarfile.open(sdist) as t:
        sdist_readme = t.extractfile(f"redis_ratelimit_client-{version}/README.md").read().decode()
    with tarfile.open(tgz) as t:
        npm_readme = t.extractfile("package/README.md").read().decode()
    from test_docs import without_fences  # integration/, on sys.path (conftest)

    for name, text in [("wheel", meta.get_payload()), ("sdist", sdist_readme), ("npm", npm_readme)]:
        body = re.sub(r"`[^`\n]*`", "", without_fences(text))
        targets = re.findall(r"\]\(([^)\s]+)", body)
        relative = [t for t in targets if not re.match(r"^(#|[a-z][a-z0-9+.-]*:)", t)]
        assert not relative, f"{name} README: relative links {relative}"
        tagged = [t for t in targets if t.startswith(f"{url}/")]
        assert tagged, f"{name} README: no link into {url}"
        for t in tagged:
            m = re.fullmatch(rf"{re.escape(url)}/(blob|tree)/v{re.escape(version)}/([^#]+)(#.*)?", t)
            assert m and (ROOT / m.group(2)).exists(), f"{name} README: {t}"
            assert (ROOT / m.group(2)).is_dir() == (m.group(1) == "tree"), t


def test_one_repository_url_everywhere():
    """npm's provenance and Maven Central's scm both point at the repository:
    one URL in the pom, pyproject.toml and package.json."""
    pom = ET.parse(ROOT / "clients/java/pom.xml").getroot()
    url = pom.findtext("m:url", namespaces=NS)
    assert pom.findtext("m:scm/m:url", namespaces=NS) == url
    assert f'Source = "{url}"' in (ROOT / "clients/python/pyproject.toml").read_text()
    pkg = json.loads((ROOT / "clients/node/package.json").read_text())
    assert pkg["repository"]["url"] == f"git+{url}.git"
