"""python -m streamfix.usage: sums a hand-written turn log (the expected sums worked out by hand)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

from support import ROOT, child_env

from streamfix import usage


def turn(time, key, model, ended="complete", up=None, client=None):
    return {"time": time, "key": key, "api": "chat", "model": model, "ended": ended,
            "tokens": {"upstream": up, "client": client}}  # fmt: skip


LOG = [
    # alice, swe-2, day 1: two turns with upstream counts, one truncated
    turn(
        "2026-11-29T10:00:00.000Z",
        "alice",
        "swe-2",
        up={"input_tokens": 100, "cached_tokens": 40, "output_tokens": 20, "total_tokens": 120},
    ),
    turn(
        "2026-11-29T23:59:59.999Z",
        "alice",
        "swe-2",
        "truncated",
        up={"input_tokens": 50, "cached_tokens": 0, "output_tokens": 400, "total_tokens": 450},
    ),
    # alice, swe-2, day 2: client counts only (no upstream leg), total missing -> in + out
    turn("2026-11-30T00:00:00.000Z", "alice", "swe-2", client={"input_tokens": 7, "output_tokens": 3}),
    # bob, day 2, two models; an upstream error without counts; a client abort with upstream counts
    turn("2026-11-30T08:00:00.000Z", "3f2a9c1b0d4e", "swe-2", "upstream_error"),
    turn(
        "2026-11-30T09:00:00.000Z",
        "3f2a9c1b0d4e",
        "claude",
        "client_abort",
        up={"input_tokens": 10, "output_tokens": 1},
        client={"input_tokens": 999, "output_tokens": 999},
    ),
]


def write(path: Path, lines: list, junk: bool = False) -> Path:
    text = "\n".join(json.dumps(x) for x in lines) + "\n"
    if junk:
        text = "not json\n" + text + '{"no": "time"}\n\n'
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def test_sums_per_key_model_day(tmp_path: Path):
    rows = usage.summarize(usage.read_turns([str(write(tmp_path / "t.jsonl", LOG))]))
    got = {(r.day, r.key, r.model): r.record() for r in rows}
    assert list(got) == [
        ("2026-11-29", "alice", "swe-2"),
        ("2026-11-30", "3f2a9c1b0d4e", "claude"),
        ("2026-11-30", "3f2a9c1b0d4e", "swe-2"),
        ("2026-11-30", "alice", "swe-2"),
    ]
    a1 = got[("2026-11-29", "alice", "swe-2")]
    assert (a1["turns"], a1["truncated"], a1["failed"]) == (2, 1, 0)
    assert (a1["input_tokens"], a1["cached_tokens"], a1["output_tokens"], a1["total_tokens"], a1["from"]) == (
        150,
        40,
        420,
        570,
        "upstream",
    )
    a2 = got[("2026-11-30", "alice", "swe-2")]
    assert (a2["input_tokens"], a2["output_tokens"], a2["total_tokens"], a2["from"]) == (7, 3, 10, "client")
    bc = got[("2026-11-30", "3f2a9c1b0d4e", "claude")]
    assert (bc["failed"], bc["input_tokens"], bc["output_tokens"], bc["total_tokens"], bc["from"]) == (
        1,
        10,
        1,
        11,
        "upstream",
    )
    bs = got[("2026-11-30", "3f2a9c1b0d4e", "swe-2")]
    assert (bs["turns"], bs["failed"], bs["total_tokens"], bs["from"]) == (1, 1, 0, "-")
    t = usage.total(rows).record()
    assert (
        t["turns"],
        t["truncated"],
        t["failed"],
        t["input_tokens"],
        t["output_tokens"],
        t["total_tokens"],
        t["from"],
    ) == (5, 1, 2, 167, 424, 591, "mixed")


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
