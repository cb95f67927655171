"""Every name the release publishes follows its registry's naming rules (what
the registry would refuse, checked here before a tag is pushed). Whether a
name is still free is a registry look-up, done once by hand (RELEASING.md)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET

from packaging.utils import canonicalize_name

from conftest import ROOT

NS = {"m": "http://maven.apache.org/POM/4.0.0"}
LINT = ROOT / "packaging" / "lint"


def published_poms():
    """The poms make release deploys: every pom under clients/java without
    maven.deploy.skip (found by glob, so a new module is checked too)."""
    for pom in sorted((ROOT / "clients" / "java").rglob("pom.xml")):
        if "/target/" in pom.as_posix():
            continue
        project = ET.parse(pom).getroot()
        if project.findtext("m:properties/m:maven.deploy.skip", namespaces=NS) == "true":
            continue
        yield pom, project


def test_maven_coordinates():
    # Maven's own model check ([A-Za-z0-9_\-.]+), and Central's: a groupId
    # that is a reversed domain the publisher verifies (redisratelimit.dev),
    # artifactIds in lower case.
    poms = list(published_poms())
    assert len(poms) >= 10
    for pom, project in poms:
        group = project.findtext("m:groupId", namespaces=NS) or project.findtext("m:parent/m:groupId", namespaces=NS)
        artifact = project.findtext("m:artifactId", namespaces=NS)
        assert group == "dev.redisratelimit", pom
        assert re.fullmatch(r"[a-z][a-z0-9]*(\.[a-z][a-z0-9]*)+", group)
        assert re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", artifact), (pom, artifact)


def test_pypi_name():
    meta = tomllib.loads((ROOT / "clients/python/pyproject.toml").read_text())["project"]
    name = meta["name"]
    # PEP 508 / the core metadata spec: letters, digits, . _ -, starting and ending alphanumeric
    assert re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", name), name
    assert canonicalize_name(name) == name  # published as written, no normalization surprise
    # PyPI refuses standard-library module names
    assert name not in sys.stdlib_module_names and name.replace("-", "_") not in sys.stdlib_module_names


def test_npm_name():
    name = json.loads((ROOT / "clients/node/package.json").read_text())["name"]
    verdict = json.loads(subprocess.run(
        ["node", "-e", "process.stdout.write(JSON.stringify(require('validate-npm-package-name')(process.argv[1])))",
         name], cwd=LINT, capture_output=True, text=True, check=True).stdout)
    assert verdict["validForNewPackages"], verdict
    # and the check itself refuses what npm refuses
    bad = json.loads(subprocess.run(
        ["node", "-e", "process.stdout.write(JSON.stringify(require('validate-npm-package-name')('Redis_RL')))"],
        cwd=LINT, capture_output=True, text=True, check=True).stdout)
    assert not bad["validForNewPackages"]


def test_debian_package_name():
    control = (ROOT / "packaging/debian/control.in").read_text()
    name = re.search(r"^Package: (.+)$", control, re.M).group(1)
    # Debian policy 5.6.1: lower case, digits, + - ., at least two characters, alphanumeric first
    assert re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", name), name


def test_container_image_names():
    # the reference grammar of image names (distribution/reference): lower-case path components
    text = (ROOT / "packaging/docker/compose.yaml").read_text()
    images = re.findall(r"^\s*image:\s*(\S+)$", text, re.M)
    assert images
    for image in images:
        path, tag = image.rsplit(":", 1)
        assert re.fullmatch(r"[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*", path), image
        assert re.fullmatch(r"[\w][\w.-]{0,127}", tag), image
