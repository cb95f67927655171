"""Only a build step (pyproject.toml holds the metadata): the package carries
the repository's Functions library (functions/ratelimit.lua) as
redis_rl/ratelimit.lua, copied into the build at build time so the bytes are
the ones the library's tests prove (`make python-venv` copies it into src/
for the editable install).

setuptools builds in the source tree by default (build/ and
src/*.egg-info): both go to a temporary directory instead, so
`pip install ./clients/python` leaves the checkout as it was."""

import atexit
import shutil
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SOURCE = Path(__file__).resolve().parent.parent.parent / "functions" / "ratelimit.lua"


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if SOURCE.is_file():  # into the build, never into the checkout
            target = Path(self.build_lib) / "redis_rl" / "ratelimit.lua"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(SOURCE, target)


SCRATCH = tempfile.mkdtemp(prefix="redis_rl-build-")
atexit.register(shutil.rmtree, SCRATCH, True)

setup(cmdclass={"build_py": BuildPy},
      options={"build": {"build_base": f"{SCRATCH}/build"}, "egg_info": {"egg_base": SCRATCH}})
