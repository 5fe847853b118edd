"""What reading what the client was told costs, in instructions (valgrind callgrind), per event.

    python -m streamfix.bench.told            # needs valgrind on the PATH

With a turn sink on (the turn log, metrics or traces), each streamed flow feeds every
chunk the client gets to one :class:`wire.told.Told` and every chunk the gateway sent to
another (its ending, against the client's). This runs a recording of each API, its middle
events repeated to ``--events``, through both readers one event per feed, N and 6N times
under callgrind, with the same loop without readers as the baseline in the same run; the
difference divided by 5N streams and their events is the cost of one event.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

RECORDINGS = {
    "chat": "chat-devin-truncated-toolcall",
    "responses": "responses-devin-toolcall",
    "messages": "messages-devin-truncated",
    "gemini": "gemini-devin-truncated",
}


def _events(api: str, n_events: int) -> list[bytes]:
    from streamfix.recordings import load
    from streamfix.wire.sse import SseParser

    p = SseParser()
    evs = [e.raw for e in p.feed(load(RECORDINGS[api]).body) + p.close() if e.data is not None]
    middle = evs[1:-3] or evs
    return evs[:1] + (middle * (n_events // len(middle) + 1))[: max(0, n_events - 4)] + evs[-3:]


def _run(api: str, n: int, readers: bool, n_events: int) -> None:
    from streamfix.wire.told import Told

    evs = _events(api, n_events)
    for _ in range(n):
        rs = [Told(api), Told(api)] if readers else []
        for e in evs:
            for r in rs:
                r.feed(e)
        for r in rs:
            r.finish  # noqa: B018 - the held chunks are read when the turn ends


def _instructions(api: str, n: int, readers: bool, n_events: int, out: Path) -> int:
    from .instructions import counted_run

    return counted_run("streamfix.bench.told", ["--child", api, str(n), "1" if readers else "0", str(n_events)], out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m streamfix.bench.told", description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=4, help="streams in the first run (the second runs 6N)")
    ap.add_argument("--events", type=int, default=300, help="events per stream")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        _run(a.child[0], int(a.child[1]), a.child[2] == "1", int(a.child[3]))
        return 0
    if shutil.which("valgrind") is None:
        print("needs valgrind (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as d:
        for api in RECORDINGS:
            n_events = len(_events(api, a.events))
            got = {}
            for readers in (False, True):
                for n in (a.n, 6 * a.n):
                    got[readers, n] = _instructions(api, n, readers, a.events, Path(d) / f"cg.{api}.{readers}.{n}")
            extra = (got[True, 6 * a.n] - got[True, a.n]) - (got[False, 6 * a.n] - got[False, a.n])
            print(f"{api}: {extra / (5 * a.n * n_events):,.0f} instructions per event (both readers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
