"""A stand-in upstream that replays ``recordings/`` with realistic pacing.

    python -m streamfix.replay --port 18317

Which recording answers a request, first match wins:

1. the path prefix ``/rec/<name>/`` (``/rec/responses-devin-toolcall/v1/responses``), so a
   client's base URL can pick one; ``/rec/<name>,<then>/`` answers a request that carries a
   tool result (a Responses ``function_call_output`` input item, a chat ``tool`` message)
   with recording ``<then>`` instead, so an agent loop (Codex: tool call, then a second
   request with the tool's output) can finish;
2. the request header ``X-Streamfix-Recording: <name>``;
3. the request body's ``model`` equal to a recording's name;
4. otherwise the first buggy recording for the path's API (and the request's ``stream``
   flag).

An SSE body is written one event per write with ``pacing.delay_ms`` between events (or in
``bytes:N`` slices), so the stream arrives the way a gateway sends it. Test knobs, as
request headers: ``X-Streamfix-Delay-Ms`` overrides the pause, ``X-Streamfix-Encoding:
gzip`` compresses the body on the fly (sync-flushed per write), ``X-Streamfix-Close: 1``
bursts the whole body and closes the connection at once, ``X-Streamfix-Framing: length``
sends it in one piece with a ``Content-Length`` (a buffering gateway).

Fault knobs (the pressure suite, ``tests/e2e/test_pressure.py``), byte offsets into the
uncompressed body: ``X-Streamfix-Cut: N:close`` sends the first N bytes and closes the
connection without ending the body (no terminal chunk: a gateway that dies cleanly);
``X-Streamfix-Cut: N:reset`` sends them, waits until the proxy has read them, and resets
the connection (TCP RST: a gateway that crashes); ``X-Streamfix-Stall: N:MS`` pauses MS
milliseconds after byte N, then goes on.

WebSocket, as CPA serves it (``GET /v1/responses`` or ``/backend-api/codex/responses``
upgraded; any Responses path): each client ``response.create`` (``response.append``: the
earlier request with new input) picks a recording by its ``metadata.streamfix_recording``
(per turn, keeping the recording's own ``model``) or as above (the path prefix, the
handshake's ``X-Streamfix-Recording``, its ``model``), and gets each SSE ``data:`` JSON
of it as one text message (``event:`` lines, comments and ``[DONE]`` dropped), paced
like SSE; many turns per socket; a ``generate: false`` request is a prewarm answered
with ``response.created`` and ``response.completed``. A line ``websocket turn N ...`` is
printed per turn. Knobs, as handshake headers: ``X-Streamfix-Delay-Ms``,
``X-Streamfix-Ws-Fragment: N`` (each message in N-byte continuation frames),
``X-Streamfix-Ws-Coalesce: 1`` (all of a turn's frames in one write),
``X-Streamfix-Ws-Close-After: K`` (after K messages of a turn, drop the connection
without a close frame, as CPA does when a turn ends without ``response.completed``).

``GET /`` lists the recordings. Listens on 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

from aiohttp import WSMsgType, web
from wsproto.frame_protocol import FrameProtocol

from streamfix.wire.apis import api_for_path
from streamfix.wire.sse import SseParser

from .aioserve import serve_forever, start_app
from .cli import prog
from .recordings import ROOT, Recording, all_recordings


def sse_pieces(body: bytes, chunk: str) -> list[bytes]:
    """How the body is cut into writes: per event, or every N bytes."""
    if chunk.startswith("bytes:"):
        n = max(1, int(chunk[6:]))
        return [body[i : i + n] for i in range(0, len(body), n)]
    p = SseParser()
    return [e.raw for e in p.feed(body) + p.close()]


def fault_pieces(pieces: list[bytes], at: int) -> tuple[list[bytes], list[bytes]]:
    """``pieces`` split at byte offset ``at``: (the writes before it, the writes after it);
    the write that spans the offset is cut in two."""
    before: list[bytes] = []
    n = 0
    for i, piece in enumerate(pieces):
        if n + len(piece) > at:
            head, tail = piece[: at - n], piece[at - n :]
            return before + ([head] if head else []), [tail, *pieces[i + 1 :]]
        before.append(piece)
        n += len(piece)
    return before, []


def _fault(value: str | None) -> tuple[int, str] | None:
    """``N:WORD`` from a fault header, or None."""
    if not value:
        return None
    n, _, word = value.partition(":")
    return int(n), word


async def _reset(request: web.Request) -> None:
    """Once the proxy has read what was written, end the connection with a TCP reset."""
    transport = request.transport
    if transport is None:
        return
    while transport.get_write_buffer_size():
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)  # the peer reads before the RST (which discards unread data)
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def _has_tool_result(body: dict | None) -> bool:
    """Does the request carry a tool's output (the agent loop's second request)?"""
    body = body or {}
    items = body.get("input")
    if isinstance(items, list) and any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items):
        return True
    msgs = body.get("messages")
    return isinstance(msgs, list) and any(isinstance(m, dict) and m.get("role") == "tool" for m in msgs)


class Replay:
    def __init__(self, root: Path = ROOT) -> None:
        self.recordings = {r.name: r for r in all_recordings(root)}

    def pick(self, path: str, headers, body: dict | None) -> tuple[Recording | None, str]:
        if path.startswith("/rec/"):
            name, _, rest = path[5:].partition("/")
            name, _, then = name.partition(",")
            if then and _has_tool_result(body):
                name = then
            return self.recordings.get(name), "/" + rest
        name = headers.get("x-streamfix-recording")
        if name:
            return self.recordings.get(name), path
        model = (body or {}).get("model")
        if isinstance(model, str) and model in self.recordings:
            return self.recordings[model], path
        api = api_for_path(path)
        want_stream = bool((body or {}).get("stream")) or ":streamGenerateContent" in path
        for kinds in (("buggy",), ("buggy", "clean")):
            for r in self.recordings.values():
                if r.api == api and r.kind in kinds and r.streaming == want_stream:
                    return r, path
        return None, path

    async def index(self, request: web.Request) -> web.Response:
        lines = [f"{r.name:40} {r.api:10} {r.kind:6} {r.request['path']}" for r in self.recordings.values()]
        return web.Response(text="streamfix replay upstream; recordings:\n" + "\n".join(lines) + "\n")

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if (
            request.method == "GET"
            and request.headers.get("upgrade", "").lower() == "websocket"
            and api_for_path(request.path) == "responses"
        ):
            return await self.websocket(request)
        raw = await request.read()
        if "x-streamfix-run" in request.headers:  # a client test proves which transport ran
            print(f"http request on {request.path} run={request.headers['x-streamfix-run']}", flush=True)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        rec, _ = self.pick(request.path_qs, request.headers, body if isinstance(body, dict) else None)
        if rec is None:
            return web.json_response({"error": {"message": f"no recording for {request.path}"}}, status=404)
        headers = {k: v for k, v in rec.headers.items() if k.lower() not in ("content-length", "transfer-encoding")}
        headers["x-streamfix-recording"] = rec.name
        if not rec.streaming or request.headers.get("x-streamfix-framing") == "length":
            return web.Response(status=rec.status, body=rec.body, headers=headers)

        delay = float(request.headers.get("x-streamfix-delay-ms", rec.delay * 1000)) / 1000
        gz = request.headers.get("x-streamfix-encoding", "") == "gzip"
        close = request.headers.get("x-streamfix-close") == "1"
        if gz:
            headers["content-encoding"] = "gzip"
        resp = web.StreamResponse(status=rec.status, headers=headers)
        if close:
            resp.force_close()
        await resp.prepare(request)
        z = zlib.compressobj(wbits=16 + zlib.MAX_WBITS) if gz else None
        pieces = sse_pieces(rec.body, rec.meta.get("pacing", {}).get("chunk", "event"))
        cut = _fault(request.headers.get("x-streamfix-cut"))
        stall = _fault(request.headers.get("x-streamfix-stall"))
        if cut is not None:
            pieces = fault_pieces(pieces, cut[0])[0]
        stall_at = -1
        if stall is not None:
            before, after = fault_pieces(pieces, stall[0])
            pieces, stall_at = before + after, len(before)
        try:
            for i, piece in enumerate(pieces):
                if i == stall_at:
                    await asyncio.sleep(int(stall[1]) / 1000)  # type: ignore[index]
                elif i and delay and not close:
                    await asyncio.sleep(delay)
                data = z.compress(piece) + z.flush(zlib.Z_SYNC_FLUSH) if z else piece
                if data:
                    await resp.write(data)
            if cut is not None:
                if z:
                    await resp.write(z.flush(zlib.Z_SYNC_FLUSH))
                if cut[1] == "reset":
                    await _reset(request)
                elif request.transport is not None:
                    request.transport.close()  # FIN after what was written; no terminal chunk
                return resp
            if z:
                await resp.write(z.flush())
            await resp.write_eof()
            return resp
        except ConnectionResetError:  # the client went away (aiohttp's ClientConnectionResetError too)
            print(f"replay: {rec.name}: the client closed the connection; stream not finished", flush=True)
            return resp

    async def websocket(self, request: web.Request) -> web.WebSocketResponse:
        """Responses over WebSocket: one text message per event, many turns per socket."""
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        h = request.headers
        delay_hdr = h.get("x-streamfix-delay-ms")
        fragment = int(h.get("x-streamfix-ws-fragment", "0"))
        coalesce = h.get("x-streamfix-ws-coalesce") == "1"
        close_after = int(h.get("x-streamfix-ws-close-after", "0"))
        run = f" run={h['x-streamfix-run']}" if "x-streamfix-run" in h else ""
        last: dict = {}
        turn = 0
        async for msg in ws:
            if msg.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
                continue
            try:
                req = json.loads(msg.data)
            except ValueError:
                req = None
            typ = req.get("type") if isinstance(req, dict) else None
            if typ not in ("response.create", "response.append"):
                await ws.send_str(_ws_error(400, f"unsupported websocket request type: {typ}"))
                continue
            body = {**last, "input": req.get("input")} if typ == "response.append" else dict(req)
            body.pop("type", None)
            last = body
            turn += 1
            if body.get("generate") is False:
                print(f"websocket turn {turn} on {request.path}: prewarm{run}", flush=True)
                for m in _prewarm(body):
                    await ws.send_str(m)
                continue
            meta = body.get("metadata")
            name = meta.get("streamfix_recording") if isinstance(meta, dict) else None
            rec: Recording | None
            if isinstance(name, str) and name in self.recordings:
                rec = self.recordings[name]
            else:
                rec, _ = self.pick(request.path_qs, h, {**body, "stream": True})
            if rec is None or not rec.streaming:
                await ws.send_str(_ws_error(404, f"no streaming recording for {request.path}"))
                continue
            messages = ws_messages(rec.body)
            print(
                f"websocket turn {turn} on {request.path}: recording {rec.name} ({len(messages)} messages){run}",
                flush=True,
            )
            delay = float(delay_hdr if delay_hdr is not None else rec.delay * 1000) / 1000
            if close_after:
                messages = messages[:close_after]
            if fragment or coalesce:
                frames = FrameProtocol(client=False, extensions=[])
                writes = [_frames(frames, m, fragment) for m in messages]
                if coalesce:
                    writes = [b"".join(writes)]
                for i, w in enumerate(writes):
                    if i and delay:
                        await asyncio.sleep(delay)
                    transport = request.transport
                    assert transport is not None  # (a handler runs on an open connection)
                    transport.write(w)
            else:
                for i, data in enumerate(messages):
                    if i and delay:
                        await asyncio.sleep(delay)
                    await ws.send_str(data.decode())
            if close_after:
                print(f"websocket turn {turn}: connection dropped after {close_after} messages", flush=True)
                transport = request.transport
                assert transport is not None
                transport.abort()
                break
        return ws

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/", self.index)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app


def ws_messages(body: bytes) -> list[bytes]:
    """An SSE body as CPA's WebSocket sends it: each event's JSON ``data`` as one message."""
    p = SseParser()
    out = []
    for ev in p.feed(body) + p.close():
        data = ev.data
        if data is None or data.strip() == b"[DONE]":
            continue
        try:
            json.loads(data)
        except ValueError:
            continue
        out.append(data)
    return out


def _frames(fp: FrameProtocol, message: bytes, size: int) -> bytes:
    """One text message as frames of ``size`` bytes (one frame if 0)."""
    if not size or len(message) <= size:
        return bytes(fp.send_data(message.decode(), fin=True))
    # split on UTF-8 boundaries: a text frame carries whole characters here
    text = message.decode()
    parts: list[str] = []
    cur: list[str] = []
    n = 0
    for ch in text:
        w = len(ch.encode())
        if n + w > size and cur:
            parts.append("".join(cur))
            cur, n = [], 0
        cur.append(ch)
        n += w
    parts.append("".join(cur))
    return b"".join(bytes(fp.send_data(p, fin=i == len(parts) - 1)) for i, p in enumerate(parts))


def _ws_error(status: int, message: str) -> str:
    return json.dumps(
        {"type": "error", "status": status, "error": {"type": "invalid_request_error", "message": message}}
    )


def _prewarm(body: dict) -> list[str]:
    """CPA's local answer to a ``generate: false`` request."""
    resp: dict[str, Any] = {
        "id": "resp_prewarm",
        "object": "response",
        "created_at": 0,
        "status": "in_progress",
        "model": body.get("model"),
        "output": [],
    }
    done = {**resp, "status": "completed", "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}}
    return [
        json.dumps({"type": "response.created", "sequence_number": 0, "response": resp}),
        json.dumps({"type": "response.completed", "sequence_number": 1, "response": done}),
    ]


async def serve(host: str, port: int, root: Path = ROOT) -> tuple[web.AppRunner, int]:
    return await start_app(Replay(root).app(), host, port)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=prog("replay"), description="Replay recordings/ as a paced upstream.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=18317, help="0 picks a free port")
    ap.add_argument("--recordings", type=Path, default=ROOT)
    a = ap.parse_args(argv)

    return serve_forever(
        lambda: serve(a.host, a.port, a.recordings),
        f"streamfix replay upstream listening on http://{a.host}:{{port}}",
    )


if __name__ == "__main__":
    sys.exit(main())
