"""streamfix.usage: sums a hand-written turn log (the expected sums worked out by hand; the
command line: test_usage_cli.py)."""

from __future__ import annotations

from pathlib import Path

from turnlogs import LOG, write

from streamfix import usage


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
