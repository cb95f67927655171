"""Only a build step (pyproject.toml holds the metadata): the package carries
the repository's Functions library (functions/ratelimit.lua) as
redis_rl/ratelimit.lua, copied here at build time so the bytes are the ones
the module's tests prove. An sdist already holds the copy."""

import shutil
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


setup(cmdclass={"build_py": BuildPy})
