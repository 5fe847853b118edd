"""setuptools' part of the build; everything else is in pyproject.toml.

A wheel (``pip install .``, ``pipx install .``, deploy/install.sh, the image) carries the
compiled core where a C compiler is found: mypyc over wire/'s per-event modules
(streamfix/compiled.py, the same function scripts/bootstrap runs), put where an installed
``streamfix.wire`` looks for it (``streamfix/build/compiled/<key of wire/'s sources>``,
wire/_core.py). mypy (and orjson, for its types) is then a build requirement (``setup_requires``: pip
installs it into the isolated build environment only, never beside streamfix). Without a compiler, or with
``STREAMFIX_PURE=1``, one line says so and the wheel holds the pure-Python core (same rules,
slower); ``streamfix core`` says which core an install runs.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # streamfix.compiled and streamfix.wire from these sources

from streamfix.wire import _core

from streamfix import compiled


def _why_pure() -> str | None:
    """Why this build holds the pure-Python core only, or None (it compiles)."""
    if not _core.wanted():
        return f"{_core.PURE_ENV}=1"
    if compiled.compiler() is None:
        return "no C compiler (cc, gcc, clang)"
    return None


WHY_PURE = _why_pure()


class BuildPy(build_py):
    """The packages as setuptools builds them, plus the compiled core."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install runs the checkout's wire/: scripts/bootstrap builds its core
        if WHY_PURE is not None:
            compiled.say(
                f"{WHY_PURE}: the wheel holds the pure-Python core (same rules, slower; streamfix core says so)"
            )
            return
        # built in the source tree's build/compiled (where scripts/bootstrap puts it; reused when it exists)
        built = compiled.built()
        if built is None:
            return  # it said why
        dest = Path(self.build_lib) / "streamfix" / "build" / "compiled" / built.name
        shutil.copytree(built, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))


class Dist(Distribution):
    def has_ext_modules(self) -> bool:
        return WHY_PURE is None  # a compiled core: the wheel is for this interpreter and platform


setup(
    distclass=Dist,
    cmdclass={"build_py": BuildPy},
    # mypyc, and orjson for its types (as in scripts/bootstrap's venv): the build environment only
    setup_requires=[] if WHY_PURE is not None else ["mypy>=1.10", "orjson>=3.10"],
)
