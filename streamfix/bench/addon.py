"""The benchmark's baseline addon: stream every SSE response with the least work.

    mitmdump -s streamfix/bench/addon.py [--set streamfix_bench_floor=FLOOR] ...

``flow.response.stream = True`` (the default floor, ``stream``) is the cheapest way
mitmproxy can forward a stream as it arrives; ``python -m streamfix.bench`` compares the
repair addon's CPU against it. ``python -m streamfix.bench --floors`` also runs the
floors between the two, each a stream callable doing one more step that any event-level
repair must do, so the repair's cost can be read step by step:

- ``identity``: a callable that returns each read as it came (what calling into Python
  per read costs);
- ``parse``: the reads through ``wire.sse.SseParser``, each event's bytes sent on;
- ``json``: the same, plus one ``orjson.loads`` of each event's data (``Event.json``),
  the least a repair that reads the events must do.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mitmproxy import ctx, http

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from streamfix.wire.sse import SseParser

FLOORS = ("stream", "identity", "parse", "json")


def _identity(chunk: bytes) -> list[bytes]:
    return [chunk] if chunk else []


class _Parse:
    """``parse`` and ``json``: split into events, send each event's bytes on."""

    __slots__ = ("json", "parser")

    def __init__(self, json: bool) -> None:
        self.parser = SseParser()
        self.json = json

    def __call__(self, chunk: bytes) -> list[bytes]:
        events = self.parser.feed(chunk) if chunk else self.parser.close()
        if self.json:
            for ev in events:
                if ev.data is not None:
                    try:
                        ev.json()
                    except ValueError:
                        pass
        out = b"".join(ev.raw for ev in events)
        return [out] if out else []


class Passthrough:
    def load(self, loader) -> None:
        loader.add_option(
            "streamfix_bench_floor", str, "stream", f"how SSE responses are streamed: {', '.join(FLOORS)}"
        )

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None and flow.response.headers.get("content-type", "").startswith("text/event-stream"):
            floor = ctx.options.streamfix_bench_floor
            if floor == "identity":
                flow.response.stream = _identity
            elif floor in ("parse", "json"):
                flow.response.stream = _Parse(floor == "json")
            else:
                flow.response.stream = True


addons = [Passthrough()]
