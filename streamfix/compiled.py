"""Build the compiled core: mypyc over wire/'s hot modules, outside the source tree.

    python -m streamfix.compiled          # build it if it is missing (scripts/bootstrap)
    python -m streamfix.compiled --status # which build a process here would run

The build goes to ``build/compiled/<tag>-<key>/`` (``wire._core``: the key is a hash of
wire/'s sources), so the ``.py`` files stay the only source and an edit to wire/ is
never shadowed by an old ``.so``: the key no longer matches and the pure build runs until
this builds the new one. Without a C compiler or mypyc, or when compiling fails, it says
so and returns 0: the pure-Python core runs, with the same rules, more slowly.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from streamfix.wire import _core

ROOT = _core.HERE.parent

_SETUP = """
import sys
from setuptools import Extension, setup
from mypyc.build import mypycify
out = sys.argv[1]
mods = [f"streamfix/wire/{m}.py" for m in sys.argv[2:] if not m.startswith("_")]
native = [Extension(f"streamfix.wire.{m}", [f"streamfix/wire/{m}.c"], extra_compile_args=["-O2"])
          for m in sys.argv[2:] if m.startswith("_")]
setup(
    name="streamfix-core",
    ext_modules=mypycify(mods, opt_level="3", target_dir=out + "/c") + native,
    script_args=["build_ext", "--build-lib", out + "/lib", "--build-temp", out + "/obj"],
)
"""

_MYPY_INI = """[mypy]
python_version = 3.12
[mypy-streamfix.wire.devin_pb2]
follow_imports = skip
[mypy-brotli]
ignore_missing_imports = True
[mypy-google.protobuf.*]
ignore_missing_imports = True
[mypy-ijson.*]
ignore_missing_imports = True
[mypy-backports.*]
ignore_missing_imports = True
"""
"""mypy's settings for the staged sources (pyproject.toml's [tool.mypy], under the
installed module names)."""


def _stage(tmp) -> None:
    """wire/'s sources under the names they have at run time (``streamfix.wire.X``:
    mypyc bakes a module's full name into its build), in ``tmp/src``."""
    src = tmp / "src"
    pkg = src / "streamfix" / "wire"
    pkg.mkdir(parents=True)
    (src / "streamfix" / "__init__.py").write_text("")
    for f in [*_core.HERE.glob("*.py"), *_core.HERE.glob("*.c")]:
        shutil.copyfile(f, pkg / f.name)
    (src / "mypy.ini").write_text(_MYPY_INI)


def compiler() -> str | None:
    """The C compiler setuptools would use ($CC, else cc, gcc or clang), or None."""
    for c in os.environ.get("CC", "").split()[:1] + ["cc", "gcc", "clang"]:
        found = shutil.which(c)
        if found:
            return found
    return None


def say(msg: str) -> None:
    print(f"streamfix: {msg}", file=sys.stderr, flush=True)


def build(force: bool = False) -> int:
    """Build the compiled core for the current sources unless it exists: 0 whether it was
    built or not (the pure build then runs; scripts/bootstrap carries on either way)."""
    built(force)
    return 0


def mypyc_missing() -> str | None:
    """Why mypyc cannot run here (with the fix), or None."""
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        if _core.INSTALLED:
            return (
                f"mypyc is not installed here ({sys.executable} -m pip install mypy setuptools; "
                "pipx: pipx inject streamfix mypy setuptools)"
            )
        return "mypyc is not installed (pip install mypy)"
    return None


def built(force: bool = False, builds: Path | None = None) -> Path | None:
    """The compiled core of the current sources in ``builds`` (default: where this copy of
    wire/ looks, :data:`wire._core.BUILDS`), built unless it exists; None when it could not
    be built (one line says why: the pure-Python core runs)."""
    builds = _core.BUILDS if builds is None else builds
    key = _core.key()
    dest = builds / key
    if (dest / "wire").is_dir() and (dest / "runtime").is_dir() and not force:
        return dest
    if compiler() is None:
        say("no C compiler (cc, gcc, clang): the pure-Python core runs (same rules, slower)")
        return None
    if (why := mypyc_missing()) is not None:
        say(f"{why}: the pure-Python core runs")
        return None
    try:
        builds.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        say(f"cannot write {builds} ({e.strerror or e}): the pure-Python core runs")
        return None
    tmp = builds / f".tmp-{key}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    log = builds / "build.log"
    say(f"compiling wire/ with mypyc ({len(_core.COMPILED)} modules, about a minute; log: {log})")
    t0 = time.monotonic()
    with log.open("w") as fp:
        _stage(tmp)
        r = subprocess.run(
            [sys.executable, "-c", _SETUP, str(tmp), *_core.COMPILED, *_core.NATIVE],
            cwd=tmp / "src", stdout=fp, stderr=subprocess.STDOUT, check=False,
        )  # fmt: skip
    lib = tmp / "lib"
    if r.returncode != 0 or not (lib / "streamfix" / "wire").is_dir():
        shutil.rmtree(tmp, ignore_errors=True)
        say(f"compiling wire/ failed (see {log}): the pure-Python core runs")
        return None
    if _core.key() != key:  # wire/ was edited while it compiled: the build may mix both
        shutil.rmtree(tmp, ignore_errors=True)
        say("wire/ changed while it compiled: build discarded, the pure-Python core runs (run it again)")
        return None
    # the build: wire/ (one extension module per compiled module, found through
    # streamfix.wire's __path__) and runtime/ (mypyc's shared module, on sys.path)
    done = tmp / "done"
    (done / "runtime").mkdir(parents=True)
    (lib / "streamfix" / "wire").rename(done / "wire")
    for f in lib.iterdir():
        if f.is_file():
            f.rename(done / "runtime" / f.name)
    shutil.rmtree(dest, ignore_errors=True)
    try:
        done.rename(dest)
    except OSError:  # another bootstrap finished the same key first
        pass
    shutil.rmtree(tmp, ignore_errors=True)
    for old in builds.glob(f"{sys.implementation.cache_tag}-*"):
        if old.name != key:
            shutil.rmtree(old, ignore_errors=True)
    say(f"compiled core built in {time.monotonic() - t0:.0f} s: {dest}")
    return dest


def status() -> str:
    """What a new process here runs, after importing the compiled modules."""
    # installed: -P keeps the working directory (a source tree, say) off sys.path
    r = subprocess.run(
        [
            sys.executable,
            *(["-P"] if _core.INSTALLED else []),
            "-c",
            "import streamfix.wire.apis, streamfix.wire._core as c; print(c.describe())",
        ],
        cwd=None if _core.INSTALLED else ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return (r.stdout or r.stderr).strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m streamfix.compiled", description=__doc__.split("\n")[0])
    ap.add_argument("--status", action="store_true", help="say which build a process here runs, build nothing")
    ap.add_argument("--force", action="store_true", help="rebuild even when the build of these sources exists")
    a = ap.parse_args(argv)
    if a.status:
        print(status())
        return 0
    return build(a.force)


def core(argv: list[str] | None = None) -> int:
    """``streamfix core``: which protocol core runs here and why; ``--check`` exits 1 unless
    it is the compiled one; ``--build`` builds it for this install first."""
    from .cli import prog

    ap = argparse.ArgumentParser(
        prog=prog("core"),
        description="Say which protocol core runs here (compiled with mypyc, or pure Python) and why; "
        "build the compiled one.",
    )
    ap.add_argument("--check", action="store_true", help="exit 1 unless the compiled core runs")
    ap.add_argument(
        "--build",
        action="store_true",
        help="build the compiled core for this install (a C compiler and mypy needed), then say which runs",
    )
    ap.add_argument("--force", action="store_true", help="with --build: rebuild even when it exists")
    a = ap.parse_args(argv)
    if a.build and built(a.force) is None:
        print(status())
        return 1
    said = status()
    print(said)
    return 1 if (a.check or a.build) and not said.startswith("compiled") else 0


if __name__ == "__main__":
    sys.exit(main())
