"""streamfix: repair CLIProxyAPI's LLM streams in flight.

    mitmdump --mode reverse:http://127.0.0.1:8317@127.0.0.1:8318 -s addons/repair.py

Picks a repairer by path (``/v1/responses``, ``/v1/chat/completions``, ``/v1/messages``,
Gemini ``:streamGenerateContent``; any prefix), streams ``text/event-stream`` bodies
through it event by event, and repairs buffered bodies (JSON responses, ``mitmdump -nr``,
``--server-replay``, mitmweb with streaming off) the same way. Every repair is an option
(``--set streamfix_status=false``...). A repairer error switches that flow to
passthrough: the rest of the bytes go out as they came and one line is logged.

This module is the client leg's hooks and the ``-s`` entry point; the features they use
are modules of their own: ``options`` (the options), ``flowstream`` (the per-read stream
callable), ``buffered`` (whole bodies), ``receipts`` (what is said of a flow), ``links``
(client <-> upstream flows and their commands), ``turn`` (the turn record).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from mitmproxy import command, ctx, http
from mitmproxy import flow as mflow
from mitmproxy.proxy import mode_specs

_ROOT = Path(__file__).resolve().parent.parent
if (_ROOT / "streamfix" / "__init__.py").is_file() and str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))  # -s from a checkout that is not pip-installed (installed: nothing to add)

from streamfix.addons import buffered, links, options, receipts, shared, turnlog
from streamfix.addons import check as checkmode
from streamfix.addons import redact as redact_addon
from streamfix.addons.buffered import SSE, json_object
from streamfix.addons.drain import Drain
from streamfix.addons.flowlines import STREAMED, FlowLines
from streamfix.addons.flowstream import ORIGINAL, FlowState, FlowStream
from streamfix.addons.freeze import Freeze
from streamfix.addons.gateway import Gateway
from streamfix.addons.links import CLIENT_FLOW, UPSTREAM_FLOW
from streamfix.addons.listeners import Listeners
from streamfix.addons.metrics import Metrics
from streamfix.addons.receipts import comment, receipt, where
from streamfix.addons.salvage import Salvage
from streamfix.addons.traces import Traces
from streamfix.addons.turn import http_turn
from streamfix.addons.websocket import WebSocketRepair
from streamfix.addons.workers import Workers
from streamfix.wire import _core as core
from streamfix.wire.apis import api_for_path, model_in_path, stream_repairer
from streamfix.wire.encoding import decoder_for
from streamfix.wire.foreign import codex_client
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.sse import SseParser
from streamfix.wire.stream import Reads, StreamRepair
from streamfix.wire.told import Told
from streamfix.wire.verdict import SOURCES, Verdict

logger = logging.getLogger("streamfix")

RULE_OPTIONS = options.RULE_OPTIONS  # re-exported: tests and tools name the options from here


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
        self.keep_bodies = False
        """Streamed flows keep their original and repaired bodies: ``streamfix_keep_bodies``,
        or flows are being saved (``-w``, mitmproxy's ``save_stream_file``), whose streamed
        bodies would otherwise be empty."""

    def load(self, loader) -> None:
        options.add_options(loader)
        logger.info(f"streamfix: protocol core: {core.describe()}")  # compiled or pure (wire/_core.py)

    def configure(self, updated: set[str]) -> None:
        opts = ctx.options
        if "mode" in updated:
            # In the two-listener topology (docs/upstream-leg.md) the regular listener
            # carries CPA's own upstream calls, which are not ours to repair: when a reverse
            # listener exists, it is the client leg. With regular mode alone, clients use
            # the proxy directly and every listener is theirs.
            self.reverse_only = any(m.startswith("reverse") for m in opts.mode)
        options.check_choices(opts, updated)
        if "streamfix_evidence" in updated:
            self.evidence = options.evidence(opts)
        if options.rules_changed(updated):
            self.rules = options.rules(opts)
        if updated & {"streamfix_keep_bodies", "save_stream_file"}:
            self.keep_bodies = bool(opts.streamfix_keep_bodies or getattr(opts, "save_stream_file", None))

    def running(self) -> None:
        """Say once how streamed bodies are kept: for ``-w``, kept (else the saved flows of
        streams would have empty bodies); in a UI without kept bodies, that a flow saved
        from it will have an empty streamed body. Before that, the startup line: what runs
        (mode, rules on, build, listeners, upstream)."""
        opts = ctx.options
        ps = ctx.master.addons.get("proxyserver") if getattr(ctx, "master", None) else None
        logger.info(options.startup_line(opts, ps.servers if ps is not None else ()))
        if getattr(opts, "save_stream_file", None) and not opts.streamfix_keep_bodies:
            logger.info(
                "streamfix: flows are saved (-w): keeping each streamed flow's bodies, the repaired one as its "
                "body and the gateway's original in metadata streamfix.original (as streamfix_keep_bodies does)"
            )
        elif not self.keep_bodies and links.view() is not None:
            logger.warning(
                "streamfix: streamed bodies are not kept: a flow saved from this UI will have an empty "
                "streamed body; --set streamfix_keep_bodies=true (scripts/sidecar --web) keeps them"
            )

    # --- hooks -------------------------------------------------------------------
    # A client's "Connection: close" is left as it came: mitmproxy closes the client
    # connection right after the response (RFC 9112 section 9.6) and forwards the header,
    # as a plain mitmdump does. The upstream connection ends with the client's anyway
    # (mitmproxy closes a client's server connections when it disconnects), and a gateway
    # that closes with a FIN loses no tail; mitmproxy's tail-loss race needs a TCP reset,
    # which no request header prevents (mitmproxy/mitmproxy#8364, closed as TCP-reset
    # behaviour). Tests:
    # tests/e2e/test_http_semantics.py.

    def request(self, flow: http.HTTPFlow) -> None:
        if not ctx.options.streamfix or flow.request.method != "POST" or not self._client_leg(flow):
            return
        api = api_for_path(flow.request.path)
        if api is None:
            return
        body = json_object(flow.request.get_content(strict=False))
        model = body.get("model") if body else None
        if not isinstance(model, str) and api == "gemini":
            model = model_in_path(flow.request.path)  # Gemini names the model in the URL, not the body
        fctx = FlowContext(model=model if isinstance(model, str) else None, request=body)
        if codex_client(flow.request.headers.get("originator"), flow.request.headers.get("user-agent")):
            fctx.client = "codex"  # rule vendor_events keeps the Codex backend's own events for it
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
            st.key = turnlog.client_label(
                lambda n: redact_addon.original_header(flow, n), redact_addon.original_path(flow)
            )

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
            st.stream = checkmode.stream(
                flow, st.api, lambda c: self._finish_check(flow, st, c), st.ctx.request, st.ctx.client
            )
            if st.stream is None:
                self._forget(flow)
            else:
                resp.stream = st.stream
            return
        try:
            decoder = decoder_for(resp.headers.get("content-encoding", ""))
        except ValueError as e:
            logger.warning(f"streamfix: {where(flow)}: {e}; passed through unrepaired")
            self._forget(flow)
            return
        if decoder is not None:
            del resp.headers["content-encoding"]
        if resp.headers.pop("content-length", None) is not None and flow.request.http_version == "HTTP/1.1":
            # the repaired body's length differs; chunked keeps the client's connection
            # alive (without it mitmproxy ends the body by closing the connection)
            resp.headers["transfer-encoding"] = "chunked"
        repairer = stream_repairer(st.api, self.rules, st.ctx, st.verdict)
        if not ctx.options.streamfix_skim:
            repairer.skim = None  # every event through the full parse (wire/skim.py)
        st.stream = FlowStream(
            StreamRepair(repairer),
            decoder,
            self.keep_bodies,
            lambda s: self._finish_stream(flow, st, s),
            lambda s: _show_progress(flow, s),
        )
        if shared.has_turn_sinks():
            st.stream.told, st.stream.said = Told(st.api), Told(st.api)
        resp.stream = st.stream
        if decoder is None and st.stream.told is None and not self.keep_bodies:
            # a plain stream: reads after the first skip the interpreted callable
            resp.stream = Reads(st.stream.repair, st.stream)

    def response(self, flow: http.HTTPFlow) -> None:
        st = self._forget(flow)
        never_called = st is not None and isinstance(st.stream, FlowStream) and st.stream.repair.parser is not None
        if never_called and st is not None and flow.response is not None and flow.response.raw_content is not None:
            # the headers said stream, but the body ended with them (Content-Length: 0,
            # HTTP/2 END_STREAM): mitmproxy buffered it and never called the stream
            flow.response.stream = False
            st.stream = None
        if st is None or flow.response is None or st.stream is not None:
            if st is not None and isinstance(st.stream, FlowStream) and self.keep_bodies:
                self._keep_bodies(flow, st.stream)
        elif ctx.options.streamfix_mode == "check":
            self._check_buffered(flow, st)
        else:
            self._repair_buffered(flow, st)
        if st is not None:
            self._turn(flow, st)
            _let_go(flow, st)

    def error(self, flow: http.HTTPFlow) -> None:
        """A flow that ended early (client abort, upstream reset): say so, and keep the
        bytes it saw (when bodies are kept) so its views show the partial stream."""
        st = self._forget(flow)
        if st is None:
            return
        try:
            self._ended_early(flow, st)
        finally:
            _let_go(flow, st)

    def _ended_early(self, flow: http.HTTPFlow, st: FlowState) -> None:
        self._turn(flow, st)
        s = st.stream
        if not isinstance(s, FlowStream) or flow.response is None:
            return  # not streamed, or check mode (addons/check.py reports its own flows)
        undelivered = receipts.log_undelivered(flow, s)
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
        line = f"ended early after {seen}, {terminal}; {receipts.why_ended(flow)}"
        if rep.changed:
            line += f"; fixed so far: {', '.join(f'{r} {c}' for r, c in rep.fired.most_common()) or rep.changed}"
        logger.warning(f"streamfix: {where(flow)}: {line}")
        for said in [line, *undelivered]:
            comment(flow, said)

    def done(self) -> None:
        if self.checked:
            logger.info(f"streamfix: {self.checked} flows checked, {self.violating} with contract violations")
        if self.repaired or self.failed:
            logger.info(
                f"streamfix: {self.repaired} flows repaired, {self.failed} passed through after a repairer error"
            )

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

    def _count(self, outcome: str) -> None:
        if outcome == "failed":
            self.failed += 1
        elif outcome == "repaired":
            self.repaired += 1

    def _repair_buffered(self, flow: http.HTTPFlow, st: FlowState) -> None:
        self._count(buffered.repair(flow, st, self.rules, self.keep_bodies))

    def _check_buffered(self, flow: http.HTTPFlow, st: FlowState) -> None:
        violating = buffered.check(flow, st)
        if violating is not None:
            self.checked += 1
            self.violating += violating

    def _finish_check(self, flow: http.HTTPFlow, st: FlowState, s) -> None:
        self.checked += 1
        self.violating += checkmode.report(flow, st.api, s.checker, s.failed) > 0

    def _finish_stream(self, flow: http.HTTPFlow, st: FlowState, s: FlowStream) -> None:
        err = s.failed or s.repair.error
        self._count(receipts.report(flow, st, s.repair.repairer, err, self.rules.truncation))

    # --- commands ------------------------------------------------------------------
    @command.command("streamfix.upstream")
    def upstream_of(self, flows: Sequence[mflow.Flow]) -> str:
        """The upstream (Devin) flow that decided a client flow: focused in the view."""
        return links.jump(flows, UPSTREAM_FLOW)

    @command.command("streamfix.client")
    def client_of(self, flows: Sequence[mflow.Flow]) -> str:
        """The client flow an upstream (Devin) flow served: focused in the view."""
        return links.jump(flows, CLIENT_FLOW)

    def _turn(self, flow: http.HTTPFlow, st: FlowState) -> None:
        """Hand the finished turn to the turn log (addons/turnlog.py), if one listens."""
        if not shared.has_turn_sinks():
            return
        try:
            shared.turn_finished(http_turn(flow, st).record())
        except Exception:
            logger.exception(f"streamfix: {where(flow)}: building the turn record failed")

    def _keep_bodies(self, flow: http.HTTPFlow, s: FlowStream) -> None:
        flow.metadata[ORIGINAL] = b"".join(s.original)
        if flow.response is not None:  # (the response hook: there is one)
            flow.response.content = b"".join(s.repaired)


def _let_go(flow: http.HTTPFlow, st: FlowState) -> None:
    """The flow's last hook of ours ran: take our stream callable off it. mitmproxy keeps
    an ended flow in its own reference cycles (connection handler, layers, contexts) until
    a full garbage collection, plain passthrough too; what we hung on the flow (the
    stream's repairer, parser, verdict, kept chunks) is freed now, by reference counting,
    not with it. mitmproxy reads ``response.stream`` no more after these hooks; ``True``
    still says the response was streamed."""
    resp = flow.response
    if isinstance(st.stream, FlowStream):  # mitmdump's flow line (addons/flowlines.py), also of a flow cut short
        flow.metadata[STREAMED] = (st.stream.repair.bytes_in, st.stream.repair.bytes_out)
    if resp is not None and st.stream is not None:
        on = resp.stream
        if on is st.stream or (isinstance(on, Reads) and on.owner is st.stream):
            resp.stream = True
    st.stream = None


def _asks_close(headers: http.Headers) -> bool:
    return any(t.strip().lower() == "close" for v in headers.get_all("connection") for t in v.split(","))


def _show_progress(flow: http.HTTPFlow, s: FlowStream) -> None:
    """What has arrived so far, as the flow's body (mitmproxy leaves a streamed body
    empty until the end; its HTTP layer does not send ``raw_content`` of a streamed
    response, so this is for the UIs only) and the original for the diff view."""
    if flow.response is None:
        return
    flow.metadata[ORIGINAL] = b"".join(s.original)
    flow.response.raw_content = b"".join(s.repaired)
    links.updated(flow)


_repair = Repair()
addons = [
    Listeners(),  # first: checks the regular listener's proxy credentials before they are redacted
    Workers(),  # streamfix_redis: the correlation shared by the workers (streamfix sidecar --workers N)
    _repair,
    WebSocketRepair(_repair, receipt),
    Salvage(),
    redact_addon.Redact(),
    turnlog.TurnLog(),
    Traces(),  # streamfix_traces / OTEL_EXPORTER_OTLP_ENDPOINT: a span per turn (no hooks while off)
    Gateway(),  # a gateway that does not answer: a 502 in the API's error shape
    Metrics(),  # streamfix_metrics: Prometheus and health (no hooks while off)
    Drain(),  # SIGTERM: stop accepting, let the streams in flight finish
    FlowLines(),  # mitmdump's flow line of a streamed flow: its size and receipt, not "(content missing)"
    Freeze(),  # after the others' running: the startup state frozen for the collector
    options.Guard(__file__),  # last: checks the --set values of the options the others registered
]
