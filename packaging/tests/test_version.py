"""One version (VERSION) in every package: the real tree agrees, and the
stamping script moves every kind of file (found by glob) to a new version."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAMP = ROOT / "scripts" / "stamp_version.py"
NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def run(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(STAMP), "--root", str(root), *args],
                          capture_output=True, text=True)


def pom_version(path: Path) -> str:
    project = ET.parse(path).getroot()
    own = project.find("m:version", NS)
    return (own if own is not None else project.find("m:parent/m:version", NS)).text


def test_the_tree_agrees_with_version():
    r = run(ROOT, "--check")
    assert r.returncode == 0, r.stderr
    version = (ROOT / "VERSION").read_text().strip()
    assert re.search(rf'^version = "{re.escape(version)}"$', (ROOT / "Cargo.toml").read_text(), re.M)


def copy_tree(tmp: Path) -> Path:
    """The tracked files the stamper reads, without git (so the copy is walked)."""
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard"],
                           capture_output=True, text=True, check=True).stdout.split()
    dst = tmp / "tree"
    for rel in files:
        name = Path(rel).name
        if name in {"VERSION", "Cargo.toml", "Cargo.lock", "pom.xml", "pyproject.toml", "package.json",
                    "package-lock.json", "Dockerfile", "compose.yaml", "README.Debian"} or name.endswith((".md", ".lua")):
            src = ROOT / rel
            if src.is_file():
                (dst / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst / rel)
    return dst


def test_a_new_version_reaches_every_package(tmp_path):
    tree = copy_tree(tmp_path)
    (tree / "VERSION").write_text("1.4.12\n")
    # a module added later (another helper's, a new Boot line) is found by glob
    new = tree / "clients/java/ratelimit-new/pom.xml"
    new.parent.mkdir(parents=True)
    new.write_text((tree / "clients/java/ratelimit-client/pom.xml").read_text())
    # the Functions library's version line
    lua = tree / "functions/ratelimit.lua"
    lua.parent.mkdir(exist_ok=True)
    lua.write_text("#!lua name=ratelimit\nlocal RL_VERSION = 1\n"
                   "redis.register_function('rl_version', function() return RL_VERSION end)\n")

    assert run(tree, "--check").returncode == 1
    r = run(tree)
    assert r.returncode == 0, r.stderr
    assert run(tree, "--check").returncode == 0

    assert re.search(r'^version = "1\.4\.12"$', (tree / "Cargo.toml").read_text(), re.M)
    assert 'name = "redis-ratelimit"\nversion = "1.4.12"' in (tree / "Cargo.lock").read_text()
    poms = sorted(tree.rglob("pom.xml"))
    assert len(poms) >= 12
    for pom in poms:
        if "packaging/consumers" in pom.as_posix():  # a user's app: its own version, ours by property
            assert "<rl.version>1.4.12</rl.version>" in pom.read_text()
            continue
        assert pom_version(pom) == "1.4.12", pom
        parent = ET.parse(pom).getroot().find("m:parent", NS)
        if parent is not None and parent.find("m:groupId", NS).text == "dev.redisratelimit":
            assert parent.find("m:version", NS).text == "1.4.12", pom
    assert re.search(r'^version = "1\.4\.12"$', (tree / "clients/python/pyproject.toml").read_text(), re.M)
    assert '"version": "1.4.12"' in (tree / "clients/node/package.json").read_text()
    lock = (tree / "clients/node/package-lock.json").read_text()
    assert lock.count('"version": "1.4.12"') == 2  # the lock's root and its "" entry
    assert "local RL_VERSION = 10412\n" in lua.read_text()  # MODULE LIST's ver encoding
    assert "ratelimit-spring-boot-starter:1.4.12" in (tree / "clients/java/README.md").read_text()
    for dockerfile in tree.glob("packaging/docker/*/Dockerfile"):
        assert "ARG RL_VERSION=1.4.12\n" in dockerfile.read_text(), dockerfile
    debian = (tree / "packaging/debian/README.Debian").read_text()
    assert "(name ratelimit, ver 10412 for 1.4.12)" in debian and "(ratelimit_version:1.4.12)" in debian
    assert "patch (10412 for 1.4.12)" in (tree / "docs/guides/install.md").read_text()
    compose = (tree / "packaging/docker/compose.yaml").read_text()
    assert 'RL_VERSION: "1.4.12"' in compose and "redis-ratelimit/redis:1.4.12" in compose


def test_one_file_behind_fails_the_check_and_is_named(tmp_path):
    tree = copy_tree(tmp_path)
    pom = tree / "clients/java/ratelimit-lettuce/pom.xml"
    text = pom.read_text()
    version = (tree / "VERSION").read_text().strip()
    pom.write_text(text.replace(f"<version>{version}</version>", "<version>0.0.9</version>", 1))
    r = run(tree, "--check")
    assert r.returncode == 1
    assert "clients/java/ratelimit-lettuce/pom.xml" in r.stderr
    assert pom.read_text() != text  # --check wrote nothing


def test_a_lua_rl_version_without_the_stamped_line_fails(tmp_path):
    tree = copy_tree(tmp_path)
    lua = tree / "functions/ratelimit.lua"
    lua.parent.mkdir(exist_ok=True)
    lua.write_text("redis.register_function('rl_version', function() return 300 end)\n")
    r = run(tree, "--check")
    assert r.returncode == 1
    assert "functions/ratelimit.lua" in r.stderr and "RL_VERSION" in r.stderr
