"""Buffered bodies: a JSON response, or a whole SSE body mitmproxy already holds (replay,
``mitmdump -nr``, ``--server-replay``, mitmweb with streaming off), repaired or checked in
one piece by the same repairers the streams use."""

from __future__ import annotations

import logging
from collections import Counter

import orjson
from mitmproxy import http
from mitmproxy.net.http import status_codes
from streamfix.wire.apis import json_repairer, stream_repairer
from streamfix.wire.rules import Rules
from streamfix.wire.stream import StreamRepair
from streamfix.wire.told import Told
from streamfix.wire.upstream_terminal import json_failure

from . import check as checkmode
from . import receipts, shared
from .flowstream import ORIGINAL, BodyRepair, FlowState

logger = logging.getLogger("streamfix")

SSE = "text/event-stream"


def json_object(content: bytes | None) -> dict | None:
    """``content`` parsed as a JSON object, or None."""
    if not content:
        return None
    try:
        obj = orjson.loads(content)
    except orjson.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def repair(flow: http.HTTPFlow, st: FlowState, rules: Rules, keep: bool) -> str:
    """Repair the flow's buffered body in place. Returns ``"failed"``, ``"repaired"`` or
    ``""`` (nothing to do or nothing changed)."""
    resp = flow.response
    assert resp is not None
    if resp.raw_content is None or resp.status_code >= 400:
        return ""
    ctype = resp.headers.get("content-type", "").lower()
    try:
        content = resp.get_content(strict=True)
    except ValueError as e:
        logger.warning(f"streamfix: {receipts.where(flow)}: cannot decode body ({e}); unchanged")
        return ""
    if content is None:
        return ""
    try:
        told = shared.has_turn_sinks()
        if told and ctype.startswith(SSE):
            st.said = Told.whole(st.api, content, False)
        if ctype.startswith(SSE):
            s = StreamRepair(stream_repairer(st.api, rules, st.ctx, st.verdict))
            st.repairer = s.repairer
            out = s.feed(content) + s.close()
            outcome = receipts.report(flow, st, s.repairer, s.error, rules.truncation)
            if out != content:
                if keep:
                    flow.metadata[ORIGINAL] = content
                resp.content = out
            return outcome
        if "json" in ctype:
            obj = json_object(content)
            if obj is None:
                return ""
            if told:  # what the gateway said, read before the repair changes the object
                st.said = Told(st.api)
                st.said.read(obj)
            fired: Counter[str] = Counter()
            st.repairer = body = BodyRepair(fired)  # what the turn log reads of a repairer

            changed = json_repairer(st.api)(obj, rules, st.ctx, st.verdict, fired=fired)
            d = st.verdict.decide()
            if d.failed and not d.native and rules.upstream_failure:
                # the upstream leg: the provider's call failed; the API's error, HTTP 502
                status, err = json_failure(st.api, d.evidence[0].detail if d.evidence else "failed")
                fired["upstream_failure"] += 1
                body.changed = 1
                if keep:
                    flow.metadata[ORIGINAL] = content
                _set_status(resp, status)
                resp.content = orjson.dumps(err)
                return "repaired" if receipts.write(flow, st, None, True, rules.truncation, fired) else ""
            if changed:
                body.changed = 1
                if keep:
                    flow.metadata[ORIGINAL] = content
                if fired["hidden_failure"] and isinstance(obj.get("error"), dict):
                    _set_status(resp, 502)  # a success-shaped body for no answer became the error it was
                resp.content = orjson.dumps(obj)
                return "repaired" if receipts.write(flow, st, None, True, rules.truncation, fired) else ""
    except Exception as e:  # noqa: BLE001 - fail open: the body goes out as it came
        logger.error(f"streamfix: {receipts.where(flow)}: repair failed ({type(e).__name__}: {e}); body unchanged")
        return "failed"
    return ""


def check(flow: http.HTTPFlow, st: FlowState) -> bool | None:
    """Check mode on a buffered body. Returns whether it had violations, or None when
    nothing was checked."""
    resp = flow.response
    if resp is None or resp.raw_content is None:
        return None
    ctype = resp.headers.get("content-type", "").lower()
    if "json" in ctype and resp.status_code < 400:  # a non-streamed response: the JSON contract
        j = checkmode.check_json_body(flow, st.api, st.ctx.request)
        if j is None:
            return None
        st.checker = j
        return checkmode.report(flow, st.api, j) > 0
    if not ctype.startswith(SSE):
        logger.info(
            f"streamfix: {receipts.where(flow)}: check mode checks event streams and JSON bodies; this body is neither"
        )
        return None
    c = checkmode.check_buffered(flow, st.api)
    if c is None:
        return None
    st.checker = c
    return checkmode.report(flow, st.api, c) > 0


def _set_status(resp: http.Response, status: int) -> None:
    """A new status with its own reason phrase (HTTP/1 would say ``502 OK`` otherwise)."""
    resp.status_code = status
    resp.reason = status_codes.RESPONSES.get(status, "")
