"""A finished client turn: its facts (:class:`Turn`), how it ended (:func:`ending`), its record.

One turn is one HTTP flow (SSE or JSON) or one ``response.create`` on a WebSocket. The
client leg (:func:`http_turn`) and the WebSocket addon (addons/websocket.py) each fill a
:class:`Turn` and decide how it ended with the same :func:`ending`; :meth:`Turn.record` is
the JSON object the turn log writes (addons/turnlog.py) and the metrics count
(addons/metrics.py), handed to them by :func:`addons.shared.turn_finished`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, is_dataclass
from datetime import UTC, datetime
from typing import Any

from mitmproxy import http
from streamfix.wire.contract import StreamChecker
from streamfix.wire.told import Told
from streamfix.wire.verdict import Decision, Verdict

from .check import JsonCheck
from .flowstream import ORIGINAL, FlowState, FlowStream

REFUSED = "streamfix.refused"
"""Flow metadata: ``draining`` on a request answered 503 while draining (addons/drain.py;
the turn log's ``ended: draining``, never ``upstream_error``: the gateway was never asked)."""

ENDINGS = ("complete", "truncated", "upstream_error", "client_abort", "failed_open", "draining")
"""How a turn ended: the gateway's answer was whole (``complete``), a truncation verdict
(``truncated``), the gateway answered with an HTTP error, its stream stopped without a
terminal event, the connection to it failed or the upstream leg proved the provider's call
failed (``upstream_error``), the client went away (``client_abort``), a repairer error
passed the rest through unrepaired (``failed_open``), the request came while the sidecar
drained after SIGTERM and was answered 503 without asking the gateway (``draining``)."""


def ending(
    *,
    draining: bool = False,
    gone: str | None = None,
    by_client: bool = False,
    failed: BaseException | None = None,
    http_error: bool = False,
    failure: str | None = None,
    decision: Decision | None = None,
) -> tuple[str, str | None]:
    """How a turn ended (one of :data:`ENDINGS`) and the error to record with it, the first
    that holds of: a repairer failed (``failed``: the rest passed through unrepaired, a
    fault of streamfix's, so it is said even when the connection went away too), the
    connection went away before the turn ended (``gone``: what was said of it;
    ``by_client``: the client closed it), the gateway answered with an HTTP error
    (``http_error``), its answer ended as a failure (``failure``: why, ``""`` when there
    is nothing more to say), the verdict says the provider's call failed (the upstream
    leg's proof, not the client leg's own words), the verdict says truncated. A request
    refused while the sidecar drains (``draining``) is that, whatever else holds."""
    if draining:
        return "draining", "refused with 503: the sidecar is draining (SIGTERM); the gateway was not asked"
    if failed is not None:
        return "failed_open", f"{type(failed).__name__}: {failed}"
    if gone is not None:
        return ("client_abort" if by_client else "upstream_error"), gone
    if http_error:
        return "upstream_error", None
    if failure is not None:
        return "upstream_error", failure or None
    if decision is not None and decision.failed and not decision.native:
        return "upstream_error", decision.evidence[0].detail if decision.evidence else None
    if decision is not None and decision.truncated:
        return "truncated", None
    return "complete", None


@dataclass(slots=True)
class Turn:
    """One finished turn's facts, as :meth:`record` reads them.

    ``transport``: ``sse``, ``json`` or ``websocket``; ``path`` as requested (the record
    drops its query); ``key``: :func:`addons.turnlog.client_label`; times are
    ``time.time()`` values; ``ended``/``error``: :func:`ending`'s; ``repairer``: the flow's
    repairer (its ``fired`` and ``changed``), if any; ``told``: what the client was told
    (:class:`wire.told.Told`: usage, ending, response id and model; without its usage the
    verdict's client-leg output count is used), ``said``: what the gateway said (its
    ending); ``server``: the gateway's (host, port); ``checker``: check mode's contract checker (its violations by rule);
    ``salvaged``: bytes addons/salvage.py delivered after the upstream failed mid-body."""

    flow_id: str
    api: str
    transport: str
    path: str
    key: str
    model: str | None
    started: float
    ended_at: float
    ended: str
    error: str | None = None
    first_byte_at: float | None = None
    status: int | None = None
    verdict: Verdict | None = None
    decision: Decision | None = None
    resolver: Any = None  # the correlator's resolver (wire/correlate.py): its record links the two legs
    repairer: Any = None
    bytes_in: int | None = None
    bytes_out: int | None = None
    events: int | None = None
    told: Told | None = None
    said: Told | None = None
    server: tuple[str, int] | None = None
    checker: StreamChecker | JsonCheck | None = None
    salvaged: int | None = None

    def record(self) -> dict[str, Any]:
        """The turn as the JSON object the turn log writes (README, "Turn log and usage")."""
        up = upstream_counts(self.verdict, self.resolver) if self.verdict is not None else None
        rec: dict[str, Any] = {
            "time": iso_time(self.ended_at),
            "flow": self.flow_id,
            "key": self.key,
            "api": self.api,
            "transport": self.transport,
            "path": self.path.split("?", 1)[0],
            "model": self.model,
            "upstream_model": (up or {}).pop("model", None),
            "status": self.status,
            "ended": self.ended,
            "tokens": {
                "client": (self.told.counts if self.told is not None else None)
                or (client_counts(self.verdict) if self.verdict is not None else None),
                "upstream": up,
            },
            "finish": {
                "client": self.told.finish if self.told is not None else None,
                "gateway": self.said.finish if self.said is not None else None,
            },
            "response": {
                "id": self.told.response_id if self.told is not None else None,
                "model": self.told.response_model if self.told is not None else None,
            },
            "max_tokens": getattr(self.verdict, "cap", None),
            "gateway": f"{self.server[0]}:{self.server[1]}" if self.server else None,
            "verdict": verdict_record(self.decision),
            "rules": rules_fired(self.repairer),
            "bytes": {"in": self.bytes_in, "out": self.bytes_out},
            "events": self.events,
            "ttfb_ms": _ms(self.started, self.first_byte_at),
            "duration_ms": _ms(self.started, self.ended_at),
        }
        call = upstream_call(self.resolver)
        if call is not None:
            rec["upstream_call"] = call
        if self.checker is not None:
            counts: dict[str, int] = {}
            for v in self.checker.violations:
                counts[v.rule] = counts.get(v.rule, 0) + 1
            rec["violations"] = counts
        if self.salvaged:
            rec["salvaged"] = self.salvaged
        if self.error:
            rec["error"] = self.error
        return rec


def http_turn(flow: http.HTTPFlow, st: FlowState) -> Turn:
    """A finished (or failed) client HTTP flow's turn."""
    resp = flow.response
    s = st.stream if isinstance(st.stream, FlowStream) else None  # check mode: no repairer
    rep = s.repair.repairer if s is not None else st.repairer
    failed = (s.failed or s.repair.error) if s is not None else getattr(rep, "error", None)
    decision = getattr(rep, "decision", None)
    if decision is None and (s is None or s.repair.parser is None) and flow.error is None:
        decision = st.verdict.decide()  # a JSON body (its repairer decided already) or no repair
    gone = flow.error.msg if flow.error is not None else None
    fault = getattr(rep, "fault", None)
    ended, error = ending(
        draining=flow.metadata.get(REFUSED) == "draining",
        gone=gone,
        by_client=gone is not None and "client" in gone.lower(),
        failed=failed,
        http_error=resp is None or resp.status_code >= 400,
        failure=fault() if fault is not None else None,
        decision=decision,
    )
    told = said = None
    bytes_in: int | None
    bytes_out: int | None
    if s is not None:
        transport, bytes_in, bytes_out, first = "sse", s.repair.bytes_in, s.repair.bytes_out, s.first_at
        events = getattr(s.repair, "events", None)
        told, said = s.told, s.said
    else:
        transport = "json" if resp is None or "json" in resp.headers.get("content-type", "") else "sse"
        size = len(resp.raw_content) if resp is not None and resp.raw_content is not None else None
        bytes_in = bytes_out = size
        original = flow.metadata.get(ORIGINAL)
        if isinstance(original, bytes):
            bytes_in = len(original)
        first, events = (resp.timestamp_start if resp is not None else None), None
        if size and resp is not None:
            told = Told.whole(st.api, resp.get_content(strict=False) or b"", transport == "json")
            said = st.said or told
    started = flow.request.timestamp_start or time.time()
    ended_at = (resp.timestamp_end if resp is not None and flow.error is None else None) or time.time()
    return Turn(
        flow_id=flow.id, api=st.api, transport=transport, path=flow.request.path, key=st.key,
        model=st.ctx.model, started=started, ended_at=ended_at, ended=ended, error=error, first_byte_at=first,
        status=resp.status_code if resp is not None else None, verdict=st.verdict, decision=decision,
        resolver=st.resolver, repairer=rep, bytes_in=bytes_in, bytes_out=bytes_out, events=events,
        told=told, said=said, server=(flow.request.host, flow.request.port), checker=getattr(st.stream, "checker", None) or st.checker,
        salvaged=s.salvaged if s is not None else None,
    )  # fmt: skip


# --- the record's parts -------------------------------------------------------------------


def iso_time(t: float) -> str:
    """A ``time.time()`` value as the record writes it (UTC, milliseconds, ``Z``)."""
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _ms(a: float | None, b: float | None) -> int | None:
    return None if a is None or b is None else max(0, round((b - a) * 1000))


def _counts(obj: Any) -> dict[str, Any] | None:
    if obj is None:
        return None
    d = asdict(obj) if is_dataclass(obj) and not isinstance(obj, type) else dict(obj) if isinstance(obj, dict) else None
    if d is None:
        return None
    return {k: v for k, v in d.items() if v is not None}


def upstream_counts(verdict: Any, resolver: Any = None) -> dict[str, Any] | None:
    """The upstream's token counts for a client turn: ``verdict.upstream_counts`` when the
    verdict has them, else the matched Devin record's usage, else the output count alone."""
    counts = _counts(getattr(verdict, "upstream_counts", None))
    if counts:
        return counts
    rec = getattr(resolver, "record", None)
    usage = getattr(getattr(rec, "result", None), "usage", None)
    if usage is not None:
        return {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cached_tokens": usage.cached_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
            "source": "devin",
        }
    out = getattr(verdict, "upstream_output_tokens", None)
    return {"output_tokens": out, "source": "devin"} if out is not None else None


def upstream_call(resolver: Any) -> dict[str, Any] | None:
    """The provider's call the upstream leg linked to this turn (wire/correlate.py's
    record): provider, flow, its finish as the provider wrote it, start and duration."""
    rec = getattr(resolver, "record", None)
    if rec is None or not hasattr(rec, "flow_id"):
        return None
    result = rec.result
    finish = getattr(result, "finish", None)  # another provider's CallResult
    if finish is None and hasattr(result, "stop_reason_name"):  # Devin's TapResult
        finish = result.stop_reason_name if result.stop_reason else None
    # each result's own word for a failed call: CallResult.outcome, Devin's TapResult.failed
    failed = result.outcome == "failed" if hasattr(result, "outcome") else bool(getattr(result, "failed", False))
    clock = getattr(getattr(resolver, "correlator", None), "clock", time.time)
    shift = time.time() - clock()  # the correlator's clock (monotonic in one process) -> the epoch
    return {
        "provider": rec.provider,
        "flow": rec.flow_id,
        "finish": finish,
        "failed": failed,
        "started": iso_time(rec.started + shift),
        "duration_ms": _ms(rec.started, rec.finished),
    }


def client_counts(verdict: Any) -> dict[str, Any] | None:
    """The token counts the client was told (``verdict.client_counts`` when the verdict
    has them, else the output count it recorded)."""
    counts = _counts(getattr(verdict, "client_counts", None))
    if counts:
        return counts
    out = getattr(verdict, "output_tokens", None)
    return {"output_tokens": out} if out is not None else None


def rules_fired(repairer: Any) -> dict[str, int]:
    """Rule name -> events it changed (``repairer.fired``), else ``{"changed": n}``."""
    fired = getattr(repairer, "fired", None)
    if fired:
        return {str(k): int(v) for k, v in fired.items() if v}
    n = getattr(repairer, "changed", 0)
    return {"changed": n} if n else {}


def verdict_record(decision: Any) -> dict[str, Any] | None:
    if decision is None:
        return None
    return {
        "outcome": decision.outcome,
        "native": decision.native,
        "evidence": [{"source": e.source, "says": e.says, "detail": e.detail} for e in decision.evidence],
    }
