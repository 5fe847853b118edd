"""A gateway that does not answer: the client gets an HTTP 502 in its own API's error
shape, with the reason, and the turn log its ``upstream_error`` line.

mitmproxy itself answers a failed upstream connection with an HTML page (with
``connection_strategy=lazy``) or, with its default ``eager`` strategy in reverse mode, by
closing the client connection without a reply (``Empty reply from server``; the
connection is opened when the client connects, before any HTTP flow exists, so no addon
hook sees it). Neither is something an OpenAI, Anthropic or Gemini client reports as
what it is. With ``lazy`` (the sidecar launcher sets it), before the first request of a
client connection goes upstream this addon opens a TCP connection to the gateway and
closes it again; when that fails, it answers the request itself::

    responses, chat  {"error": {"message": ..., "type": "server_error", "code": "gateway_unreachable", "param": null}}
    messages         {"type": "error", "error": {"type": "api_error", "message": ...}}
    gemini           {"error": {"code": 502, "message": ..., "status": "UNAVAILABLE"}}

and sets the flow's error to the reason (mitmweb, the turn log). A reused client
connection (keep-alive) already has its gateway connection and is not checked again.

An ``https://`` gateway is also asked for a TLS handshake in that check: one that answers
in plain HTTP (CPA serves plain HTTP unless its ``tls`` is on) would give the client
mitmproxy's HTML error page; it gets the same JSON 502, saying which scheme to use.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import weakref

import orjson
from mitmproxy import connection, ctx, http
from mitmproxy import flow as mflow
from mitmproxy.proxy import mode_specs
from streamfix.wire.apis import api_for_path

logger = logging.getLogger("streamfix")

CONNECT_TIMEOUT = 10.0
"""Seconds the check waits for the gateway to accept a connection."""


def error_body(api: str, message: str, code: str = "gateway_unreachable") -> bytes:
    """An HTTP error body in ``api``'s own shape (``code``: the OpenAI shape's error code)."""
    if api == "messages":
        return orjson.dumps({"type": "error", "error": {"type": "api_error", "message": message}})
    if api == "gemini":
        return orjson.dumps({"error": {"code": 502, "message": message, "status": "UNAVAILABLE"}})
    return orjson.dumps({"error": {"message": message, "type": "server_error", "code": code, "param": None}})


def _close_writer(connect: asyncio.Future) -> None:
    """The done callback of an abandoned check: close the connection had it been made."""
    if not connect.cancelled() and connect.exception() is None:
        connect.result()[1].close()


def plain_http(err: ssl.SSLError) -> bool:
    """Does this handshake failure mean the other side answered in plain HTTP?"""
    text = str(err)
    return any(s in text for s in ("WRONG_VERSION_NUMBER", "record layer failure", "packet length", "HTTP_REQUEST"))


_NO_VERIFY = ssl.create_default_context()
_NO_VERIFY.check_hostname, _NO_VERIFY.verify_mode = False, ssl.CERT_NONE  # only: does it speak TLS at all?


class Gateway:
    def __init__(self) -> None:
        self._gone: weakref.WeakKeyDictionary[connection.Client, asyncio.Future] = weakref.WeakKeyDictionary()
        """Client connections with a check in progress -> a future set when the client goes."""

    def running(self) -> None:
        modes = [m for m in ctx.options.mode if m.startswith("reverse")]
        if modes and ctx.options.connection_strategy == "eager":
            logger.warning(
                "streamfix: connection_strategy=eager: when the gateway does not answer, clients get a "
                "connection closed without a reply; --set connection_strategy=lazy gives them an HTTP 502 "
                "in their API's error shape (scripts/sidecar sets it)"
            )

    async def request(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or flow.error is not None or not ctx.options.streamfix:
            return
        if ctx.options.connection_strategy != "lazy" or flow.server_conn.connected or flow.server_conn.via:
            return
        mode = flow.client_conn.proxy_mode
        if not isinstance(mode, mode_specs.ReverseMode):
            return
        api = api_for_path(flow.request.path)
        if api is None:
            return
        host, port = flow.request.host, flow.request.port
        tls = flow.request.scheme == "https"
        connect = asyncio.ensure_future(
            asyncio.wait_for(asyncio.open_connection(host, port, ssl=_NO_VERIFY if tls else None), CONNECT_TIMEOUT)
        )
        if not await self._client_stays(flow, connect):
            return  # the client went away meanwhile: nobody to answer, and its flow is not held
        try:
            _, writer = connect.result()
        except ssl.SSLError as e:
            if plain_http(e):
                fix = mode.data.replace("https://", "http://", 1)
                self.refuse(
                    flow,
                    api,
                    f"streamfix: the gateway at {mode.data} speaks plain HTTP, not TLS: start the sidecar with "
                    f"--upstream {fix}",
                    code="gateway_tls_mismatch",
                )
            return  # another TLS failure: mitmproxy's own connection says it
        except (TimeoutError, OSError) as e:
            if isinstance(e, OSError):
                why = os.strerror(e.errno) if e.errno else (e.strerror or str(e) or type(e).__name__)
            else:
                why = f"no answer in {CONNECT_TIMEOUT:g} s"
            self.refuse(flow, api, f"streamfix: the gateway at {mode.data} does not answer ({why})")
            return
        writer.close()

    async def _client_stays(self, flow: http.HTTPFlow, connect: asyncio.Future) -> bool:
        """Wait for the check; False (the check abandoned) when the client disconnects first.

        mitmproxy does not cancel an addon's pending hook when its client goes: without
        this, a gateway slow to accept (a full accept queue, SYN retries) kept every aborted
        client's flow, connection handler and layers alive for up to CONNECT_TIMEOUT, and
        under a run of client aborts hundreds piled up (tests/e2e/test_operator_abort_memory.py)."""
        client = flow.client_conn
        if client.timestamp_end is not None:
            connect.cancel()
            connect.add_done_callback(_close_writer)
            return False
        gone = self._gone.get(client)
        if gone is None:
            gone = self._gone[client] = asyncio.get_running_loop().create_future()
        await asyncio.wait((connect, gone), return_when=asyncio.FIRST_COMPLETED)
        if connect.done():
            return True
        connect.cancel()
        connect.add_done_callback(_close_writer)  # had it just connected, the socket is closed
        return False

    def client_disconnected(self, client: connection.Client) -> None:
        gone = self._gone.pop(client, None)
        if gone is not None and not gone.done():
            gone.set_result(None)

    @staticmethod
    def refuse(flow: http.HTTPFlow, api: str, message: str, code: str = "gateway_unreachable") -> None:
        flow.response = http.Response.make(502, error_body(api, message, code), {"content-type": "application/json"})
        flow.error = mflow.Error(message)
        logger.warning(f"{message}; {flow.request.method} {flow.request.path.split('?', 1)[0]} answered 502")
