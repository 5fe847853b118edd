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
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import orjson
from mitmproxy import ctx, exceptions, http
from mitmproxy.proxy import mode_specs

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:  # loaded with -s from a checkout that is not pip-installed
    sys.path.insert(0, _ROOT)

from addons import shared  # noqa: E402  (the correlator shared with addons/upstream.py)
from wire.apis import api_for_path, json_repairer, stream_repairer  # noqa: E402
from wire.encoding import Decoder, decoder_for  # noqa: E402
from wire.rules import FlowContext, Rules  # noqa: E402
from wire.stream import EventRepairer, StreamRepair  # noqa: E402
from wire.verdict import SOURCES, Verdict  # noqa: E402

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
    "streamfix_tool_index": "tool_index",
    "streamfix_tool_header": "tool_header",
}
RULE_HELP: dict[str, str] = {
    "status": "Responses: give function_call items a status (in_progress on added, completed on done and in the terminal's output).",
    "item_order": "Responses: close an item still open when the next one is added; drop its late close events.",
    "output_index": "Responses: make output_index dense and equal to the item's position in the final output.",
    "sequence": "Responses: keep sequence_number strictly increasing across inserted and dropped events.",
    "usage": "Responses: give usage integer input_tokens, output_tokens and total_tokens.",
    "schema_fill": "Responses: fill required fields the gateway leaves out (created_at, model, item_id, summary_index).",
    "terminal_output": "Responses: list the announced items, in order, in the terminal event's output.",
    "response_id": "Responses: keep response.id the same across lifecycle events.",
    "tool_index": "Chat: renumber tool_calls[].index 0..n-1 per choice by first appearance.",
    "tool_header": "Chat: do not announce a tool call's name twice when the gateway re-sends its header.",
}
TRUNCATION_CHOICES = ("incomplete", "completed", "off")
SSE = "text/event-stream"


class FlowState:
    # A plain class, not a dataclass: mitmproxy runs a -s script without putting it in
    # sys.modules, and dataclasses then fail on this module's string annotations.
    __slots__ = ("api", "ctx", "verdict", "stream")

    def __init__(self, api: str, ctx: FlowContext, verdict: Verdict) -> None:
        self.api = api
        self.ctx = ctx
        self.verdict = verdict
        self.stream: FlowStream | None = None


class FlowStream:
    """The ``flow.response.stream`` callable: decode, repair, never raise, never ``b""``.

    mitmproxy calls it once per upstream read and once more with ``b""`` at the end. An
    exception here would drop the chunk (and hang the client on the final call), so every
    error turns the flow into passthrough of the remaining bytes.
    """

    __slots__ = ("repair", "decoder", "keep", "original", "repaired", "failed", "on_eof")

    def __init__(self, repair: StreamRepair, decoder: Decoder | None, keep: bool, on_eof):
        self.repair = repair
        self.decoder = decoder
        self.keep = keep
        self.original: list[bytes] = []
        self.repaired: list[bytes] = []
        self.failed: BaseException | None = None
        self.on_eof = on_eof

    def __call__(self, chunk: bytes) -> list[bytes]:
        eof = chunk == b""
        try:
            if self.decoder is not None:
                chunk = self.decoder.flush() if eof else self.decoder.decode(chunk)
            out = self.repair.feed(chunk) if chunk else b""
            if eof:
                out += self.repair.close()
        except Exception as e:  # decoding failed: nothing more can be repaired
            self.failed = e
            out = chunk if isinstance(chunk, bytes) else b""
        if self.keep:
            if chunk:
                self.original.append(chunk)
            if out:
                self.repaired.append(out)
        if eof:
            try:
                self.on_eof(self)
            except Exception:  # logging must never break the stream
                logger.exception("streamfix: error while finishing a flow")
        return [out] if out else []


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

    def load(self, loader) -> None:
        loader.add_option("streamfix", bool, True, "Repair LLM gateway responses (master switch).")
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
    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if not ctx.options.streamfix or api_for_path(flow.request.path) is None or not self._client_leg(flow):
            return
        # A client's "Connection: close" would make the gateway close right after the
        # last byte, and mitmproxy can then lose the tail (the terminal event) of a
        # streamed body (../shared/reference/mitmproxy.md section 10).
        if flow.request.headers.get("connection", "").lower() == "close":
            del flow.request.headers["connection"]

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
        self.flows[flow.id] = FlowState(api, fctx, verdict)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        st = self.flows.get(flow.id)
        resp = flow.response
        if st is None or resp is None or not ctx.options.streamfix:
            return
        if not resp.headers.get("content-type", "").lower().startswith(SSE):
            return  # JSON (and anything else) is buffered by mitmproxy: see response()
        if resp.raw_content is not None:
            return  # already buffered (replay, -nr): repaired in response()
        try:
            decoder = decoder_for(resp.headers.get("content-encoding", ""))
        except ValueError as e:
            logger.warning(f"streamfix: {_where(flow)}: {e}; passed through unrepaired")
            self.flows.pop(flow.id, None)
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
        )
        resp.stream = st.stream

    def response(self, flow: http.HTTPFlow) -> None:
        st = self.flows.pop(flow.id, None)
        if st is not None:
            shared.correlator().forget_client(flow.id)
        if st is None or flow.response is None or st.stream is not None:
            if st is not None and st.stream is not None and ctx.options.streamfix_keep_bodies:
                self._keep_bodies(flow, st.stream)
            return
        self._repair_buffered(flow, st)

    def error(self, flow: http.HTTPFlow) -> None:
        if (st := self.flows.pop(flow.id, None)) is not None:
            shared.correlator().forget_client(flow.id)
            if st.stream is not None:
                _log_undelivered(flow, st.stream)

    def done(self) -> None:
        if self.repaired or self.failed:
            logger.info(f"streamfix: {self.repaired} flows repaired, {self.failed} passed through after a repairer error")

    # --- helpers -----------------------------------------------------------------
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
                out = s.feed(content) + s.close()
                self._report(flow, st, s.repairer, s.error)
                if out != content:
                    if ctx.options.streamfix_keep_bodies:
                        flow.metadata["streamfix.original"] = content
                    resp.content = out
            elif "json" in ctype:
                obj = _json_object(content)
                if obj is None:
                    return
                if json_repairer(st.api)(obj, self.rules, st.ctx, st.verdict):
                    if ctx.options.streamfix_keep_bodies:
                        flow.metadata["streamfix.original"] = content
                    resp.content = orjson.dumps(obj)
                    self._receipt(flow, st, None, changed=True)
        except Exception as e:
            self.failed += 1
            logger.error(f"streamfix: {_where(flow)}: repair failed ({type(e).__name__}: {e}); body unchanged")

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

    def _receipt(self, flow, st: FlowState, rep: EventRepairer | None, changed: bool) -> None:
        if not changed:
            return
        self.repaired += 1
        flow.marked = ":wrench:"
        # stream repairers keep their Decision; for a JSON body ask the verdict
        decision = getattr(rep, "decision", None) if rep is not None else st.verdict.decide()
        events = f"{rep.changed} events repaired" if rep is not None else "body repaired"
        line = f"streamfix [{st.api}] {events}"
        if decision is not None and decision.truncated and not decision.native and self.rules.truncation != "off":
            line += f"; {decision.receipt()}"
            logger.warning(f"streamfix: {_where(flow)}: {decision.receipt()}")
        else:
            logger.info(f"streamfix: {_where(flow)}: {line}")
        _comment(flow, line)

    def _keep_bodies(self, flow: http.HTTPFlow, s: FlowStream) -> None:
        flow.metadata["streamfix.original"] = b"".join(s.original)
        flow.response.content = b"".join(s.repaired)


def _log_undelivered(flow: http.HTTPFlow, s: FlowStream) -> None:
    """A streamed flow that failed (upstream reset or closed mid-body): mitmproxy 12.3.1
    sends the client the error without a last call of the stream callable
    (``proxy/layers/http/__init__.py`` ``HttpStream.handle_protocol_error``: the error hook,
    then ``SendHttp(ResponseProtocolError)``, which closes an HTTP/1 client connection), so
    what the repairer still holds cannot be delivered. Say how much, so it is not silent."""
    events, held, partial = s.repair.undelivered()
    if held or partial:
        err = flow.error.msg if flow.error is not None else "flow failed"
        logger.warning(
            f"streamfix: {_where(flow)}: {err}; not delivered: {events} held event(s) ({held} bytes) "
            f"and {partial} bytes of an unfinished event (mitmproxy ends a failed stream without "
            "a last call to the stream callable)"
        )


def _json_object(content: bytes | None) -> dict | None:
    if not content:
        return None
    try:
        obj = orjson.loads(content)
    except orjson.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def _where(flow: http.HTTPFlow) -> str:
    """Method and path without the query (Gemini keys can ride in ?key=)."""
    return f"{flow.request.method} {flow.request.path.split('?', 1)[0]}"


def _comment(flow: http.HTTPFlow, line: str) -> None:
    flow.comment = f"{flow.comment}\n{line}" if flow.comment else line


addons = [Repair()]
