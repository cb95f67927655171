"""make release's last check (scripts/checkout_state.sh): a file written into
the checkout during the build is named, with what it may come from."""
from __future__ import annotations

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "checkout_state.sh"


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True)


def test_unchanged_passes_and_a_new_file_is_named(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text("__pycache__/\n")
    (repo / "dist").mkdir()
    state = tmp_path / "state"
    assert run(repo, "save", str(state)).returncode == 0
    (repo / "dist" / "new.tgz").write_text("x")  # dist/ is the release's own output
    assert run(repo, "compare", str(state)).returncode == 0
    (repo / "__pycache__").mkdir()
    (repo / "__pycache__" / "t.pyc").write_text("x")  # as a pytest run meanwhile leaves
    done = run(repo, "compare", str(state))
    assert done.returncode == 1
    assert "  after:  !! __pycache__/t.pyc" in done.stderr
    assert "changed while make release ran" in done.stderr and "something else run in the checkout" in done.stderr
    assert "wrote into the checkout" not in done.stderr
