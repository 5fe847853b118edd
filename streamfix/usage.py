"""Sum a streamfix turn log per key, model and day.

    python -m streamfix.usage turns.jsonl [turns.jsonl.1 turns.jsonl.2.gz ...] [--json]

Reads the JSON lines ``--set streamfix_log=PATH`` writes (gzipped rotations too; ``-`` is
standard input). Per (day in UTC, key, model asked) it counts turns, truncated turns and
failed turns (upstream error, client abort, failed open), and sums input, cached, output
and total tokens. Token counts are the upstream's (Devin's own usage) where the turn log
has them, else what the client was told; the ``from`` column says which (``upstream``,
``client`` or ``mixed``). A line that is not a turn record is counted and skipped.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import IO, Any

from .cli import prog

FAILED = ("upstream_error", "client_abort", "failed_open")
TOKENS = ("input_tokens", "cached_tokens", "output_tokens", "total_tokens")


@dataclass
class Row:
    day: str
    key: str
    model: str
    turns: int = 0
    truncated: int = 0
    failed: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    sources: set[str] = field(default_factory=set)

    @property
    def source(self) -> str:
        if not self.sources:
            return "-"
        return next(iter(self.sources)) if len(self.sources) == 1 else "mixed"

    def add(self, turn: dict[str, Any]) -> None:
        self.turns += 1
        ended = turn.get("ended")
        self.truncated += ended == "truncated"
        self.failed += ended in FAILED
        counts, source = turn_tokens(turn)
        if counts is None:
            return
        self.sources.add(source)
        for name in TOKENS:
            setattr(self, name, getattr(self, name) + counts[name])

    def record(self) -> dict[str, Any]:
        d = asdict(self)
        del d["sources"]
        d["from"] = self.source
        return d


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def turn_tokens(turn: dict[str, Any]) -> tuple[dict[str, int] | None, str]:
    """(input, cached, output, total token counts, where from) of one turn record: the
    upstream's when it has any, else the client's; total = input + output if missing."""
    tokens = turn.get("tokens") or {}
    for source in ("upstream", "client"):
        c = tokens.get(source)
        if isinstance(c, dict) and any(_int(c.get(n)) for n in TOKENS):
            counts = {n: _int(c.get(n)) for n in TOKENS}
            if not counts["total_tokens"]:
                counts["total_tokens"] = counts["input_tokens"] + counts["output_tokens"]
            return counts, source
    return None, "-"


def _open(path: str) -> IO[str]:
    if path == "-":
        return sys.stdin
    if path.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path), encoding="utf-8")
    return open(path, encoding="utf-8")


def read_turns(paths: Iterable[str], bad: list[int] | None = None) -> Iterator[dict[str, Any]]:
    """The turn records in ``paths``; a count of skipped lines goes to ``bad[0]``."""
    for path in paths:
        with _open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    turn = json.loads(line)
                except ValueError:
                    turn = None
                if not isinstance(turn, dict) or not isinstance(turn.get("time"), str) or "api" not in turn:
                    if bad is not None:
                        bad[0] += 1
                    continue
                yield turn


def summarize(turns: Iterable[dict[str, Any]]) -> list[Row]:
    """One row per (day, key, model asked), sorted; no total row."""
    rows: dict[tuple[str, str, str], Row] = {}
    for t in turns:
        k = (t["time"][:10], str(t.get("key") or "-"), str(t.get("model") or "-"))
        row = rows.get(k)
        if row is None:
            row = rows[k] = Row(*k)
        row.add(t)
    return [rows[k] for k in sorted(rows)]


def total(rows: list[Row]) -> Row:
    out = Row("total", "", "")
    for r in rows:
        out.turns += r.turns
        out.truncated += r.truncated
        out.failed += r.failed
        for name in TOKENS:
            setattr(out, name, getattr(out, name) + getattr(r, name))
        out.sources |= {r.source} - {"-"}
    return out


COLUMNS = ("day", "key", "model", "turns", "truncated", "failed", *TOKENS, "from")
HEADINGS = ("day", "key", "model", "turns", "truncated", "failed", "input", "cached", "output", "total", "from")


def table(rows: list[Row]) -> str:
    recs = [r.record() for r in rows] + ([total(rows).record()] if rows else [])
    cells = [HEADINGS] + [tuple(str(rec[c]) for c in COLUMNS) for rec in recs]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    numeric = {c for c in COLUMNS if c not in ("day", "key", "model", "from")}
    lines = []
    for n, row in enumerate(cells):
        if n == len(cells) - 1 and rows:
            lines.append("  ".join("-" * w for w in widths))
        parts = [v.rjust(w) if COLUMNS[i] in numeric else v.ljust(w) for i, (v, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog=prog("usage"),
        description="Sum a streamfix turn log (--set streamfix_log=PATH) per key, model and day.",
        epilog="Tokens are the upstream's (Devin's usage) where known, else the client's; "
        "the 'from' column says which. Days are UTC.",
    )
    ap.add_argument("paths", nargs="+", metavar="PATH", help="turn log files (.gz too; - for standard input)")
    ap.add_argument("--json", action="store_true", help="print the rows and the total as JSON")
    a = ap.parse_args(argv)
    bad = [0]
    try:
        rows = summarize(read_turns(a.paths, bad))
    except OSError as e:
        print(f"streamfix.usage: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps({"rows": [r.record() for r in rows], "total": total(rows).record(), "skipped_lines": bad[0]},
                         indent=2))  # fmt: skip
    else:
        print(table(rows) if rows else "no turns")
    if bad[0]:
        print(f"streamfix.usage: skipped {bad[0]} lines that are not turn records", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
