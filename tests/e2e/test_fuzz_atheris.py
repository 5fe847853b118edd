"""Coverage-guided fuzzing (atheris, libFuzzer) of every target of fuzz.py, and of the upstream
leg's decoders (fuzz_upstream.py), for a few seconds each, in a subprocess; ``just fuzz``
runs the first for as long as you like."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT, SUPPORT


def test_atheris_bounded(tmp_path: Path) -> None:
    """Coverage-guided fuzzing of all targets for a few seconds: nothing found."""
    pytest.importorskip("atheris")
    r = subprocess.run(
        [
            sys.executable,
            str(SUPPORT / "fuzz.py"),
            "-max_total_time=8",
            "-rss_limit_mb=2048",
            f"-artifact_prefix={tmp_path}/",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Done" in r.stderr, r.stderr[-2000:]  # libFuzzer's summary: it really ran


def test_atheris_upstream_decoders_bounded(tmp_path: Path) -> None:
    """Coverage-guided fuzzing of the upstream leg's decoders for a few seconds: nothing found."""
    pytest.importorskip("atheris")
    r = subprocess.run(
        [sys.executable, str(SUPPORT / "fuzz_upstream.py"), "-max_total_time=8", "-rss_limit_mb=2048",
         f"-artifact_prefix={tmp_path}/", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Done" in r.stderr, r.stderr[-2000:]
