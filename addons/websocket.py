"""streamfix: Responses over WebSocket (Codex's transport), repaired like SSE.

A Responses WebSocket (``GET /v1/responses`` upgraded, as CPA serves it) carries one
Responses event per server text message: CPA writes each SSE ``data:`` JSON as a message
and drops ``event:`` lines, comments and ``[DONE]``. Each such message is wrapped as one
SSE event (``data: <text>``), fed to the same :class:`wire.stream.StreamRepair` over the
same :class:`wire.responses.ResponsesRepairer` the SSE path uses, and every event that
comes out becomes one message again: an unchanged event leaves the message as it came,
a rewritten one replaces its text, a dropped one drops it, inserted ones are injected.

Turns: each client ``response.create`` (or ``response.append``) is one request; the
server messages after it, up to and including its terminal event, are one turn with its
own :class:`~wire.rules.FlowContext`, :class:`~wire.verdict.Verdict` (from that message:
model, ``max_output_tokens``, tools), repairer, upstream correlation and receipt.

Ordering: ``inject.websocket`` schedules each injected message as a task of its own, and
it comes back through ``websocket_message`` (``injected=True``) only after the message
being handled went out, possibly after later upstream messages were handled. So once a
message needs more than one output, the socket switches to an ordered outbox: every later
upstream message is dropped and its outputs appended to the outbox, one injected message
per output; each injected message that comes back takes the outbox's head as its text,
whatever order the injections arrive in. When the outbox is empty, messages are changed
in place again. See docs/websocket.md.

Fail open: a repairer error turns the rest of that socket into passthrough (still through
the outbox while it holds messages): no message is lost or duplicated, the connection
stays up, one line is logged.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

import orjson
from mitmproxy import ctx, exceptions, http

from addons import shared
from wire.apis import api_for_path
from wire.responses import ResponsesRepairer
from wire.rules import FlowContext
from wire.sse import SseParser
from wire.stream import StreamRepair
from wire.verdict import Verdict

logger = logging.getLogger("streamfix")

WEBSOCKET_CHOICES = ("repair", "refuse", "pass")
TURN_STARTS = frozenset({"response.create", "response.append"})


class Turn:
    """One response on the socket: its request facts, repairer and receipt state."""

    __slots__ = ("key", "n", "orphan", "repair", "reported", "verdict")

    def __init__(self, n: int, key: str, verdict: Verdict, repair: StreamRepair, orphan: bool) -> None:
        self.n = n
        self.key = key
        self.verdict = verdict
        self.repair = repair
        self.orphan = orphan
        """Started by server messages no client request announced."""
        self.reported = False

    @property
    def finished(self) -> bool:
        return self.reported or getattr(self.repair.repairer, "finished", False)


class Socket:
    """Per-WebSocket state: requests not yet answered, the current turn, the outbox."""

    __slots__ = ("failed", "last_request", "outbox", "pending", "turn", "turns")

    def __init__(self) -> None:
        self.pending: deque[dict[str, Any]] = deque()
        self.turn: Turn | None = None
        self.turns = 0
        self.outbox: deque[bytes] = deque()
        """Outputs waiting for their injected message, in order (ordered mode when non-empty)."""
        self.last_request: dict[str, Any] | None = None
        self.failed = False


class WebSocketRepair:
    """Repairs Responses events on WebSockets with the client leg's rules.

    ``repair`` is the :class:`addons.repair.Repair` instance whose rules, evidence sources
    and client-leg test apply (its options configure both).
    """

    def __init__(self, repair) -> None:
        self.repair = repair
        self.sockets: dict[str, Socket] = {}
        self.repaired = 0
        self.failed = 0

    def load(self, loader) -> None:
        loader.add_option(
            "streamfix_websocket",
            str,
            "repair",
            """Responses over WebSocket (Codex with supports_websockets or OPENAI_BASE_URL):
            'repair' repairs each server message with the SSE rules, one turn per
            response.create; 'refuse' answers the upgrade on a Responses path with HTTP 426,
            so that Codex falls back to HTTPS streaming at once (repaired as SSE); 'pass'
            leaves WebSockets untouched. streamfix_truncation applies per turn as on SSE:
            with 'incomplete' a truncated turn ends in response.incomplete, which Codex
            treats as a failed turn and retries (as over HTTP); 'completed' keeps
            response.completed.""",
            choices=list(WEBSOCKET_CHOICES),
        )

    def configure(self, updated: set[str]) -> None:
        if "streamfix_websocket" in updated and ctx.options.streamfix_websocket not in WEBSOCKET_CHOICES:
            raise exceptions.OptionsError(
                f"streamfix_websocket must be one of {', '.join(WEBSOCKET_CHOICES)}, "
                f"not {ctx.options.streamfix_websocket!r}"
            )

    # --- hooks -------------------------------------------------------------------
    def request(self, flow: http.HTTPFlow) -> None:
        if ctx.options.streamfix_websocket != "refuse" or not self._ours(flow):
            return
        if flow.request.headers.get("upgrade", "").lower() != "websocket":
            return
        flow.response = http.Response.make(
            426,
            orjson.dumps(
                {
                    "error": {
                        "message": "streamfix: WebSocket refused (streamfix_websocket=refuse); use HTTP streaming",
                        "type": "upgrade_required",
                    }
                }
            ),
            {"content-type": "application/json"},
        )
        logger.info(f"streamfix: GET {_path(flow)}: WebSocket upgrade refused with 426 (streamfix_websocket=refuse)")

    def websocket_start(self, flow: http.HTTPFlow) -> None:
        if ctx.options.streamfix_websocket == "repair" and self._ours(flow):
            self.sockets[flow.id] = Socket()

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        s = self.sockets.get(flow.id)
        if s is None or flow.websocket is None:
            return
        msg = flow.websocket.messages[-1]
        if msg.from_client:
            if not msg.injected:
                self._client_message(flow, s, msg.content)
            return
        if msg.injected:
            # one of ours: it takes the outbox's head (see the module docstring)
            if s.outbox:
                msg.content = s.outbox.popleft()
            return
        if not msg.is_text:
            outputs = [msg.content]  # binary: untouched, but in order
        else:
            outputs = self._repair_message(flow, s, msg.content)
        self._route(flow, s, msg, outputs)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        s = self.sockets.pop(flow.id, None)
        if s is None:
            return
        if s.turn is not None and not s.turn.reported:
            s.turn.repair.close()  # the driver fails open by itself (error kept, never raised)
            self._report(flow, s, s.turn)
        if s.outbox:
            logger.warning(
                f"streamfix: GET {_path(flow)}: the WebSocket closed with {len(s.outbox)} repaired message(s) "
                f"not yet delivered (the close overtook them)"
            )

    def done(self) -> None:
        if self.repaired or self.failed:
            logger.info(
                f"streamfix: {self.repaired} WebSocket turns repaired, "
                f"{self.failed} passed through after a repairer error"
            )

    # --- helpers -----------------------------------------------------------------
    def _ours(self, flow: http.HTTPFlow) -> bool:
        return (
            ctx.options.streamfix and api_for_path(flow.request.path) == "responses" and self.repair._client_leg(flow)
        )

    def _client_message(self, flow: http.HTTPFlow, s: Socket, content: bytes) -> None:
        """A request on the socket: remember its facts for the turn it starts."""
        try:
            body = orjson.loads(content)
        except orjson.JSONDecodeError:
            return
        if not isinstance(body, dict) or body.get("type") not in TURN_STARTS:
            return
        if body["type"] == "response.append":
            # incremental input: the earlier request's facts with the new input
            body = {**(s.last_request or {}), "input": body.get("input")}
        else:
            body = {k: v for k, v in body.items() if k != "type"}
        s.last_request = body
        s.pending.append(body)

    def _start_turn(self, flow: http.HTTPFlow, s: Socket) -> Turn:
        body = s.pending.popleft() if s.pending else None
        s.turns += 1
        key = f"{flow.id}/{s.turns}"
        model = body.get("model") if body else None
        fctx = FlowContext(model=model if isinstance(model, str) else None, request=body)
        verdict = Verdict(enabled=self.repair.evidence)
        verdict.request(body)
        if "upstream" in self.repair.evidence and body is not None:
            try:
                shared.correlator().note_client_request(key, flow.request.path, body)
                verdict.resolver = shared.correlator().resolver(key)
            except Exception:
                logger.exception("streamfix: correlator bookkeeping failed; upstream evidence off for this turn")
        rep = ResponsesRepairer(self.repair.rules, fctx, verdict)
        return Turn(s.turns, key, verdict, StreamRepair(rep), orphan=body is None)

    def _repair_message(self, flow: http.HTTPFlow, s: Socket, content: bytes) -> list[bytes]:
        """The messages one upstream text message becomes (itself when unchanged)."""
        if s.failed:
            return [content]
        t = s.turn
        if t is None or t.finished or (t.orphan and s.pending):
            if t is not None and not t.reported:
                self._report(flow, s, t)
            t = s.turn = self._start_turn(flow, s)
        wrapped = b"data: " + content.replace(b"\n", b"\ndata: ") + b"\n\n"
        try:
            out = t.repair.feed(wrapped)
        except Exception as e:  # StreamRepair fails open itself; this is a last resort
            t.repair.error = e
            out = wrapped
        if t.repair.error is not None:
            s.failed = True
            self._report(flow, s, t)
            return [content]
        if out == wrapped:
            outputs = [content]
        else:
            p = SseParser()
            outputs = [content if ev.raw == wrapped else ev.data for ev in p.feed(out) + p.close()]
            outputs = [o for o in outputs if o is not None]
        if t.finished:
            self._report(flow, s, t)
        return outputs

    def _route(self, flow: http.HTTPFlow, s: Socket, msg, outputs: list[bytes]) -> None:
        """Send ``outputs`` in place of ``msg``, in order (see the module docstring)."""
        if not s.outbox:
            if not outputs:
                msg.drop()
                return
            if outputs[0] != msg.content:
                msg.content = outputs[0]
            rest = outputs[1:]
        else:
            msg.drop()
            rest = outputs
        for o in rest:
            s.outbox.append(o)
            self._inject(flow, o)

    def _inject(self, flow: http.HTTPFlow, data: bytes) -> None:
        ctx.master.commands.call("inject.websocket", flow, True, data, True)

    def _report(self, flow: http.HTTPFlow, s: Socket, t: Turn) -> None:
        """The turn's receipt: log lines and a flow comment line, as for an SSE flow."""
        t.reported = True
        shared.correlator().forget_client(t.key)
        rep = t.repair.repairer
        where = f"GET {_path(flow)} (WebSocket turn {t.n})"
        for n in rep.notes:
            logger.info(f"streamfix: {where}: {n}")
        if t.repair.error is not None:
            self.failed += 1
            err = t.repair.error
            line = (
                f"streamfix [responses, WebSocket turn {t.n}] repairer failed ({type(err).__name__}: {err}); "
                f"rest of the WebSocket passed through unchanged"
            )
            logger.error(f"streamfix: {where}: {line}")
            _comment(flow, line)
            return
        if not rep.changed:
            return
        self.repaired += 1
        flow.marked = ":wrench:"
        line = f"streamfix [responses, WebSocket turn {t.n}] {rep.changed} events repaired"
        d = getattr(rep, "decision", None)
        if d is not None and d.truncated and not d.native and self.repair.rules.truncation != "off":
            line += f"; {d.receipt()}"
            logger.warning(f"streamfix: {where}: {d.receipt()}")
        else:
            logger.info(f"streamfix: {where}: {line}")
        _comment(flow, line)


def _path(flow: http.HTTPFlow) -> str:
    return flow.request.path.split("?", 1)[0]


def _comment(flow: http.HTTPFlow, line: str) -> None:
    flow.comment = f"{flow.comment}\n{line}" if flow.comment else line
