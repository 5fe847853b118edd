"""streamfix: graceful drain on SIGTERM.

mitmproxy's own SIGTERM handler (``mitmproxy/tools/main.py``: ``loop.add_signal_handler``
calling ``master.shutdown``) ends the process at once and cuts every stream in flight;
for a coding agent that is minutes of lost work per turn. This addon replaces that
handler once mitmproxy runs (``running``: the same ``loop.add_signal_handler``), and on
the first SIGTERM:

1. stops the client-facing listeners (``ServerInstance.stop()`` of mitmproxy's
   ``proxyserver``: the listening socket closes, so a new connection is refused, while
   the connections already open go on). In the two-listener topology
   (docs/upstream-leg.md) the regular listener that carries CPA's own upstream calls stays
   open until the end: the turns in flight still need it;
2. answers a new request on a connection that was already open with 503 and
   ``Connection: close`` (``Retry-After: 1``), and a new turn on an open WebSocket by
   closing that socket (the message is not forwarded; Codex reconnects), so no new work
   starts;
3. waits until every client request in flight is over (streamed or not) and no WebSocket
   has a turn in progress (asked of ``addons/websocket.py``'s per-socket state; a socket it
   does not repair counts as busy until it was quiet for 5 s), at most
   ``streamfix_drain_timeout`` seconds; their turn-log lines are written as they end;
4. calls ``master.shutdown()``: mitmproxy's ``done`` hooks run (the turn log is closed, a
   ``-w`` file flushed) and the process exits.

A second SIGTERM (or SIGINT, mitmproxy's own handler) exits at once.
``streamfix_drain_timeout=0`` restores mitmproxy's behaviour.

Cost: per client flow, a set insert and a removal; nothing per event. The hooks of step 2
exist only while draining (:attr:`Drain.addons`).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from typing import Any

import orjson
from mitmproxy import ctx, http
from mitmproxy.proxy import mode_specs

from . import shared
from .buffered import json_object
from .turn import REFUSED, Turn
from .turnlog import client_label

logger = logging.getLogger("streamfix.drain")

QUIET_S = 5.0
"""A WebSocket that streamfix does not repair counts as idle after this long without a message."""
TURN_STARTS = ("response.create", "response.append")
WS_REFUSED = "a new WebSocket turn while the sidecar drains (SIGTERM): not forwarded, the socket closed (1001); the gateway was not asked"


def check_timeout(seconds: int) -> None:
    if seconds < 0:
        from mitmproxy import exceptions

        raise exceptions.OptionsError(
            f"streamfix_drain_timeout={seconds}: give the seconds to wait, 0 or more "
            "(default 300; 0 exits at once, cutting the streams in flight)"
        )


CHECKS = {"streamfix_drain_timeout": check_timeout}
"""This addon's value checks (addons/options.py runs them before anything listens)."""


def _quiet_cancellations() -> None:
    """At exit, the connections still open (CPA's idle keep-alive connection to the
    upstream listener, a client's) have their handler tasks cancelled once mitmproxy's run
    is over; CPython 3.12.1's ``asyncio.streams`` then reports each as ``Exception in
    callback ... CancelledError`` with a traceback (its done callback asks a cancelled task
    for its exception; later versions check first). A cancelled task is no error: a filter
    on the ``asyncio`` logger, where the loop's default handler writes, drops those
    records. mitmproxy's own handler is gone by then, so a loop exception handler installed
    now would be too."""
    log = logging.getLogger("asyncio")
    if not any(isinstance(f, _DropCancelled) for f in log.filters):
        log.addFilter(_DropCancelled())


class _DropCancelled(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, asyncio.CancelledError)


class Drain:
    """See the module docstring."""

    def __init__(self) -> None:
        self.addons: list[Any] = []
        self.draining = False
        self.flows: dict[str, http.HTTPFlow] = {}
        """Client flows in flight (request seen, response not over), and open client WebSockets."""
        self.reverse_only = False
        self.refused = 0
        self._task: asyncio.Task | None = None
        self._installed = False

    def load(self, loader) -> None:
        _quiet_cancellations()
        loader.add_option(
            "streamfix_drain_timeout",
            int,
            300,
            """On SIGTERM, stop accepting connections and let the streams in flight finish
            for at most this many seconds before exiting (a second SIGTERM exits at once).
            0: exit at once, cutting them (mitmproxy's own behaviour).""",
        )

    def configure(self, updated: set[str]) -> None:
        if "mode" in updated:
            self.reverse_only = any(m.startswith("reverse") for m in ctx.options.mode)
        if "streamfix_drain_timeout" in updated:
            check_timeout(ctx.options.streamfix_drain_timeout)

    def running(self) -> None:
        if self._installed:
            return
        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self.sigterm)
            self._installed = True
        except (NotImplementedError, RuntimeError, ValueError) as e:  # not the main thread, Windows
            logger.info(f"streamfix: no graceful drain on SIGTERM here ({type(e).__name__}); mitmproxy's handler stays")

    def done(self) -> None:
        if self._installed:
            try:
                asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)
            except (RuntimeError, ValueError):
                pass
            self._installed = False

    # --- the client flows in flight (always on: per flow, not per event) ----------
    def _client(self, flow: http.HTTPFlow) -> bool:
        return not self.reverse_only or isinstance(flow.client_conn.proxy_mode, mode_specs.ReverseMode)

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if self._client(flow):
            self.flows[flow.id] = flow

    def response(self, flow: http.HTTPFlow) -> None:
        if flow.websocket is None:
            self.flows.pop(flow.id, None)

    def error(self, flow: http.HTTPFlow) -> None:
        if flow.websocket is None or not flow.live:
            self.flows.pop(flow.id, None)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        self.flows.pop(flow.id, None)

    # --- draining ---------------------------------------------------------------
    def sigterm(self) -> None:
        timeout = ctx.options.streamfix_drain_timeout
        if self.draining or timeout <= 0:
            if self.draining:
                busy = self.busy()
                logger.warning(f"streamfix: second SIGTERM: exiting now ({len(busy)} stream(s) in flight cut)")
            ctx.master.shutdown()
            return
        self.draining = True
        self.addons = [DrainGate(self)]
        self._task = asyncio.get_running_loop().create_task(self.drain(timeout))

    def busy(self) -> list[http.HTTPFlow]:
        """The client flows that still carry work: requests in flight, WebSockets mid-turn."""
        out = []
        wsr = ctx.master.addons.get("websocketrepair")
        sockets = getattr(wsr, "sockets", {})
        now = time.time()
        for f in list(self.flows.values()):
            if f.websocket is None:
                out.append(f)
                continue
            if f.websocket.timestamp_end is not None:
                continue
            s = sockets.get(f.id)
            if s is not None:
                try:
                    mid_turn = bool(s.pending or s.outbox or (s.turn is not None and not s.turn.finished))
                except AttributeError:  # addons/websocket.py changed shape: fall back to quiet time
                    s = None
                else:
                    if mid_turn:
                        out.append(f)
            if s is None:
                # no message yet: quiet since the handshake (WebSocketData has no start time)
                opened = f.response.timestamp_end if f.response is not None else None
                last = f.websocket.messages[-1].timestamp if f.websocket.messages else opened
                if last is None or now - last < QUIET_S:
                    out.append(f)
        return out

    async def drain(self, timeout: float) -> None:
        start = time.monotonic()
        stopped = []
        try:
            ps = ctx.master.addons.get("proxyserver")
            instances = list(ps.servers) if ps is not None else []
            client_facing = [
                i for i in instances
                if not self.reverse_only or isinstance(i.mode, mode_specs.ReverseMode)
            ]  # fmt: skip
            for inst in client_facing:
                addrs = ", ".join(f"{a[0]}:{a[1]}" for a in inst.listen_addrs)
                await inst.stop()
                stopped.append(addrs or inst.mode.description)
        except Exception:
            logger.exception("streamfix: stopping the listeners failed; draining anyway")
        n = len(self.busy())
        logger.info(
            f"streamfix: SIGTERM: draining: no new connections on {', '.join(stopped) or 'no listener'}; "
            f"waiting for {n} stream(s) in flight, at most {timeout:g} s (SIGTERM again exits at once)"
        )
        left: list[http.HTTPFlow] = []
        try:
            while True:
                left = self.busy()
                if not left or time.monotonic() - start >= timeout:
                    break
                await asyncio.sleep(0.1)
        except Exception:  # never hang on the way out
            logger.exception("streamfix: watching the streams in flight failed; exiting now")
            ctx.master.shutdown()
            return
        took = time.monotonic() - start
        if left:
            logger.warning(
                f"streamfix: drain timeout after {took:.1f} s: {len(left)} stream(s) still in flight are cut "
                f"({', '.join(_where(f) for f in left[:5])}{', ...' if len(left) > 5 else ''})"
            )
        else:
            logger.info(f"streamfix: drained in {took:.1f} s: every stream in flight finished; exiting")
        if self.refused:
            logger.info(f"streamfix: {self.refused} new request(s) refused while draining")
        ctx.master.shutdown()


class DrainGate:
    """While draining: no new work on connections that were already open."""

    def __init__(self, drain: Drain) -> None:
        self.drain = drain

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or not self.drain._client(flow):
            return
        self.drain.refused += 1
        flow.metadata[REFUSED] = "draining"
        headers = {"content-type": "application/json", "retry-after": "1"}
        if flow.request.http_version.startswith("HTTP/1"):
            headers["connection"] = "close"  # HTTP/2 forbids the header (mitmproxy closes h2 at exit)
        flow.response = http.Response.make(
            503,
            orjson.dumps({"error": {"message": "streamfix is shutting down (draining); retry", "type": "unavailable"}}),
            headers,
        )
        logger.info(f"streamfix: {_where(flow)}: refused with 503 (draining)")

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        ws = flow.websocket
        if ws is None or not ws.messages or not self.drain._client(flow):
            return
        msg = ws.messages[-1]
        if not msg.from_client or msg.injected or not msg.is_text:
            return
        try:
            kind = orjson.loads(msg.content).get("type")
        except (orjson.JSONDecodeError, AttributeError):
            return
        if kind not in TURN_STARTS:
            return
        wsr = ctx.master.addons.get("websocketrepair")
        sock = getattr(wsr, "sockets", {}).get(flow.id)
        turn = getattr(sock, "turn", None)
        if turn is not None and not getattr(turn, "finished", True):
            return  # a turn still streams on this socket: closing it would cut that one
        msg.drop()
        self.drain.refused += 1
        logger.info(f"streamfix: {_where(flow)}: a new WebSocket turn while draining: not forwarded, socket closed")
        if shared.has_turn_sinks():  # the turn log and the metrics count it, as a refused HTTP request
            try:
                shared.turn_finished(refused_websocket_turn(flow, msg.content).record())
            except Exception:
                logger.exception(f"streamfix: {_where(flow)}: building the refused WebSocket turn's record failed")
        asyncio.get_running_loop().call_soon(close_websocket, flow)


def refused_websocket_turn(flow: http.HTTPFlow, message: bytes) -> Turn:
    """The turn of a WebSocket ``response.create`` refused while draining: ``ended:
    draining``, the model it asked for, nothing sent (the turn log, the metrics)."""
    model = (json_object(message) or {}).get("model")
    now = time.time()
    path = flow.request.path
    return Turn(flow_id=flow.id, api="responses", transport="websocket", path=path,
                key=client_label(flow.request.headers.get, path), model=model if isinstance(model, str) else None,
                started=now, ended_at=now, ended="draining", error=WS_REFUSED,
                status=flow.response.status_code if flow.response is not None else None)  # fmt: skip


def close_websocket(flow: http.HTTPFlow, code: int = 1001, reason: bytes = b"streamfix is shutting down") -> None:
    """Close a client WebSocket between turns: a close frame ``code`` (1001: going away)
    written to the client, then its connection closed through mitmproxy's connection
    handler (the WebSocket layer then ends the flow and closes the gateway's side).
    mitmproxy has no API to send a close frame; ``flow.kill()`` does not end a WebSocket."""
    try:
        ps = ctx.master.addons.get("proxyserver")
        handler = ps.connections[flow.client_conn.id]
        writer = handler.transports[handler.client].writer
        payload = code.to_bytes(2, "big") + reason[:100]
        if not writer.is_closing():
            writer.write(bytes([0x88, len(payload)]) + payload)  # FIN + close opcode, unmasked (server)
        handler.close_connection(handler.client)
    except Exception as e:  # noqa: BLE001 - a connection gone meanwhile, another mitmproxy layout
        logger.info(f"streamfix: closing a WebSocket while draining failed ({type(e).__name__}: {e}); killing it")
        flow.kill()


def _where(flow: http.HTTPFlow) -> str:
    return f"{flow.request.method} {flow.request.path.split('?', 1)[0]}"
