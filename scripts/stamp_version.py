#!/usr/bin/env python3
"""One version for every package: VERSION (the repository's root) stamped into
each file that names the project's own version.

    scripts/stamp_version.py          rewrite the files that disagree (make version)
    scripts/stamp_version.py --check  list them and exit 1, writing nothing
                                      (make build runs this: a build never
                                      starts from files that disagree)
    scripts/stamp_version.py --root DIR   another tree (tests, release copies)

What is stamped (found by globbing the tree, so a new pom, package or Lua file
is covered without editing this list):
- Cargo.toml's [package] version and Cargo.lock's entry for the crate (the
  module's MODULE LIST `ver` and INFO `ratelimit_version` come from it,
  src/version.rs);
- every pom.xml: the project's own <version> when its groupId (own or the
  parent's) is dev.redisratelimit, and the <version> of every <parent> or
  <dependency> on a dev.redisratelimit artifact that names one literally;
- every pyproject.toml of a package named redis-ratelimit*;
- every package.json: the version of the package named redis-ratelimit and
  any dependency on it by version (file: links are left alone); every
  package-lock.json: the entries of that package (its own lock's root, a
  linked copy in another lock);
- Dockerfiles and compose files: `ARG RL_VERSION=`, the `RL_VERSION:` build
  argument and `redis-ratelimit/<image>:<version>` tags;
- a consumer pom's `<rl.version>` property (packaging/consumers);
- every *.lua file's `local RL_VERSION = <number>` line: the Functions
  library's rl_version answers it, encoded as MODULE LIST's ver
  (major*10000 + minor*100 + patch);
- the install snippets of the Markdown docs (CHANGELOG.md excepted: it is
  history): Maven coordinates and <version> of dev.redisratelimit artifacts,
  the release file names (archive, .deb, wheel, sdist, npm tarball) and
  `pip install redis-ratelimit-client==` / `npm install redis-ratelimit@`,
  and `name ratelimit, ver N`, `N for X.Y.Z`, `ratelimit_version:X.Y.Z`
  (what MODULE LIST and INFO show after installing it); the same in
  packaging/debian/README.Debian.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

GROUP = "dev.redisratelimit"
SKIP_DIRS = {".git", "target", "node_modules", ".venv", "dist", "build", "__pycache__", ".pytest_cache"}
SEMVER = r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?"


def encode(version: str) -> int:
    """MODULE LIST's ver (src/version.rs): 0.3.0 -> 300."""
    major, minor, patch = (int(p) for p in version.split("-")[0].split("."))
    if minor > 99 or patch > 99:
        raise ValueError(f"{version}: minor and patch must be below 100 (MODULE LIST ver)")
    return major * 10000 + minor * 100 + patch


def tree_files(root: Path) -> list[Path]:
    """Tracked and untracked-but-not-ignored files under git, else a walk."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard", "-z"],
                             check=True, capture_output=True).stdout
        files = [root / p for p in out.decode().split("\0") if p]
        if files:
            return [f for f in files if f.is_file() and not SKIP_DIRS & set(f.relative_to(root).parts)]
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        found += [Path(dirpath, f) for f in filenames]
    return found


# --- one function per kind of file: text in, text out ------------------------------------------

def stamp_cargo_toml(text: str, v: str) -> str:
    # the first `version =` after [package], before the next table
    return re.sub(r'(\[package\][^\[]*?\nversion\s*=\s*")[^"]*(")', rf"\g<1>{v}\2", text, count=1)


def stamp_cargo_lock(text: str, v: str) -> str:
    return re.sub(r'(\[\[package\]\]\nname = "redis-ratelimit"\nversion = ")[^"]*(")', rf"\g<1>{v}\2", text)


def _block_version(block: str, v: str) -> str:
    """A <parent>/<dependency> block: its literal <version> when its groupId is ours."""
    if f"<groupId>{GROUP}</groupId>" not in block:
        return block
    return re.sub(r"(<version>)(?!\$\{)[^<]*(</version>)", rf"\g<1>{v}\2", block, count=1)


def stamp_pom(text: str, v: str) -> str:
    # a consumer's pom (packaging/consumers) names the release in a property
    text = re.sub(rf"(<rl\.version>){SEMVER}(</rl\.version>)", rf"\g<1>{v}\2", text)
    text = re.sub(r"<parent>.*?</parent>", lambda m: _block_version(m.group(0), v), text, flags=re.S)
    text = re.sub(r"<dependency>.*?</dependency>", lambda m: _block_version(m.group(0), v), text, flags=re.S)
    # The project's own <version>: a direct child of <project>, i.e. one before
    # the first section that nests versions of other things.
    head_end = re.search(r"<(?:properties|modules|dependencyManagement|dependencies|build|profiles|"
                         r"repositories|pluginRepositories|reporting|distributionManagement)>", text)
    cut = head_end.start() if head_end else len(text)
    head, rest = text[:cut], text[cut:]
    parent = re.search(r"<parent>.*?</parent>", head, flags=re.S)
    own = head[parent.end():] if parent else head
    own_group = re.search(r"<groupId>([^<]*)</groupId>", own)
    group = own_group.group(1) if own_group else (
        re.search(r"<groupId>([^<]*)</groupId>", parent.group(0)).group(1) if parent else None)
    if group == GROUP:
        start = parent.end() if parent else 0
        own = re.sub(r"(<version>)[^<]*(</version>)", rf"\g<1>{v}\2", head[start:], count=1)
        head = head[:start] + own
    return head + rest


def stamp_pyproject(text: str, v: str) -> str:
    if not re.search(r'^name\s*=\s*"redis-ratelimit[^"]*"', text, flags=re.M):
        return text
    return re.sub(r'(\[project\][^\[]*?\nversion\s*=\s*")[^"]*(")', rf"\g<1>{v}\2", text, count=1)


def stamp_package_json(text: str, v: str) -> str:
    data = json.loads(text)
    if data.get("name") == "redis-ratelimit":
        text = re.sub(r'^(\s*"version"\s*:\s*")[^"]*(")', rf"\g<1>{v}\2", text, count=1, flags=re.M)
    # a dependency on the package by version (not a file:/link: path)
    return re.sub(rf'("redis-ratelimit"\s*:\s*"[\^~]?){SEMVER}(")', rf"\g<1>{v}\2", text)


def stamp_package_lock(text: str, v: str) -> str:
    data = json.loads(text)
    as_npm_writes = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    changed = False
    if data.get("name") == "redis-ratelimit" and data.get("version") != v:
        data["version"] = v
        changed = True
    for path, entry in data.get("packages", {}).items():
        ours = entry.get("name") == "redis-ratelimit" or (path == "" and data.get("name") == "redis-ratelimit")
        # a registry copy (resolved to a tarball) keeps the version it was published with
        if ours and "version" in entry and "resolved" not in entry and entry["version"] != v:
            entry["version"] = v
            changed = True
    if not changed:
        return text
    if as_npm_writes != text:
        raise ValueError("not in npm's own layout (2-space JSON); run npm install, then stamp again")
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def stamp_lua(text: str, v: str) -> str:
    return re.sub(r"^(local\s+RL_VERSION\s*=\s*)\d+", rf"\g<1>{encode(v)}", text, flags=re.M)


def stamp_markdown(text: str, v: str) -> str:
    subs = [
        # Maven coordinates group:artifact:version
        (rf"(\b{re.escape(GROUP)}:[\w.-]+:){SEMVER}", rf"\g<1>{v}"),
        # release file names
        (rf"(redis-ratelimit-){SEMVER}(-linux-|\.tgz)", rf"\g<1>{v}\2"),
        (rf"(redis-ratelimit_){SEMVER}(-1_)", rf"\g<1>{v}\2"),
        (rf"(redis_ratelimit_client-){SEMVER}((?:-py3-none-any\.whl)|\.tar\.gz)", rf"\g<1>{v}\2"),
        (rf"(redis-ratelimit-client(?:\[[\w,]+\])?==){SEMVER}", rf"\g<1>{v}"),
        (rf"(redis-ratelimit@){SEMVER}", rf"\g<1>{v}"),
        # container image tags and the build argument
        (rf"(\bredis-ratelimit/[\w.-]+:){SEMVER}", rf"\g<1>{v}"),
        (rf"(\bRL_VERSION=){SEMVER}", rf"\g<1>{v}"),
        # what MODULE LIST and INFO show after installing that release
        (r"(name ratelimit, ver )\d+", rf"\g<1>{encode(v)}"),
        (rf"\b\d+ for {SEMVER}\b", f"{encode(v)} for {v}"),
        (rf"(\bratelimit_version:){SEMVER}", rf"\g<1>{v}"),
    ]
    for pattern, repl in subs:
        text = re.sub(pattern, repl, text)
    # <dependency>/<parent> snippets (XML inside Markdown code blocks)
    text = re.sub(r"<(parent|dependency)>.*?</\1>", lambda m: _block_version(m.group(0), v), text, flags=re.S)
    return text


def stamp_container(text: str, v: str) -> str:
    """Dockerfiles and compose files: the release they take (ARG RL_VERSION=,
    RL_VERSION: in build args) and the image tags they name."""
    text = re.sub(rf'(\bRL_VERSION(?:=|:\s*"?)){SEMVER}', rf"\g<1>{v}", text)
    return re.sub(rf"(\bredis-ratelimit/[\w.-]+:){SEMVER}", rf"\g<1>{v}", text)


def stamper(root: Path, path: Path):
    rel = path.relative_to(root).as_posix()
    name = path.name
    if rel == "Cargo.toml":
        return stamp_cargo_toml
    if rel == "Cargo.lock":
        return stamp_cargo_lock
    if name == "pom.xml":
        return stamp_pom
    if name == "pyproject.toml":
        return stamp_pyproject
    if name == "package.json":
        return stamp_package_json
    if name == "package-lock.json":
        return stamp_package_lock
    if name.endswith(".lua"):
        return stamp_lua
    if name == "Dockerfile" or name.endswith((".Dockerfile", "compose.yaml", "compose.yml")):
        return stamp_container
    if (name.endswith(".md") and name != "CHANGELOG.md") or rel == "packaging/debian/README.Debian":
        return stamp_markdown  # README.Debian: the same install prose, in Debian's plain-text place
    return None


def lua_problems(root: Path, files: list[Path]) -> list[str]:
    """A Lua file defining rl_version must take it from a stamped RL_VERSION line."""
    problems = []
    for f in files:
        if f.name.endswith(".lua"):
            text = f.read_text(encoding="utf-8")
            if "rl_version" in text and not re.search(r"^local\s+RL_VERSION\s*=\s*\d+", text, flags=re.M):
                problems.append(f"{f.relative_to(root)}: defines rl_version but has no "
                                "`local RL_VERSION = <number>` line to stamp (rl_version must answer it)")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file disagrees")
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = ap.parse_args()
    root = args.root.resolve()
    version = (root / "VERSION").read_text(encoding="utf-8").strip()
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        print(f"VERSION: {version!r} is not major.minor.patch", file=sys.stderr)
        return 1
    encode(version)
    files = tree_files(root)
    stale, errors = [], lua_problems(root, files)
    for f in sorted(files):
        fn = stamper(root, f)
        if fn is None:
            continue
        text = f.read_text(encoding="utf-8")
        try:
            new = fn(text, version)
        except ValueError as e:
            errors.append(f"{f.relative_to(root)}: {e}")
            continue
        if new != text:
            stale.append(f.relative_to(root).as_posix())
            if not args.check:
                f.write_text(new, encoding="utf-8")
    for e in errors:
        print(f"stamp-version: {e}", file=sys.stderr)
    if args.check:
        if stale:
            print(f"stamp-version: these files do not carry VERSION {version}: {' '.join(stale)}\n"
                  f"  run `make version` (scripts/stamp_version.py) and commit the result", file=sys.stderr)
        return 1 if stale or errors else 0
    for s in stale:
        print(f"stamp-version: {s} -> {version}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
