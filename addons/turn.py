"""The turn record of a finished (or failed) client HTTP flow, for the turn log
(``addons/turnlog.py``) and whatever else listens to finished turns (``addons/shared.py``)."""

from __future__ import annotations

import time

from mitmproxy import http
from streamfix.addons import turnlog
from streamfix.addons.buffered import json_object
from streamfix.addons.drain import REFUSED
from streamfix.addons.flowstream import ORIGINAL, FlowState, FlowStream
from streamfix.wire.told import UsageReader, usage_of


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
    if flow.metadata.get(REFUSED) == "draining":
        ended, error = "draining", "refused with 503: the sidecar is draining (SIGTERM); the gateway was not asked"
    elif flow.error is not None:
        error = flow.error.msg
        ended = "client_abort" if "client" in error.lower() else "upstream_error"
    elif failed is not None:
        ended, error = "failed_open", f"{type(failed).__name__}: {failed}"
    elif resp is None or resp.status_code >= 400:
        ended = "upstream_error"
    elif (fault := getattr(rep, "fault", None)) is not None and (why := fault()) is not None:
        ended, error = "upstream_error", why
    elif decision is not None and decision.failed and not decision.native:
        ended, error = "upstream_error", decision.evidence[0].detail if decision.evidence else None
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
        original = flow.metadata.get(ORIGINAL)
        if isinstance(original, bytes):
            bytes_in = len(original)
        first, events = (resp.timestamp_start if resp is not None else None), None
        if size:
            told = told_buffered(st.api, transport, resp.get_content(strict=False) or b"")
    started = flow.request.timestamp_start or time.time()
    ended_at = (resp.timestamp_end if resp is not None and flow.error is None else None) or time.time()
    return turnlog.turn_record(
        flow_id=flow.id, api=st.api, transport=transport, path=flow.request.path, key=st.key,
        model=st.ctx.model, started=started, ended_at=ended_at, ended=ended, first_byte_at=first,
        status=resp.status_code if resp is not None else None, verdict=st.verdict, decision=decision,
        resolver=st.resolver, repairer=rep, bytes_in=bytes_in, bytes_out=bytes_out, events=events, error=error,
        client_tokens=told, checker=getattr(st.stream, "checker", None) or st.checker,
        salvaged=s.salvaged if s is not None else None,
    )  # fmt: skip


def told_buffered(api: str, transport: str, body: bytes) -> dict | None:
    """The usage a buffered body tells the client."""
    if transport == "json":
        return usage_of(api, json_object(body))
    r = UsageReader(api)
    r.feed(body + b"\n\n")
    return r.counts
