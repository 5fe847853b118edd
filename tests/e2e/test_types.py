"""wire/, addons/ and streamfix/ type-check: scripts/typecheck (mypy with the settings in
pyproject.toml, [tool.mypy], over the three under their run-time names).

mypyc compiles wire/ with the same settings (streamfix/compiled.py), so a type error
there is also a build that falls back to the pure-Python core. mypy is a test extra: the
test skips only where it is not installed.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import ROOT


def test_everything_type_checks() -> None:
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "typecheck"), "--no-incremental", "--no-error-summary"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert r.returncode == 0, f"mypy found errors:\n{r.stdout}{r.stderr}"
