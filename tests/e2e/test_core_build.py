"""Which build of wire/ a new process runs: the compiled core only when it was built from the
sources as they are now, the pure one otherwise or when STREAMFIX_PURE=1 asks for it
(wire/_core.py, streamfix/compiled.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import streamfix.wire._core as core
from support import ROOT

PROBE = "import streamfix.wire.apis, streamfix.wire.sse, streamfix.wire._core as c; print(c.describe()); print(streamfix.wire.sse.__file__)"


def probe(cwd: Path, **env: str) -> tuple[str, str]:
    e = {k: v for k, v in os.environ.items() if k != core.PURE_ENV}
    e["PYTHONPATH"] = str(cwd)
    r = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=cwd,
        env={**e, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    said, sse_file = r.stdout.strip().splitlines()
    return said, sse_file


def built() -> Path:
    d = core.BUILDS / core.key()
    if not (d / "wire").is_dir():
        pytest.skip("no compiled core for these sources (scripts/bootstrap builds it where a C compiler is found)")
    return d


def test_pure_on_request() -> None:
    said, sse_file = probe(ROOT, STREAMFIX_PURE="1")
    assert said == "pure (STREAMFIX_PURE=1)"
    assert sse_file == str(ROOT / "wire" / "sse.py")


def test_compiled_when_built_from_these_sources() -> None:
    d = built()
    said, sse_file = probe(ROOT)
    assert said.startswith("compiled (mypyc,"), said
    # (mypyc names a module's file after its shared library's place: d/runtime/...)
    assert Path(sse_file).is_relative_to(d) and not sse_file.endswith(".py"), sse_file


def test_an_edit_to_wire_runs_the_pure_build_not_the_old_compiled_one(tmp_path: Path) -> None:
    d = built()
    (tmp_path / "wire").mkdir()
    for p in (ROOT / "wire").glob("*.py"):
        shutil.copy2(p, tmp_path / "wire" / p.name)
    for p in [*(ROOT / "wire").glob("*.proto"), *(ROOT / "wire").glob("*.c")]:
        shutil.copy2(p, tmp_path / "wire" / p.name)
    (tmp_path / "streamfix").mkdir()  # a checkout: streamfix/ beside wire/ and addons/
    shutil.copy2(ROOT / "streamfix" / "__init__.py", tmp_path / "streamfix" / "__init__.py")
    (tmp_path / "addons").mkdir()
    shutil.copytree(d, tmp_path / "build" / "compiled" / d.name)
    said, sse_file = probe(tmp_path)  # the copy, unchanged: its build matches
    assert said.startswith("compiled"), said
    sse = tmp_path / "wire" / "sse.py"
    original = sse.read_text()
    sse.write_text(original + "\n# an edit\n")
    said, sse_file = probe(tmp_path)
    assert said.startswith("pure (the compiled build is of other sources"), said
    assert sse_file == str(sse)
    sse.write_text(original)
    assert probe(tmp_path)[0].startswith("compiled"), "the edit undone: the build matches again"
    for c in core.NATIVE:  # a C twin's source is one of the sources too
        src = tmp_path / "wire" / f"{c}.c"
        src.write_text(src.read_text() + "\n/* an edit */\n")
        said, _ = probe(tmp_path)
        assert said.startswith("pure (the compiled build is of other sources"), (c, said)


def test_no_c_compiler_says_so_and_carries_on(tmp_path: Path) -> None:
    """The install step without a C compiler: one line, exit 0, nothing built or removed."""
    before = sorted(p.name for p in core.BUILDS.glob("*")) if core.BUILDS.is_dir() else []
    env = {k: v for k, v in os.environ.items() if k not in ("CC", core.PURE_ENV)}
    env["PATH"] = str(tmp_path)  # no cc, gcc or clang on it
    r = subprocess.run(
        [sys.executable, "-m", "streamfix.compiled", "--force"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0
    assert "no C compiler" in r.stderr and "pure-Python core runs" in r.stderr
    assert (sorted(p.name for p in core.BUILDS.glob("*")) if core.BUILDS.is_dir() else []) == before
