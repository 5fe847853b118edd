"""addons/turn.py: how a turn ended, decided once for HTTP and WebSocket turns (worked by
hand from ENDINGS' definitions), and the record of a Turn."""

from __future__ import annotations

import pytest
from streamfix.addons.turn import ENDINGS, Turn, ending
from streamfix.wire.told import Told
from streamfix.wire.verdict import Verdict

TRUNCATED = Verdict()
TRUNCATED.request({"max_tokens": 5})
TRUNCATED.usage(5)
CUT = TRUNCATED.decide()


@pytest.mark.parametrize(
    ("facts", "want"),
    [
        ({}, ("complete", None)),
        ({"decision": CUT}, ("truncated", None)),
        ({"failure": "stream ended without a terminal event", "decision": CUT},
         ("upstream_error", "stream ended without a terminal event")),
        ({"failure": ""}, ("upstream_error", None)),  # a failure terminal: nothing more to say
        ({"http_error": True, "failure": "x"}, ("upstream_error", None)),
        ({"gone": "Client disconnected.", "by_client": True, "http_error": True}, ("client_abort", "Client disconnected.")),
        ({"gone": "connection reset"}, ("upstream_error", "connection reset")),
        # a repairer's failure is streamfix's own: said even when the connection went too
        ({"failed": ValueError("boom"), "gone": "Client disconnected.", "by_client": True},
         ("failed_open", "ValueError: boom")),
    ],
)  # fmt: skip
def test_ending(facts: dict, want: tuple) -> None:
    assert CUT.truncated
    got = ending(**facts)
    assert got == want and got[0] in ENDINGS


def test_record() -> None:
    t = Turn(flow_id="f", api="responses", transport="websocket", path="/v1/responses?x=1", key="k", model="m",
             started=10.0, ended_at=10.25, ended="upstream_error", error="e", first_byte_at=10.1, status=101,
             bytes_in=3, bytes_out=4, events=2, salvaged=0)  # fmt: skip
    assert t.record() == {
        "time": "1970-01-01T00:00:10.250Z", "flow": "f", "key": "k", "api": "responses", "transport": "websocket",
        "path": "/v1/responses", "model": "m", "upstream_model": None, "status": 101, "ended": "upstream_error",
        "tokens": {"client": None, "upstream": None}, "finish": {"client": None, "gateway": None},
        "response": {"id": None, "model": None}, "max_tokens": None, "gateway": None,
        "verdict": None, "rules": {}, "bytes": {"in": 3, "out": 4},
        "events": 2, "ttfb_ms": 100, "duration_ms": 250, "error": "e",
    }  # fmt: skip


def test_record_says_what_the_client_was_told_beside_what_the_gateway_said() -> None:
    """A truncation the gateway ended as ``stop``, told as ``length``: the record keeps both
    endings, the response's names from the client's stream, the cap and the gateway."""
    told, said = Told("chat"), Told("chat")
    chunk = b'data: {"id":"c9","model":"m-2","choices":[{"index":0,"delta":{},"finish_reason":"%s"}],' \
            b'"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}\n\n'  # fmt: skip
    told.feed(chunk % b"length")
    said.feed(chunk % b"stop")
    t = Turn(flow_id="f", api="chat", transport="sse", path="/v1/chat/completions", key="k", model="m",
             started=10.0, ended_at=11.0, ended="truncated", verdict=TRUNCATED, told=told, said=said,
             server=("127.0.0.1", 8317))  # fmt: skip
    rec = t.record()
    assert rec["finish"] == {"client": ["length"], "gateway": ["stop"]}
    assert rec["response"] == {"id": "c9", "model": "m-2"}
    assert rec["max_tokens"] == 5 and rec["gateway"] == "127.0.0.1:8317"
    assert rec["tokens"]["client"] == {"input_tokens": 3, "output_tokens": 5, "total_tokens": 8}
