"""HTTP promises through the sidecar, with raw sockets against real mitmdump
(addons/repair.py, reverse mode) in front of the replay upstream (python -m streamfix.replay):

* a client's ``Connection: close`` is honoured: the connection reaches EOF right after the
  last byte of the response (RFC 9112 section 9.6), streamed or not, and the response does
  not promise ``keep-alive``;
* a keep-alive client still gets both responses on one connection;
* an HTTP/1.0 client gets a complete body (no chunked framing it cannot read);
* after the sidecar decodes a gzip stream, the headers say what is sent: no
  ``Content-Encoding``, no stale ``Content-Length``, chunked framing; a buffered (JSON)
  body's ``Content-Length`` is its length.

Every wait is bounded (a read that would hang fails after READ_TIMEOUT).
"""

from __future__ import annotations

import http.client
import socket

import orjson
import pytest
from support import show_logs_on_failure, start_mitmdump, start_replay

from streamfix.recordings import all_recordings

pytestmark = pytest.mark.e2e

READ_TIMEOUT = 20.0
RECS = {r.name: r for r in all_recordings()}
STREAM = "chat-devin-truncated-toolcall"
JSON = "chat-devin-nonstream"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    replay, url = start_replay()
    try:
        mitm, port = start_mitmdump(url, tmp_path_factory.mktemp("conf"))
    except BaseException:
        replay.stop()
        raise
    try:
        yield {"replay": replay, "mitmdump": mitm}, port
    finally:
        mitm.stop()
        replay.stop()


@pytest.fixture
def port(stack, request) -> int:
    show_logs_on_failure(request, stack[0])
    return stack[1]


def request_bytes(name: str, version: str = "HTTP/1.1", extra: dict[str, str] | None = None) -> bytes:
    rec = RECS[name]
    body = rec.request_body
    headers = {"Host": "127.0.0.1", "Content-Type": "application/json", "Content-Length": str(len(body)),
               **(extra or {})}  # fmt: skip
    head = f"POST /rec/{name}{rec.request['path']} {version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode() + b"\r\n" + body


class Response:
    def __init__(self, status: str, headers: dict[str, str], body: bytes, eof_after_message: bool) -> None:
        self.status, self.headers, self.body, self.eof_after_message = status, headers, body, eof_after_message


def exchange(port: int, raw: bytes, close_delimited: bool = False) -> Response:
    """Send ``raw``, read one response. Framing by the response's own headers (chunked or
    Content-Length), or to EOF with ``close_delimited``. Then read once more: True if that
    read saw EOF (the server closed right after the message), False if it timed out."""
    s = socket.create_connection(("127.0.0.1", port), timeout=READ_TIMEOUT)
    with s:
        s.sendall(raw)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            assert chunk, f"EOF before the response head: {buf!r}"
            buf += chunk
        head, rest = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}

        def more() -> bytes:
            chunk = s.recv(65536)
            assert chunk, "EOF inside the response body"
            return chunk

        if close_delimited:
            body = rest
            while chunk := s.recv(65536):
                body += chunk
            return Response(lines[0], headers, body, True)
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body, data = b"", rest
            while True:
                while b"\r\n" not in data:
                    data += more()
                size_line, data = data.split(b"\r\n", 1)
                size = int(size_line.split(b";")[0], 16)
                while len(data) < size + 2:
                    data += more()
                if size == 0:
                    assert data[:2] == b"\r\n", "trailers are not expected here"
                    leftover = data[2:]
                    break
                body, data = body + data[:size], data[size + 2 :]
        else:
            n = int(headers["content-length"])
            body = rest
            while len(body) < n:
                body += more()
            body, leftover = body[:n], body[n:]
        assert leftover == b"", "bytes after the end of the message"
        try:
            eof = s.recv(1) == b""
        except TimeoutError:
            eof = False
        return Response(lines[0], headers, body, eof)


@pytest.mark.parametrize("name", [STREAM, JSON])
def test_connection_close_ends_the_connection_right_after_the_response(port, name):
    r = exchange(port, request_bytes(name, extra={"Connection": "close"}))
    assert r.status.split()[1] == "200"
    assert r.eof_after_message, "the client asked for Connection: close and the sidecar kept the connection open"
    assert r.headers.get("connection", "").lower() != "keep-alive"
    rec = RECS[name]
    if rec.streaming:
        assert r.body == rec.expected  # complete and repaired
    else:
        assert orjson.loads(r.body) == orjson.loads(rec.expected)
        assert int(r.headers["content-length"]) == len(r.body)


def test_keep_alive_client_reuses_its_connection(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=READ_TIMEOUT)
    try:
        bodies = []
        socks = []
        for name in (STREAM, JSON, STREAM):
            rec = RECS[name]
            conn.request("POST", f"/rec/{name}{rec.request['path']}", body=rec.request_body,
                         headers={"Content-Type": "application/json"})  # fmt: skip
            resp = conn.getresponse()
            bodies.append(resp.read())
            assert resp.status == 200 and not resp.will_close
            socks.append(conn.sock)
        assert socks[0] is not None and all(s is socks[0] for s in socks), "the connection was not reused"
        assert bodies[0] == bodies[2] == RECS[STREAM].expected
        assert orjson.loads(bodies[1]) == orjson.loads(RECS[JSON].expected)
    finally:
        conn.close()


@pytest.mark.parametrize("name", [STREAM, JSON])
def test_http10_client_gets_a_complete_body(port, name):
    r = exchange(port, request_bytes(name, version="HTTP/1.0"), close_delimited=True)
    assert r.status.split()[1] == "200"
    assert "chunked" not in r.headers.get("transfer-encoding", "").lower(), "HTTP/1.0 cannot read chunked framing"
    rec = RECS[name]
    if "content-length" in r.headers:
        assert int(r.headers["content-length"]) == len(r.body)
    if rec.streaming:
        assert r.body == rec.expected
    else:
        assert orjson.loads(r.body) == orjson.loads(rec.expected)


def test_decoded_stream_headers_say_what_is_sent(port):
    r = exchange(port, request_bytes(STREAM, extra={"X-Streamfix-Encoding": "gzip", "Accept-Encoding": "gzip"}))
    assert "content-encoding" not in r.headers  # decoded for the repair, sent as identity
    assert "content-length" not in r.headers
    assert r.headers["transfer-encoding"].lower() == "chunked"
    assert r.body == RECS[STREAM].expected


def test_buffered_body_content_length_is_its_length(port):
    r = exchange(port, request_bytes(JSON, extra={"X-Streamfix-Framing": "length"}))
    assert int(r.headers["content-length"]) == len(r.body)
    assert orjson.loads(r.body) == orjson.loads(RECS[JSON].expected)
