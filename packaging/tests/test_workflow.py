"""The release workflow (.github/workflows/release.yml): linted by actionlint
(pinned, built by make release-test into target/tools) and GitHub's workflow
schema, and read for what RELEASING.md promises: the tried dist/ is what gets
published, secrets only by name, tokenless PyPI, npm with provenance."""
from __future__ import annotations

import re
import subprocess

from conftest import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
ACTIONLINT = ROOT / "target" / "tools" / "actionlint"


def test_actionlint():
    done = subprocess.run([str(ACTIONLINT), "-no-color", str(WORKFLOW)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_github_workflow_schema():
    done = subprocess.run([str(ROOT / ".venv/bin/check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
                           str(WORKFLOW)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_what_releasing_md_promises():
    text = WORKFLOW.read_text()
    assert "make release-test" in text  # build and consumer tests before any upload
    assert re.search(r'tags:\s*\["v\[0-9\]\+', text)
    # every secret by name, each named in RELEASING.md for the person who sets it
    secrets = set(re.findall(r"secrets\.([A-Z0-9_]+)", text))
    assert secrets == {"MAVEN_GPG_PRIVATE_KEY", "MAVEN_GPG_PASSPHRASE", "CENTRAL_TOKEN_USERNAME",
                       "CENTRAL_TOKEN_PASSWORD", "NPM_TOKEN"}
    releasing = (ROOT / "RELEASING.md").read_text()
    for s in secrets:
        assert f"`{s}`" in releasing, s
    # PyPI by trusted publishing: an OIDC token, no password secret
    pypi = text.split("\n  pypi:\n", 1)[1].split("\n  npm:\n", 1)[0]
    assert "id-token: write" in pypi and "gh-action-pypi-publish" in pypi and "secrets." not in pypi
    npm = text.split("\n  npm:\n", 1)[1].split("\n  github-release:\n", 1)[0]
    assert "id-token: write" in npm and "--provenance" in npm
    # the jobs that publish take dist/ from the build job, never build again
    for job in ("maven-central", "pypi", "npm"):
        body = text.split(f"\n  {job}:\n", 1)[1]
        body = re.split(r"\n  [a-z-]+:\n", body, maxsplit=1)[0]
        assert "needs: build" in body and "download-artifact" in body and "make " not in body, job
