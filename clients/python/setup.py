"""Only a build step (pyproject.toml holds the metadata): the package carries
the repository's Functions library (functions/ratelimit.lua) as
redis_rl/ratelimit.lua, copied here at build time so the bytes are the ones
the module's tests prove. An sdist already holds the copy.

setuptools builds in the source tree by default (build/ and
src/*.egg-info): both go to a temporary directory instead, so
`pip install ./clients/python` leaves the checkout as it was."""

import atexit
import shutil
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent.parent / "functions" / "ratelimit.lua"
TARGET = HERE / "src" / "redis_rl" / "ratelimit.lua"


class BuildPy(build_py):
    def run(self) -> None:
        if SOURCE.is_file():
            shutil.copyfile(SOURCE, TARGET)
        super().run()


SCRATCH = tempfile.mkdtemp(prefix="redis_rl-build-")
atexit.register(shutil.rmtree, SCRATCH, True)

setup(cmdclass={"build_py": BuildPy},
      options={"build": {"build_base": f"{SCRATCH}/build"}, "egg_info": {"egg_base": SCRATCH}})
