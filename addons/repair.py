"""streamfix: repair CLIProxyAPI's LLM streams in flight.

    mitmdump --mode reverse:http://127.0.0.1:8317@127.0.0.1:8318 -s addons/repair.py

Picks a repairer by path (``/v1/responses``, ``/v1/chat/completions``, ``/v1/messages``,
Gemini ``:streamGenerateContent``; any prefix), streams ``text/event-stream`` bodies
through it event by event, and repairs buffered bodies (JSON responses, ``mitmdump -nr``,
``--server-replay``, mitmweb with streaming off) the same way. Every repair is an option
(``--set streamfix_status=false``...). A repairer error switches that flow to
passthrough: the rest of the bytes go out as they came and one line is logged.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import orjson
from mitmproxy import command, ctx, exceptions, hooks, http
from mitmproxy import flow as mflow
from mitmproxy.proxy import mode_specs

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:  # loaded with -s from a checkout that is not pip-installed
    sys.path.insert(0, _ROOT)

from addons import check as checkmode  # noqa: E402  (streamfix_mode=check)
from addons import shared, turnlog  # noqa: E402  (the correlator shared with addons/upstream.py)
from addons import redact as redact_addon  # noqa: E402
from addons.salvage import Salvage  # noqa: E402  (held bytes delivered when an upstream fails)
from addons.websocket import WebSocketRepair  # noqa: E402  (Responses over WebSocket)
from wire.apis import api_for_path, json_repairer, stream_repairer  # noqa: E402
from wire.encoding import Decoder, decoder_for  # noqa: E402
from wire.rules import FlowContext, Rules  # noqa: E402
from wire.sse import SseParser  # noqa: E402
from wire.stream import EventRepairer, StreamRepair  # noqa: E402
from wire.verdict import SOURCES, Verdict  # noqa: E402
from wire.told import UsageReader, usage_of  # noqa: E402

logger = logging.getLogger("streamfix")

# option name -> Rules field; the help text is the field's docstring in wire/rules.py
RULE_OPTIONS: dict[str, str] = {
    "streamfix_status": "status",
    "streamfix_item_order": "item_order",
    "streamfix_output_index": "output_index",
    "streamfix_sequence": "sequence",
    "streamfix_usage": "usage",
    "streamfix_schema_fill": "schema_fill",
    "streamfix_terminal_output": "terminal_output",
    "streamfix_response_id": "response_id",
    "streamfix_announce": "announce",
    "streamfix_item_id": "item_id",
    "streamfix_reasoning_summary": "reasoning_summary",
    "streamfix_replay": "replay",
    "streamfix_nonstandard": "nonstandard",
    "streamfix_eof_terminal": "eof_terminal",
    "streamfix_tool_index": "tool_index",
    "streamfix_tool_header": "tool_header",
    "streamfix_finish_reason": "finish_reason",
}
RULE_HELP: dict[str, str] = {
    "status": "Responses: give function_call items a status (in_progress on added, completed on done and in the terminal's output).",
    "item_order": "Responses: close an item still open when the next one is added; drop its late close events.",
    "output_index": "Responses: make output_index dense and equal to the item's position in the final output.",
    "sequence": "Responses: keep sequence_number strictly increasing across inserted and dropped events.",
    "usage": "Responses: give usage integer input_tokens, output_tokens and total_tokens; every API: fill missing "
    "or zero usage counts from the upstream leg's (Devin's).",
    "schema_fill": "Responses: fill required fields the gateway leaves out (created_at, model, item_id, summary_index).",
    "terminal_output": "Responses: list the announced items, in order, in the terminal event's output.",
    "response_id": "Responses: keep response.id the same across lifecycle events.",
    "announce": "Responses: synthesize the output_item.added / content_part.added a gateway left out before an item's first delta.",
    "item_id": "Responses: pin every event of an item (and its done and terminal entries) to the id it was announced with.",
    "reasoning_summary": "Responses: give a reasoning output_item.added without summary an empty summary list.",
    "replay": "Responses, chat: drop a text delta that repeats the whole text already streamed (a full-text replay).",
    "nonstandard": "Responses, chat: turn events the API does not define (ping, keepalive) and empty data events into SSE comments.",
    "eof_terminal": "Responses, chat: end a stream that stops without a terminal with a failure (response.failed, continuing sequence_number; chat: an error chunk), never a success.",
    "tool_index": "Chat: renumber tool_calls[].index 0..n-1 per choice by first appearance.",
    "tool_header": "Chat: do not announce a tool call's name twice when the gateway re-sends its header.",
    "finish_reason": "Chat: map a non-standard finish_reason (CPA's Gemini/Antigravity 'max_tokens', Gemini's "
    "lower-cased 'safety'...) to the spec's value ('length', 'content_filter').",
}
TRUNCATION_CHOICES = ("incomplete", "completed", "off")
ORIGINAL = "streamfix.original"
"""Flow metadata: the body as the gateway sent it (the flow's body is the repaired one)."""
UPSTREAM_FLOW = "streamfix.upstream_flow"
"""Client flow metadata: the id of the upstream flow whose record decided it."""
CLIENT_FLOW = "streamfix.client_flow"
"""Upstream flow metadata: the id of the client flow it served."""
MODE_CHOICES = ("repair", "check")
SSE = "text/event-stream"
LIVE_INTERVAL = 1.0
"""Seconds between updates of a streamed flow's body in the UIs (kept bodies only)."""


class FlowState:
    # A plain class, not a dataclass: mitmproxy runs a -s script without putting it in
    # sys.modules, and dataclasses then fail on this module's string annotations.
    __slots__ = ("api", "ctx", "verdict", "stream", "resolver", "key", "repairer")

    def __init__(self, api: str, ctx: FlowContext, verdict: Verdict) -> None:
        self.api = api
        self.ctx = ctx
        self.verdict = verdict
        self.stream: FlowStream | None = None
        self.resolver = verdict.resolver
        """The correlator's resolver (the verdict lets go of it once called): its record
        links this flow to the upstream flow that decided it."""
        self.key = "-"
        """The client key's id or label for the turn log (never the key)."""
        self.repairer: EventRepairer | None = None


class BodyRepair:
    """A buffered JSON body's repair, as the turn log sees a repairer: the rules that
    fired (each once per body) and whether anything changed."""

    __slots__ = ("fired", "changed")

    def __init__(self, fired: Counter[str]) -> None:
        self.fired = fired
        self.changed = 0


class FlowStream:
    """The ``flow.response.stream`` callable: decode, repair, never raise, never ``b""``.

    mitmproxy calls it once per upstream read and once more with ``b""`` at the end. An
    exception here would drop the chunk (and hang the client on the final call), so every
    error turns the flow into passthrough of the remaining bytes.
    """

    __slots__ = (
        "repair", "decoder", "keep", "original", "repaired", "failed", "on_eof", "on_progress", "shown", "first_at",
        "told", "salvaged",
    )  # fmt: skip

    def __init__(self, repair: StreamRepair, decoder: Decoder | None, keep: bool, on_eof, on_progress=None):
        self.repair = repair
        self.decoder = decoder
        self.keep = keep
        self.original: list[bytes] = []
        self.repaired: list[bytes] = []
        self.failed: BaseException | None = None
        self.on_eof = on_eof
        self.on_progress = on_progress
        """With kept bodies: called at most every :data:`LIVE_INTERVAL` seconds while the
        stream runs, so a UI can show what has arrived."""
        self.shown = time.monotonic()
        self.first_at: float | None = None
        """When the first body bytes arrived (time.time()), for the turn log."""
        self.told: UsageReader | None = None
        """With a turn log: the usage the client is told (wire/told.py)."""
        self.salvaged = 0
        """Bytes sent by :meth:`salvage` after the upstream failed."""

    def __call__(self, chunk: bytes) -> list[bytes]:
        eof = chunk == b""
        if self.first_at is None and not eof:
            self.first_at = time.time()
        try:
            if self.decoder is not None:
                chunk = self.decoder.flush() if eof else self.decoder.decode(chunk)
            out = self.repair.feed(chunk) if chunk else b""
            if eof:
                out += self.repair.close()
        except Exception as e:  # decoding failed: nothing more can be repaired
            self.failed = e
            out = chunk if isinstance(chunk, bytes) else b""
        if self.told is not None and out:
            try:
                self.told.feed(out)
            except Exception:  # the turn log's numbers must never break the stream
                self.told = None
        if self.keep:
            if chunk:
                self.original.append(chunk)
            if out:
                self.repaired.append(out)
            if not eof and self.on_progress is not None and time.monotonic() - self.shown >= LIVE_INTERVAL:
                self.shown = time.monotonic()
                try:
                    self.on_progress(self)
                except Exception:  # a view update must never break the stream
                    logger.exception("streamfix: error while showing a flow in progress")
        if eof:
            on_eof, self.on_eof = self.on_eof, None
            try:
                if on_eof is not None:
                    on_eof(self)
            except Exception:  # logging must never break the stream
                logger.exception("streamfix: error while finishing a flow")
        return [out] if out else []

    def salvage(self) -> list[bytes]:
        """The upstream failed mid-body (``addons/salvage.py`` calls this before mitmproxy
        closes the client connection): what the repairer still holds and the bytes of an
        unfinished event, as they came, so a cut upstream loses no byte it sent."""
        try:
            out = self.repair.salvage()
            if self.decoder is not None:
                out += self.decoder.flush()
        except Exception as e:
            self.failed = e
            return []
        if out and self.keep:
            self.repaired.append(out)
        self.salvaged = len(out)
        return [out] if out else []

    def detach(self) -> None:
        """The flow is over (end of stream, ``response``, ``error``, client abort): drop the
        closure that points back to the flow. Kept, it makes the cycle flow ->
        response.stream -> self -> on_eof -> flow, and every ended flow (with its repairer
        state) would wait for a full garbage collection."""
        self.on_eof = None
        self.on_progress = None


class Repair:
    """The client-leg repair addon."""

    def __init__(self) -> None:
        self.rules = Rules()
        self.evidence: frozenset[str] = frozenset(SOURCES)
        self.flows: dict[str, FlowState] = {}
        self.reverse_only = False
        """With a reverse listener, only its flows are clients' (see configure)."""
        self.repaired = 0
        self.failed = 0
        self.checked = 0
        self.violating = 0

    def load(self, loader) -> None:
        loader.add_option("streamfix", bool, True, "Repair LLM gateway responses (master switch).")
        loader.add_option(
            "streamfix_mode",
            str,
            "repair",
            """'repair' repairs the streams; 'check' changes no byte and reports every
            violation of the stream contract (wire/contract.py) per flow: in the log, the
            flow comment and the receipt.""",
            choices=list(MODE_CHOICES),
        )
        for name, rule in RULE_OPTIONS.items():
            loader.add_option(name, bool, True, RULE_HELP[rule])
        loader.add_option(
            "streamfix_truncation",
            str,
            "incomplete",
            """What a truncation verdict does: 'incomplete' ends a Responses stream with
            response.incomplete (the spec; chat gets finish_reason length, messages
            stop_reason max_tokens, Gemini MAX_TOKENS); 'completed' keeps Responses'
            response.completed (for clients that rather feed the broken call back to the
            model, as Codex does) while the other APIs still report the truncation; 'off'
            rewrites no terminal.""",
            choices=list(TRUNCATION_CHOICES),
        )
        loader.add_option(
            "streamfix_evidence",
            Sequence[str],
            list(SOURCES),
            f"Evidence sources the truncation verdict may use (repeat the option or separate "
            f"with commas): {', '.join(SOURCES)}.",
        )
        loader.add_option(
            "streamfix_keep_bodies",
            bool,
            False,
            """Keep each repaired streamed flow's original and repaired body (for mitmweb's
            views and saved flows). Costs memory per flow; off for a sidecar.""",
        )

    def configure(self, updated: set[str]) -> None:
        opts = ctx.options
        if "mode" in updated:
            # In the two-listener topology (docs/upstream-leg.md) the regular listener
            # carries CPA's own upstream calls, which are not ours to repair: when a reverse
            # listener exists, it is the client leg. With regular mode alone, clients use
            # the proxy directly and every listener is theirs.
            self.reverse_only = any(m.startswith("reverse") for m in opts.mode)
        if "streamfix_mode" in updated and opts.streamfix_mode not in MODE_CHOICES:
            raise exceptions.OptionsError(
                f"streamfix_mode must be one of {', '.join(MODE_CHOICES)}, not {opts.streamfix_mode!r}"
            )
        if "streamfix_truncation" in updated and opts.streamfix_truncation not in TRUNCATION_CHOICES:
            raise exceptions.OptionsError(
                f"streamfix_truncation must be one of {', '.join(TRUNCATION_CHOICES)}, "
                f"not {opts.streamfix_truncation!r}"
            )
        if "streamfix_evidence" in updated:
            # repeated --set streamfix_evidence=a --set ... or one comma-separated value
            names = [n.strip() for v in opts.streamfix_evidence for n in v.split(",") if n.strip()]
            bad = [n for n in names if n not in SOURCES]
            if bad:
                raise exceptions.OptionsError(
                    f"unknown streamfix_evidence source(s) {', '.join(map(repr, bad))}; "
                    f"known: {', '.join(SOURCES)}"
                )
            self.evidence = frozenset(names)
        if updated & (set(RULE_OPTIONS) | {"streamfix_truncation"}):
            self.rules = replace(
                Rules(),
                truncation=opts.streamfix_truncation,
                **{rule: getattr(opts, name) for name, rule in RULE_OPTIONS.items()},
            )

    # --- hooks -------------------------------------------------------------------
    # A client's "Connection: close" is left as it came: mitmproxy closes the client
    # connection right after the response (RFC 9112 section 9.6) and forwards the header,
    # as a plain mitmdump does. The upstream connection ends with the client's anyway
    # (mitmproxy closes a client's server connections when it disconnects), and a gateway
    # that closes with a FIN loses no tail; the tail-loss race of ../shared/reference/
    # mitmproxy.md section 10 needs a TCP reset, which no request header prevents
    # (mitmproxy/mitmproxy#8364, closed as TCP-reset behaviour). Tests:
    # tests/test_http_semantics.py.

    def request(self, flow: http.HTTPFlow) -> None:
        if not ctx.options.streamfix or flow.request.method != "POST" or not self._client_leg(flow):
            return
        api = api_for_path(flow.request.path)
        if api is None:
            return
        body = _json_object(flow.request.get_content(strict=False))
        model = body.get("model") if body else None
        fctx = FlowContext(model=model if isinstance(model, str) else None, request=body)
        if flow.request.timestamp_start:  # the request's own time, also for a saved flow (-nr)
            fctx.started_at = int(flow.request.timestamp_start)
        verdict = Verdict(enabled=self.evidence)
        verdict.request(body)
        if "upstream" in self.evidence and body is not None:
            # the upstream leg (addons/upstream.py) matches CPA's Devin request to this one
            # by prompt, and at the terminal event the verdict asks for the matching
            # upstream flow's StopReason by output digest
            try:
                shared.correlator().note_client_request(flow.id, flow.request.path, body)
                verdict.resolver = shared.correlator().resolver(flow.id)
            except Exception:
                logger.exception("streamfix: correlator bookkeeping failed; upstream evidence off for this flow")
        st = self.flows[flow.id] = FlowState(api, fctx, verdict)
        if shared.has_turn_sinks():
            st.key = turnlog.client_label(lambda n: redact_addon.original_header(flow, n), redact_addon.original_path(flow))

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        st = self.flows.get(flow.id)
        resp = flow.response
        if st is None or resp is None or not ctx.options.streamfix:
            return
        if _asks_close(flow.request.headers) and not _asks_close(resp.headers):
            # mitmproxy closes the client connection after this response; say so (RFC 9112
            # section 9.6) rather than pass on a gateway's (or a recording's) "keep-alive"
            resp.headers["connection"] = "close"
        if not resp.headers.get("content-type", "").lower().startswith(SSE):
            return  # JSON (and anything else) is buffered by mitmproxy: see response()
        if resp.raw_content is not None:
            return  # already buffered (replay, -nr): repaired in response()
        if ctx.options.streamfix_mode == "check":
            st.stream = checkmode.stream(flow, st.api, lambda c: self._finish_check(flow, st, c))
            if st.stream is None:
                self._forget(flow)
            else:
                resp.stream = st.stream
            return
        try:
            decoder = decoder_for(resp.headers.get("content-encoding", ""))
        except ValueError as e:
            logger.warning(f"streamfix: {_where(flow)}: {e}; passed through unrepaired")
            self._forget(flow)
            return
        if decoder is not None:
            del resp.headers["content-encoding"]
        if resp.headers.pop("content-length", None) is not None and flow.request.http_version == "HTTP/1.1":
            # the repaired body's length differs; chunked keeps the client's connection
            # alive (without it mitmproxy ends the body by closing the connection)
            resp.headers["transfer-encoding"] = "chunked"
        repairer = stream_repairer(st.api, self.rules, st.ctx, st.verdict)
        st.stream = FlowStream(
            StreamRepair(repairer),
            decoder,
            ctx.options.streamfix_keep_bodies,
            lambda s: self._finish_stream(flow, st, s),
            lambda s: _show_progress(flow, s),
        )
        if shared.has_turn_sinks():
            st.stream.told = UsageReader(st.api)
        resp.stream = st.stream

    def response(self, flow: http.HTTPFlow) -> None:
        st = self._forget(flow)
        if st is None or flow.response is None or st.stream is not None:
            if isinstance(st and st.stream, FlowStream) and ctx.options.streamfix_keep_bodies:
                self._keep_bodies(flow, st.stream)
        elif ctx.options.streamfix_mode == "check":
            self._check_buffered(flow, st)
        else:
            self._repair_buffered(flow, st)
        if st is not None:
            self._turn(flow, st)

    def error(self, flow: http.HTTPFlow) -> None:
        """A flow that ended early (client abort, upstream reset): say so, and keep the
        bytes it saw (when bodies are kept) so its views show the partial stream."""
        st = self._forget(flow)
        if st is None:
            return
        self._turn(flow, st)
        s = st.stream
        if not isinstance(s, FlowStream) or flow.response is None:
            return  # not streamed, or check mode (addons/check.py reports its own flows)
        _log_undelivered(flow, s)
        rep = s.repair.repairer
        n = None
        if s.keep:
            original = b"".join(s.original)
            p = SseParser()
            n = sum(e.data is not None for e in p.feed(original) + p.close())
            flow.metadata[ORIGINAL] = original
            flow.response.raw_content = b"".join(s.repaired)
        seen = f"{n} event{'s' if n != 1 else ''}" if n is not None else f"{s.repair.bytes_in} bytes"
        terminal = "no terminal event" if getattr(rep, "decision", None) is None else "after the terminal event"
        line = f"ended early after {seen}, {terminal}; {_why_ended(flow)}"
        if rep.changed:
            line += f"; fixed so far: {', '.join(f'{r} {c}' for r, c in rep.fired.most_common()) or rep.changed}"
        logger.warning(f"streamfix: {_where(flow)}: {line}")
        _comment(flow, line)

    def done(self) -> None:
        if self.checked:
            logger.info(f"streamfix: {self.checked} flows checked, {self.violating} with contract violations")
        if self.repaired or self.failed:
            logger.info(f"streamfix: {self.repaired} flows repaired, {self.failed} passed through after a repairer error")

    # --- helpers -----------------------------------------------------------------
    def _forget(self, flow: http.HTTPFlow) -> FlowState | None:
        """The flow is over: drop its state here and in the correlator, and break the
        stream's reference back to the flow. Returns the state it had."""
        st = self.flows.pop(flow.id, None)
        if st is not None:
            shared.correlator().forget_client(flow.id)
            if st.stream is not None:
                st.stream.detach()
        return st

    def _client_leg(self, flow: http.HTTPFlow) -> bool:
        return not self.reverse_only or isinstance(flow.client_conn.proxy_mode, mode_specs.ReverseMode)

    def _repair_buffered(self, flow: http.HTTPFlow, st: FlowState) -> None:
        resp = flow.response
        assert resp is not None
        if resp.raw_content is None or resp.status_code >= 400:
            return
        ctype = resp.headers.get("content-type", "").lower()
        try:
            content = resp.get_content(strict=True)
        except ValueError as e:
            logger.warning(f"streamfix: {_where(flow)}: cannot decode body ({e}); unchanged")
            return
        if content is None:
            return
        try:
            if ctype.startswith(SSE):
                s = StreamRepair(stream_repairer(st.api, self.rules, st.ctx, st.verdict))
                st.repairer = s.repairer
                out = s.feed(content) + s.close()
                self._report(flow, st, s.repairer, s.error)
                if out != content:
                    if ctx.options.streamfix_keep_bodies:
                        flow.metadata[ORIGINAL] = content
                    resp.content = out
            elif "json" in ctype:
                obj = _json_object(content)
                if obj is None:
                    return
                fired: Counter[str] = Counter()
                st.repairer = BodyRepair(fired)  # what the turn log reads of a repairer
                if json_repairer(st.api)(obj, self.rules, st.ctx, st.verdict, fired=fired):
                    st.repairer.changed = 1
                    if ctx.options.streamfix_keep_bodies:
                        flow.metadata[ORIGINAL] = content
                    resp.content = orjson.dumps(obj)
                    self._receipt(flow, st, None, changed=True, fired=fired)
        except Exception as e:
            self.failed += 1
            logger.error(f"streamfix: {_where(flow)}: repair failed ({type(e).__name__}: {e}); body unchanged")

    def _check_buffered(self, flow: http.HTTPFlow, st: FlowState) -> None:
        resp = flow.response
        if resp is None or resp.raw_content is None:
            return
        if not resp.headers.get("content-type", "").lower().startswith(SSE):
            logger.info(f"streamfix: {_where(flow)}: check mode checks event streams; this body is not one")
            return
        c = checkmode.check_buffered(flow, st.api)
        if c is not None:
            self.checked += 1
            self.violating += checkmode.report(flow, st.api, c) > 0

    def _finish_check(self, flow: http.HTTPFlow, st: FlowState, s) -> None:
        self.checked += 1
        self.violating += checkmode.report(flow, st.api, s.checker, s.failed) > 0

    def _finish_stream(self, flow: http.HTTPFlow, st: FlowState, s: FlowStream) -> None:
        err = s.failed or s.repair.error
        self._report(flow, st, s.repair.repairer, err)

    def _report(self, flow, st: FlowState, rep: EventRepairer, err: BaseException | None) -> None:
        for n in rep.notes:
            logger.info(f"streamfix: {_where(flow)}: {n}")
        if err is not None:
            self.failed += 1
            msg = f"repairer failed ({type(err).__name__}: {err}); rest of the flow passed through unchanged"
            logger.error(f"streamfix: {_where(flow)}: {msg}")
            _comment(flow, f"streamfix: {msg}")
            return
        self._receipt(flow, st, rep, changed=rep.changed > 0)

    def _receipt(
        self, flow, st: FlowState, rep: EventRepairer | None, changed: bool, fired: Counter[str] | None = None
    ) -> None:
        """Verdict first, then the rules that fired with their counts; the evidence and
        the linked upstream flow on lines of their own (mitmweb's comment column shows
        the first). The same text, on one line, is logged."""
        upstream = self._link_upstream(flow, st)
        if not changed:
            if upstream is not None:
                _comment(flow, f"upstream flow {upstream}")
            return
        self.repaired += 1
        flow.marked = ":wrench:"
        # stream repairers keep their Decision; for a JSON body ask the verdict
        decision = getattr(rep, "decision", None) if rep is not None else st.verdict.decide()
        head, why = receipt(st.api, rep, decision, self.rules.truncation, fired)
        lines = [head] + ([f"why: {why}"] if why else []) + ([f"upstream flow {upstream}"] if upstream else [])
        if st.verdict.upstream_counts is not None:  # the usage the fill used, with Devin's model
            lines.append(st.verdict.upstream_counts.detail())
        text = "; ".join(lines)
        if why:
            logger.warning(f"streamfix: {_where(flow)}: {text}")
        else:
            logger.info(f"streamfix: {_where(flow)}: {text}")
        for line in lines:
            _comment(flow, line)

    def _link_upstream(self, flow, st: FlowState) -> str | None:
        """The upstream flow whose record decided this one (wire/correlate.py), linked
        both ways: ``streamfix.upstream_flow`` here, ``streamfix.client_flow`` there."""
        record = getattr(st.resolver, "record", None)
        uid = getattr(record, "flow_id", None)
        if not isinstance(uid, str):
            return None
        flow.metadata[UPSTREAM_FLOW] = uid
        other = _find_flow(uid)
        if other is not None:
            other.metadata[CLIENT_FLOW] = flow.id
            _comment(other, f"client flow {flow.id}")
            _updated(other)
        return uid

    # --- commands ------------------------------------------------------------------
    @command.command("streamfix.upstream")
    def upstream_of(self, flows: Sequence[mflow.Flow]) -> str:
        """The upstream (Devin) flow that decided a client flow: focused in the view."""
        return _jump(flows, UPSTREAM_FLOW)

    @command.command("streamfix.client")
    def client_of(self, flows: Sequence[mflow.Flow]) -> str:
        """The client flow an upstream (Devin) flow served: focused in the view."""
        return _jump(flows, CLIENT_FLOW)

    def _turn(self, flow: http.HTTPFlow, st: FlowState) -> None:
        """Hand the finished turn to the turn log (addons/turnlog.py), if one listens."""
        if not shared.has_turn_sinks():
            return
        try:
            shared.turn_finished(http_turn(flow, st))
        except Exception:
            logger.exception(f"streamfix: {_where(flow)}: building the turn record failed")

    def _keep_bodies(self, flow: http.HTTPFlow, s: FlowStream) -> None:
        flow.metadata[ORIGINAL] = b"".join(s.original)
        flow.response.content = b"".join(s.repaired)


def _log_undelivered(flow: http.HTTPFlow, s: FlowStream) -> None:
    """A streamed flow that failed (upstream reset or closed mid-body): mitmproxy 12.3.1
    sends the client the error without a last call of the stream callable
    (``proxy/layers/http/__init__.py`` ``HttpStream.handle_protocol_error``: the error hook,
    then ``SendHttp(ResponseProtocolError)``, which closes an HTTP/1 client connection).
    ``addons/salvage.py`` sends what the repairer still held first: say so; with
    ``streamfix_salvage=false`` say how much was not delivered, so it is not silent."""
    if s.salvaged:
        err = flow.error.msg if flow.error is not None else "flow failed"
        logger.info(
            f"streamfix: {_where(flow)}: {err}; {s.salvaged} bytes the repair still held (held events, "
            "an unfinished event) sent as they came before the connection closed"
        )
    events, held, partial = s.repair.undelivered()
    if held or partial:
        err = flow.error.msg if flow.error is not None else "flow failed"
        logger.warning(
            f"streamfix: {_where(flow)}: {err}; not delivered: {events} held event(s) ({held} bytes) "
            f"and {partial} bytes of an unfinished event (mitmproxy ends a failed stream without "
            "a last call to the stream callable)"
        )


def http_turn(flow: http.HTTPFlow, st: FlowState) -> dict:
    """The turn log record of a finished (or failed) client HTTP flow."""
    resp = flow.response
    s = st.stream if isinstance(st.stream, FlowStream) else None  # check mode: no repairer
    rep = s.repair.repairer if s is not None else st.repairer
    error = None
    failed = (s.failed or s.repair.error) if s is not None else getattr(rep, "error", None)
    decision = getattr(rep, "decision", None)
    if decision is None and (s is None or s.repair.parser is None) and flow.error is None:
        decision = st.verdict.decide()  # a JSON body (its repairer decided already) or no repair
    if flow.error is not None:
        error = flow.error.msg
        ended = "client_abort" if "client" in error.lower() else "upstream_error"
    elif failed is not None:
        ended, error = "failed_open", f"{type(failed).__name__}: {failed}"
    elif resp is None or resp.status_code >= 400:
        ended = "upstream_error"
    elif (fault := getattr(rep, "fault", None)) is not None and (why := fault()) is not None:
        ended, error = "upstream_error", why
    elif decision is not None and decision.truncated:
        ended = "truncated"
    else:
        ended = "complete"
    told = None
    if s is not None:
        transport, bytes_in, bytes_out, first = "sse", s.repair.bytes_in, s.repair.bytes_out, s.first_at
        events = getattr(s.repair, "events", None)
        told = s.told.counts if s.told is not None else None
    else:
        transport = "json" if resp is None or "json" in resp.headers.get("content-type", "") else "sse"
        size = len(resp.raw_content) if resp is not None and resp.raw_content is not None else None
        bytes_in = bytes_out = size
        original = flow.metadata.get("streamfix.original")
        if isinstance(original, bytes):
            bytes_in = len(original)
        first, events = (resp.timestamp_start if resp is not None else None), None
        if size:
            told = _told_buffered(st.api, transport, resp.get_content(strict=False) or b"")
    started = flow.request.timestamp_start or time.time()
    ended_at = (resp.timestamp_end if resp is not None and flow.error is None else None) or time.time()
    return turnlog.turn_record(
        flow_id=flow.id, api=st.api, transport=transport, path=flow.request.path, key=st.key,
        model=st.ctx.model, started=started, ended_at=ended_at, ended=ended, first_byte_at=first,
        status=resp.status_code if resp is not None else None, verdict=st.verdict, decision=decision,
        resolver=st.resolver, repairer=rep, bytes_in=bytes_in, bytes_out=bytes_out, events=events, error=error,
        client_tokens=told,
    )  # fmt: skip


def _told_buffered(api: str, transport: str, body: bytes) -> dict | None:
    """The usage a buffered body tells the client."""
    if transport == "json":
        return usage_of(api, _json_object(body))
    r = UsageReader(api)
    r.feed(body + b"\n\n")
    return r.counts


def _json_object(content: bytes | None) -> dict | None:
    if not content:
        return None
    try:
        obj = orjson.loads(content)
    except orjson.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def _asks_close(headers: http.Headers) -> bool:
    return any(t.strip().lower() == "close" for v in headers.get_all("connection") for t in v.split(","))


def _where(flow: http.HTTPFlow) -> str:
    """Method and path without the query (Gemini keys can ride in ?key=)."""
    return f"{flow.request.method} {flow.request.path.split('?', 1)[0]}"


def _comment(flow: http.HTTPFlow, line: str) -> None:
    flow.comment = f"{flow.comment}\n{line}" if flow.comment else line


def _show_progress(flow: http.HTTPFlow, s: FlowStream) -> None:
    """What has arrived so far, as the flow's body (mitmproxy leaves a streamed body
    empty until the end; its HTTP layer does not send ``raw_content`` of a streamed
    response, so this is for the UIs only) and the original for the diff view."""
    if flow.response is None:
        return
    flow.metadata[ORIGINAL] = b"".join(s.original)
    flow.response.raw_content = b"".join(s.repaired)
    _updated(flow)


def _why_ended(flow: http.HTTPFlow) -> str:
    msg = flow.error.msg if flow.error is not None else ""
    low = msg.lower()
    if "client" in low:
        return f"client aborted ({msg})"
    if low == mflow.Error.KILLED_MESSAGE.lower():
        return "killed in the proxy"
    return f"upstream reset ({msg})" if msg else "upstream reset"


def receipt(
    api: str, rep: EventRepairer | None, decision, truncation: str, body_fired: Counter[str] | None = None
) -> tuple[str, str]:
    """The receipt's first line (verdict, rules fired with counts) and its evidence; for
    a JSON body (no ``rep``) the rules that changed it (``body_fired``), once each."""
    head = ""
    why = ""
    if decision is not None and decision.truncated and not decision.native and truncation != "off":
        head = f"verdict {decision.outcome}; "
        why = "; ".join(f"{e.source}: {e.detail}" for e in decision.evidence) or "no evidence"
    if rep is None:
        rules = ", ".join(sorted(body_fired or ()))
        return f"{head}fixed {rules or 'the body'} (body, {api})", why
    fired = ", ".join(f"{rule} {n}" for rule, n in rep.fired.most_common())
    events = f"{rep.changed} event{'s' if rep.changed != 1 else ''}"
    return (f"{head}fixed {fired} ({events}, {api})" if fired else f"{head}fixed {events} ({api})"), why


def _linked_id(flow: mflow.Flow, key: str) -> str | None:
    uid = flow.metadata.get(key)
    if uid is None and key == CLIENT_FLOW:  # the request-side link (addons/upstream.py)
        req = flow.metadata.get("streamfix.devin_request")
        uid = req.get("client_flow") if isinstance(req, dict) else None
    return uid if isinstance(uid, str) else None


def _view():
    """mitmproxy's flow view (mitmweb, console); None in mitmdump."""
    master = getattr(ctx, "master", None)
    return master.addons.get("view") if master is not None else None


def _find_flow(flow_id: str) -> mflow.Flow | None:
    view = _view()
    return view.get_by_id(flow_id) if view is not None else None


def _updated(flow: mflow.Flow) -> None:
    """Tell the UIs (mitmweb, console) that a flow changed outside its own hooks."""
    master = getattr(ctx, "master", None)
    if master is not None:
        master.addons.trigger(hooks.UpdateHook([flow]))


def _jump(flows: Sequence[mflow.Flow], key: str) -> str:
    if not flows:
        raise exceptions.CommandError("no flow given (select one: @focus)")
    uid = _linked_id(flows[0], key)
    if uid is None:
        raise exceptions.CommandError("this flow is not linked (no upstream record decided it)")
    other = _find_flow(uid)
    view = _view()
    if other is not None and view is not None:
        view.focus.flow = other
    return uid


_repair = Repair()
addons = [_repair, WebSocketRepair(_repair, receipt), Salvage(), redact_addon.Redact(), turnlog.TurnLog()]
