"""python -m streamfix.usage as a command: tables, --json, gzipped logs and junk lines, --help."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support import ROOT, child_env
from turnlogs import LOG, write


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamfix.usage", *args], capture_output=True, text=True, check=False,
                          cwd=ROOT, env=child_env(), timeout=60)  # fmt: skip


def test_cli_table_json_gz_and_junk(tmp_path: Path):
    a = write(tmp_path / "t.jsonl", LOG[:2], junk=True)
    b = write(tmp_path / "t.jsonl.1.gz", LOG[2:])
    r = run(str(a), str(b))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == [
        "day",
        "key",
        "model",
        "turns",
        "truncated",
        "failed",
        "input",
        "cached",
        "output",
        "total",
        "from",
    ]
    assert lines[1].split() == ["2026-11-29", "alice", "swe-2", "2", "1", "0", "150", "40", "420", "570", "upstream"]
    assert lines[-1].split() == ["total", "5", "1", "2", "167", "40", "424", "591", "mixed"]
    assert "skipped 2 lines" in r.stderr
    j = run("--json", str(a), str(b))
    doc = json.loads(j.stdout)
    assert len(doc["rows"]) == 4 and doc["total"]["total_tokens"] == 591 and doc["skipped_lines"] == 2


def test_cli_help_and_missing_file(tmp_path: Path):
    h = run("--help")
    assert h.returncode == 0 and "per key, model and day" in h.stdout and "--json" in h.stdout
    m = run(str(tmp_path / "nope.jsonl"))
    assert m.returncode == 2 and "nope.jsonl" in m.stderr
