"""``pip install ./clients/python`` builds outside the checkout: no build/
or *.egg-info left in it (setuptools' in-tree build wrote both)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1]


def test_pip_install_writes_nothing_into_the_checkout(tmp_path):
    copy = tmp_path / "python"
    shutil.copytree(PKG, copy, ignore=shutil.ignore_patterns(".venv", "__pycache__", "build", "*.egg-info"))
    before = sorted(p.relative_to(copy) for p in copy.rglob("*"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                    "--no-build-isolation", "--target", str(tmp_path / "site"), str(copy)], check=True)
    after = sorted(p.relative_to(copy) for p in copy.rglob("*"))
    assert after == before
    assert (tmp_path / "site" / "redis_rl" / "py.typed").exists()
