"""CI runs the compiled core (the builds a new process picks: test_core_build.py)."""

from __future__ import annotations

import os

import pytest
import streamfix.wire._core as core
from support import compiled_core

from streamfix import compiled


def test_ci_runs_the_compiled_core() -> None:
    """CI builds it (scripts/bootstrap) and runs the whole suite on it."""
    if not os.environ.get("CI") or not core.wanted():
        pytest.skip("only in CI, without STREAMFIX_PURE")
    if compiled.compiler() is None:
        pytest.skip("no C compiler here")
    assert compiled_core(), core.describe()
