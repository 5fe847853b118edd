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

Each turn's receipt reads as an SSE flow's (prefixed ``WebSocket turn N:``) and goes to
the turn log (``transport: websocket``). With ``streamfix_mode=check`` the messages are
checked against the contract per turn and never changed.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import replace
from typing import Any

import orjson
from mitmproxy import contentviews, ctx, exceptions, http
from mitmproxy.contentviews import Contentview, Metadata
from streamfix.wire.apis import api_for_path
from streamfix.wire.contract import StreamChecker
from streamfix.wire.foreign import codex_client
from streamfix.wire.responses import ResponsesRepairer
from streamfix.wire.rules import FlowContext
from streamfix.wire.sse import SseParser
from streamfix.wire.stream import StreamRepair
from streamfix.wire.told import Told
from streamfix.wire.verdict import Verdict

from . import check as checkmode
from . import receipts, shared, turnlog
from .turn import Turn as TurnRecord
from .turn import ending

logger = logging.getLogger("streamfix")

WEBSOCKET_CHOICES = ("repair", "refuse", "pass")
TURN_STARTS = frozenset({"response.create", "response.append"})
WS_NOTES = "streamfix.ws"
"""flow.metadata key: message index (str) -> what streamfix did to it (keep_bodies only)."""
TERMINALS = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})


class SocketTurn:
    """One response on the socket: its request facts, repairer (or checker) and receipt state."""

    __slots__ = (
        "checker",
        "first_at",
        "key",
        "model",
        "n",
        "orphan",
        "repair",
        "reported",
        "resolver",
        "said",
        "started",
        "terminal",
        "told",
        "verdict",
    )

    def __init__(
        self, n: int, key: str, verdict: Verdict, repair: StreamRepair | None, model: str | None, orphan: bool
    ) -> None:
        self.n = n
        self.key = key
        self.verdict = verdict
        self.repair = repair
        self.checker: StreamChecker | None = None
        """Check mode: the contract checker (``repair`` is None)."""
        self.model = model
        self.orphan = orphan
        """Started by server messages no client request announced."""
        self.reported = False
        self.resolver = verdict.resolver
        """The correlator's resolver (the verdict lets go of it once used)."""
        self.started = time.time()
        self.first_at: float | None = None
        self.terminal: str | None = None
        """Check mode: the terminal event's type, once seen."""
        on = shared.has_turn_sinks()
        self.told = Told("responses") if on else None
        """With a turn sink: what the client was told (wire/told.py)."""
        self.said = Told("responses") if on else None
        """With a turn sink: what the gateway said."""

    @property
    def finished(self) -> bool:
        if self.reported or self.terminal is not None:
            return True
        return self.repair is not None and getattr(self.repair.repairer, "finished", False)


class Socket:
    """Per-WebSocket state: requests not yet answered, the current turn, the outbox."""

    __slots__ = ("check", "failed", "last_request", "outbox", "pending", "turn", "turns")

    def __init__(self, check: bool = False) -> None:
        self.check = check
        """``streamfix_mode=check``: each turn is checked against the contract, never changed."""
        self.pending: deque[dict[str, Any]] = deque()
        self.turn: SocketTurn | None = None
        self.turns = 0
        self.outbox: deque[tuple[bytes, Any]] = deque()
        """Outputs waiting for their injected message, in order (ordered mode when non-empty)."""
        self.last_request: dict[str, Any] | None = None
        self.failed = False


class WebSocketRepair:
    """Repairs Responses events on WebSockets with the client leg's rules.

    ``repair`` is the :class:`addons.repair.Repair` instance whose rules, evidence sources
    and client-leg test apply (its options configure both); ``receipt`` is
    ``addons.repair.receipt`` (a turn's receipt reads as an SSE flow's).
    """

    def __init__(self, repair, receipt=None) -> None:
        self.repair = repair
        self.receipt = receipt
        self.sockets: dict[str, Socket] = {}
        self.repaired = 0
        self.failed = 0

    def load(self, loader) -> None:
        loader.add_option(
            "streamfix_websocket",
            str,
            "repair",
            """Responses over WebSocket (Codex with supports_websockets = true):
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
            self.sockets[flow.id] = Socket(check=getattr(ctx.options, "streamfix_mode", "repair") == "check")

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
                msg.content, note = s.outbox.popleft()
                self._note(flow, note)
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
            if s.turn.repair is not None:  # (check mode: a checker, no repair)
                s.turn.repair.close()  # the driver fails open by itself (error kept, never raised)
            self._report(flow, s, s.turn, closed=True)
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
        if "upstream" in self.repair.evidence:
            # the upstream leg matches CPA's provider call to this turn by prompt: noted now,
            # before the gateway makes that call (the turn itself starts with its first reply)
            try:
                shared.correlator().note_client_request(
                    f"{flow.id}/{s.turns + len(s.pending)}", flow.request.path, body
                )
            except Exception:
                logger.exception("streamfix: correlator bookkeeping failed; upstream evidence off for this turn")

    def _start_turn(self, flow: http.HTTPFlow, s: Socket) -> SocketTurn:
        body = s.pending.popleft() if s.pending else None
        s.turns += 1
        key = f"{flow.id}/{s.turns}"
        model = body.get("model") if body else None
        fctx = FlowContext(model=model if isinstance(model, str) else None, request=body)
        if codex_client(flow.request.headers.get("originator"), flow.request.headers.get("user-agent")):
            fctx.client = "codex"
        verdict = Verdict(enabled=self.repair.evidence)
        verdict.request(body)
        if "upstream" in self.repair.evidence and body is not None:
            try:
                if key not in shared.correlator().pending:  # noted with the client's message, normally
                    shared.correlator().note_client_request(key, flow.request.path, body)
                verdict.resolver = shared.correlator().resolver(key)
            except Exception:
                logger.exception("streamfix: correlator bookkeeping failed; upstream evidence off for this turn")
        if s.check:
            t = SocketTurn(s.turns, key, verdict, None, fctx.model, orphan=body is None)
            t.checker = StreamChecker("responses", client=fctx.client, request=body)
            return t
        # Two SSE rules have no WebSocket form: ``nonstandard`` keeps a foreign event as an SSE
        # comment, and a message cannot be a comment (dropping it would lose Codex's own
        # ``codex.rate_limits``; Codex skips what it does not know); ``eof_terminal`` ends a
        # stream cut without a terminal with response.failed, but a turn ends that way only
        # when the socket closes, which Codex reports itself ("closed by server before
        # response.completed"), and nothing can be sent after the close; ``no_events`` likewise
        # (a turn with no message ends only with the socket); ``cr_end`` is SSE framing.
        # vendor_events likewise: its comment would drop the message, and Codex reads codex.*
        rules = replace(
            self.repair.rules, nonstandard=False, eof_terminal=False, no_events=False, cr_end=False, vendor_events=False
        )
        rep = ResponsesRepairer(rules, fctx, verdict)
        return SocketTurn(s.turns, key, verdict, StreamRepair(rep), fctx.model, orphan=body is None)

    def _repair_message(self, flow: http.HTTPFlow, s: Socket, content: bytes) -> list[bytes]:
        """The messages one upstream text message becomes (itself when unchanged)."""
        if s.failed:
            return [content]
        t = s.turn
        if t is None or t.finished or (t.orphan and s.pending):
            if t is not None and not t.reported:
                self._report(flow, s, t)
            t = s.turn = self._start_turn(flow, s)
        if t.first_at is None:
            t.first_at = time.time()
        wrapped = b"data: " + content.replace(b"\n", b"\ndata: ") + b"\n\n"
        if t.repair is None:
            _tell(t, wrapped, wrapped)
            self._check(flow, s, t, content, wrapped)
            return [content]
        try:
            out = t.repair.feed(wrapped)
        except Exception as e:  # noqa: BLE001 - StreamRepair fails open itself; a last resort
            t.repair.error = e
            out = wrapped
        _tell(t, out if t.repair.error is None else wrapped, wrapped)
        if t.repair.error is not None:
            s.failed = True
            self._report(flow, s, t)
            return [content]
        if out == wrapped:
            outputs = [content]
        else:
            p = SseParser()
            evs = p.feed(out) + p.close()
            outputs = [o for o in (content if ev.raw == wrapped else ev.data for ev in evs) if o is not None]
        if t.finished:
            self._report(flow, s, t)
        return outputs

    def _check(self, flow: http.HTTPFlow, s: Socket, t: SocketTurn, content: bytes, wrapped: bytes) -> None:
        """Check mode: the message feeds the turn's contract checker; it goes out as it came."""
        assert t.checker is not None
        try:
            t.checker.feed(wrapped)
            obj = orjson.loads(content)
        except Exception:  # noqa: BLE001 - not JSON (the checker notes it), or a checker error
            return
        typ = obj.get("type") if isinstance(obj, dict) else None
        if typ in TERMINALS:
            t.terminal = typ
            t.checker.close()
            self._report(flow, s, t)

    def _route(self, flow: http.HTTPFlow, s: Socket, msg, outputs: list[bytes]) -> None:
        """Send ``outputs`` in place of ``msg``, in order (see the module docstring)."""
        original = msg.content
        # what mitmweb's "streamfix message" view says of each message (keep_bodies only)
        notes = [_output_note(o, original) for o in outputs] if self._keep(flow) else [None] * len(outputs)
        if not s.outbox:
            if not outputs:
                msg.drop()
                self._note(flow, "dropped")
                return
            if outputs[0] != original:
                msg.content = outputs[0]
            self._note(flow, notes[0])
            rest = list(zip(outputs[1:], notes[1:]))
        else:
            msg.drop()
            self._note(flow, "held" if outputs else "dropped")
            rest = list(zip(outputs, notes))
        for o, note in rest:  # a binary message (passed as it came) is injected as binary
            s.outbox.append((o, note))
            self._inject(flow, o, msg.is_text)

    def _keep(self, flow: http.HTTPFlow) -> bool:
        o = ctx.options  # as the HTTP flows (addons/repair.py): kept, or flows are saved (-w)
        return bool(getattr(o, "streamfix_keep_bodies", False) or getattr(o, "save_stream_file", None))

    def _note(self, flow: http.HTTPFlow, note: Any) -> None:
        """Remember what streamfix did to the message just handled (for the view)."""
        if note is None or flow.websocket is None or not self._keep(flow):
            return
        flow.metadata.setdefault(WS_NOTES, {})[str(len(flow.websocket.messages) - 1)] = note

    def _inject(self, flow: http.HTTPFlow, data: bytes, is_text: bool = True) -> None:
        ctx.master.commands.call("inject.websocket", flow, True, data, is_text)

    def _report(self, flow: http.HTTPFlow, s: Socket, t: SocketTurn, closed: bool = False) -> None:
        """The turn's receipt (log lines and flow comment lines, as for an SSE flow) and
        its turn log record. ``closed``: the socket ended before the turn did."""
        t.reported = True
        shared.correlator().forget_client(t.key)
        where = f"GET {_path(flow)} (WebSocket turn {t.n})"
        if t.checker is not None:
            checkmode.report(flow, "responses", t.checker)
            self._turn_log(flow, t, closed)
            return
        assert t.repair is not None
        rep = t.repair.repairer
        notes = rep.notes  # in the turn's one log line, as for an SSE flow (addons/receipts.py)
        if t.repair.error is not None:
            self.failed += 1
            err = t.repair.error
            line = (
                f"WebSocket turn {t.n}: repairer failed ({type(err).__name__}: {err}); "
                f"rest of the WebSocket passed through unchanged"
            )
            logger.error(f"streamfix: {where}: {receipts.log_line([line], notes)}")
            _comment(flow, f"streamfix: {line}")
        elif rep.changed:
            self.repaired += 1
            flow.marked = ":wrench:"
            d = getattr(rep, "decision", None)
            if self.receipt is not None:
                head, why = self.receipt("responses", rep, d, self.repair.rules.truncation)
            else:
                head, why = f"fixed {rep.changed} events (responses)", ""
            lines = [f"WebSocket turn {t.n}: {head}"] + ([f"why: {why}"] if why else [])
            text = receipts.log_line(lines, notes)
            (logger.warning if why else logger.info)(f"streamfix: GET {_path(flow)}: {text}")
            for line in lines:
                _comment(flow, line)
        elif notes:
            logger.info(f"streamfix: {where}: {receipts.log_line([], notes)}")
        self._turn_log(flow, t, closed)

    def _turn_log(self, flow: http.HTTPFlow, t: SocketTurn, closed: bool) -> None:
        """Hand the finished turn to the turn log (addons/turnlog.py), if one listens."""
        if not shared.has_turn_sinks():
            return
        try:
            rep = t.repair.repairer if t.repair is not None else None
            decision = getattr(rep, "decision", None)
            unfinished = closed and not t.finished
            ended, error = ending(
                failed=t.repair.error if t.repair is not None else None,
                gone="the WebSocket closed before the turn's terminal event" if unfinished else None,
                by_client=flow.websocket is not None and bool(flow.websocket.closed_by_client),
                # a failure terminal: no success decision was made
                failure=""
                if (rep is not None and decision is None) or t.terminal in ("response.failed", "error")
                else None,
                decision=decision,
            )
            path = _path(flow)
            turn = TurnRecord(
                flow_id=flow.id,
                api="responses",
                transport="websocket",
                path=path,
                key=turnlog.client_label(flow.request.headers.get, path),
                model=t.model,
                started=t.started,
                ended_at=time.time(),
                ended=ended,
                error=error,
                first_byte_at=t.first_at,
                status=flow.response.status_code if flow.response is not None else None,
                verdict=t.verdict,
                decision=decision,
                resolver=t.resolver,
                repairer=rep,
                bytes_in=t.repair.bytes_in if t.repair is not None else None,
                bytes_out=t.repair.bytes_out if t.repair is not None else None,
                events=t.repair.events if t.repair is not None else None,
                checker=t.checker,
                told=t.told,
                said=t.said,
                server=(flow.request.host, flow.request.port),
            )
            shared.turn_finished(turn.record())
        except Exception:
            logger.exception(f"streamfix: GET {_path(flow)}: building the WebSocket turn record failed")


def _tell(t: SocketTurn, out: bytes, came: bytes) -> None:
    """What the client is told (``out``) and what the gateway said (``came``), for the turn's record."""
    if t.told is not None and t.said is not None:
        try:
            t.told.feed(out)
            t.said.feed(came)
        except Exception:  # noqa: BLE001 - the turn's record must never break the socket
            t.told = t.said = None


def _output_note(out: bytes, original: bytes) -> Any:
    """An output's note: unchanged (None), inserted, or changed (with the original)."""
    if out == original:
        return None
    return {"changed": original} if _same_event(out, original) else "inserted"


def _same_event(a: bytes, b: bytes) -> bool:
    """Is ``a`` a rewrite of ``b`` (same event type) rather than an inserted event?"""
    try:
        ta, tb = orjson.loads(a).get("type"), orjson.loads(b).get("type")
    except (orjson.JSONDecodeError, AttributeError):
        return False
    return ta == tb or {ta, tb} == {"response.completed", "response.incomplete"}


class StreamfixMessage(Contentview):
    """mitmweb: a WebSocket message with what streamfix did to it (``streamfix_keep_bodies``):
    changed (each changed JSON field, then the message), inserted, dropped, or held (dropped
    here and sent, in order, as the injected messages that follow)."""

    name = "streamfix message"
    syntax_highlight = "yaml"

    def prettify(self, data: bytes, metadata: Metadata) -> str:
        note = _message_note(metadata)
        if note is None:
            return data.decode("utf-8", "replace") + "\n"
        if isinstance(note, dict):
            from .sseview import field_changes

            old = note.get("changed", b"")
            try:
                lines = list(field_changes(orjson.loads(old), orjson.loads(data)))
            except orjson.JSONDecodeError:
                lines = [f"- {old!r}"]
            head = "# changed by streamfix:\n" + "".join(f"#   {line}\n" for line in lines)
        else:
            head = {
                "inserted": "# inserted by streamfix\n",
                "dropped": "# dropped by streamfix: not sent to the client\n",
                "held": "# held by streamfix: sent, in order, as injected messages after this one\n",
            }.get(note, f"# {note}\n")
        return head + data.decode("utf-8", "replace") + "\n"

    def render_priority(self, data: bytes, metadata: Metadata) -> float:
        return 3 if _message_note(metadata) is not None else -1


def _message_note(metadata: Metadata) -> Any:
    msg, flow = metadata.websocket_message, metadata.flow
    ws = getattr(flow, "websocket", None)
    notes = flow.metadata.get(WS_NOTES) if flow is not None else None
    if msg is None or ws is None or not notes:
        return None
    for i, m in enumerate(ws.messages):
        if m is msg:
            return notes.get(str(i))
    return None


contentviews.add(StreamfixMessage)


def _path(flow: http.HTTPFlow) -> str:
    return flow.request.path.split("?", 1)[0]


def _comment(flow: http.HTTPFlow, line: str) -> None:
    flow.comment = f"{flow.comment}\n{line}" if flow.comment else line
