"""wire/ type-checks: mypy with the settings in pyproject.toml ([tool.mypy]).

mypyc compiles wire/ with the same settings (streamfix/compiled.py), so a type error
here is also a build that falls back to the pure-Python core. mypy is a test extra: the
test skips only where it is not installed.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import ROOT


def test_wire_type_checks() -> None:
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--no-error-summary"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, f"mypy found errors in wire/:\n{r.stdout}{r.stderr}"
