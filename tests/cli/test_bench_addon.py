"""streamfix/bench/addon.py: every floor forwards the stream byte for byte, whatever the
reads, and never hands mitmproxy ``b""`` (which would end a chunked body early)."""

from __future__ import annotations

import pytest
from streamfix.wire.sse import SseParser

from streamfix import bench
from streamfix.bench import addon as bench_addon

BODY = bench.devin_responses_stream(calls=(3,), reasoning=3, text=5, keepalive_every=4)


@pytest.mark.parametrize("floor", ["identity", "parse", "json"])
@pytest.mark.parametrize("size", [1, 7, 300, len(BODY)])
def test_floor_forwards_every_byte(floor: str, size: int) -> None:
    stream = bench_addon._identity if floor == "identity" else bench_addon._Parse(floor == "json")
    out = []
    for i in range(0, len(BODY), size):
        got = stream(BODY[i : i + size])
        assert isinstance(got, list) and b"" not in got
        out += got
    out += stream(b"")
    assert b"".join(out) == BODY


def test_json_floor_parses_each_data_event_once(monkeypatch) -> None:
    from streamfix.wire.sse import Event

    calls = []
    real = Event.json
    monkeypatch.setattr(Event, "json", lambda self: calls.append(self.raw) or real(self))
    bench_addon._Parse(True)(BODY)
    with_data = [ev.raw for ev in SseParser().feed(BODY) if ev.data is not None]
    assert calls == with_data
    calls.clear()
    bench_addon._Parse(False)(BODY)
    assert calls == []
