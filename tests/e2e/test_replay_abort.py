"""The replay upstream (the demo's) when a client aborts mid-stream: one line, no aiohttp
traceback, and it keeps serving."""

from __future__ import annotations

import socket
import time

import pytest
from support import fetch, start_replay

pytestmark = pytest.mark.e2e

REQUEST = (
    b"POST /v1/responses HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
    b"x-streamfix-delay-ms: 50\r\ncontent-length: %d\r\n\r\n%s"
)


def test_client_abort_is_one_line_not_a_traceback() -> None:
    replay, base = start_replay()
    try:
        port = int(base.rsplit(":", 1)[1])
        body = b'{"model":"responses-devin-toolcall","stream":true,"input":"hi"}'
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.sendall(REQUEST % (len(body), body))
                assert s.recv(4096).startswith(b"HTTP/1.1 200")
        replay.wait_count("the client closed the connection", 3, timeout=20)
        time.sleep(0.5)
        assert "Traceback" not in replay.output and "Error handling request" not in replay.output, replay.output
        got = fetch(
            base + "/v1/responses", body=body, headers={"content-type": "application/json", "x-streamfix-delay-ms": "0"}
        )
        assert got.status == 200 and b"response.completed" in got.body
    finally:
        replay.stop()
