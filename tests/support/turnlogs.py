"""A hand-written turn log (its sums worked out by hand in the usage tests) and how to write one."""

from __future__ import annotations

import gzip
import json
from pathlib import Path


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
