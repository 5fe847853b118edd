"""The Responses recordings in WebSocket form (one message per SSE ``data:``) and what a turn of each
must receive: shared by the in-process WebSocket addon tests and the end-to-end ones."""

from __future__ import annotations

import re

import orjson
from streamfix.wire.foreign import foreign
from streamfix.wire.sse import SseParser

from streamfix.recordings import Recording, all_recordings
from streamfix.replay import ws_messages

TERMINALS = {"response.completed", "response.incomplete", "response.failed", "error"}


def _ws_form(rec: Recording) -> bool:
    """Does the recording's repair have the same WebSocket form? Not when it leans on the two
    SSE-only rules the WebSocket turn runs without (addons/websocket.py): ``nonstandard`` (an
    SSE comment has no WebSocket form; foreign messages pass, Codex ignores or uses them) and
    ``eof_terminal`` (a turn without a terminal ends with the socket closing: nothing can
    follow). tests/addons/test_websocket_addon.py checks those two cases on their own."""
    p = SseParser()
    evs = p.feed(rec.body) + p.close()
    if any(foreign("responses", ev) for ev in evs):
        return False
    return any(TERMINALS & {orjson.loads(m).get("type")} for m in ws_messages(rec.body))


_STREAMS = [r for r in all_recordings() if r.api == "responses" and r.streaming]


RESPONSES = [r.name for r in _STREAMS if _ws_form(r)]


BUGGY = [r.name for r in _STREAMS if r.kind == "buggy" and _ws_form(r)]


def expected(rec: Recording, got: list[bytes], wall: tuple[float, float]) -> list[bytes]:
    """The expected body in WebSocket form; a filled ``created_at`` is the one second,
    within the exchange's wall-clock bounds, that the client saw (see support.live_expected)."""
    want = ws_messages(rec.expected)
    started = rec.meta.get("started_at")
    pat = b'"created_at":%d' % started if isinstance(started, int) else None
    if pat is None or not any(pat in m for m in want):
        return want
    lo, hi = int(wall[0]), int(wall[1]) + 1
    seen = {int(v) for m in got for v in re.findall(rb'"created_at":(\d+)', m) if lo <= int(v) <= hi}
    if len(seen) != 1:
        return want
    sub = b'"created_at":%d' % seen.pop()
    return [m.replace(pat, sub) for m in want]
