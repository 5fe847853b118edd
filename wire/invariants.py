"""Stream invariants, the test-side name of :mod:`wire.contract`.

``check(api, body)`` returns the contract's violations as strings
(``"event 3: item.order: ..."``), empty when the stream is correct; ``json_events`` gives
a body's JSON events. The rules themselves live once, in ``wire/contract.py``.
"""

from __future__ import annotations

from typing import Any

import orjson

from . import contract
from .sse import SseParser


def json_events(body: bytes) -> list[dict[str, Any]]:
    """The JSON objects of an SSE body's data fields, in order (``[DONE]``, comments and
    non-JSON data skipped)."""
    p = SseParser()
    out = []
    for e in p.feed(body) + p.close():
        if e.data is None or e.data == b"[DONE]":
            continue
        try:
            obj = orjson.loads(e.data)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def check(api: str, body: bytes) -> list[str]:
    return [str(v) for v in contract.check(api, body)]
