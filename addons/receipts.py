"""Receipts: what the client leg says about a flow, in the log and the flow's comment.

A repaired flow's receipt is its verdict first, then the rules that fired with how many
events each changed; the evidence and the linked upstream flow follow on lines of their
own (mitmweb's comment column shows the first line). Log lines name the method and path,
never the query string, headers or content.

A finished flow gets one log line: its receipt (the comment's lines joined by ``; ``) and
the repairer's notes after it, or the notes alone when nothing was changed; the comment
has the same lines, one each, so mitmweb says why as the log does. Every line
an addon logs costs mitmproxy a format, a write and an ``add_log`` hook through every
addon (about 800,000 instructions each, measured: docs/benchmarks.md), so a flow's
notes are not a line each.
"""

from __future__ import annotations

import logging
from collections import Counter

from mitmproxy import flow as mflow
from mitmproxy import http
from streamfix.wire.stream import EventRepairer

from . import links

logger = logging.getLogger("streamfix")


def where(flow: http.HTTPFlow) -> str:
    """Method and path without the query (Gemini keys can ride in ?key=)."""
    return f"{flow.request.method} {flow.request.path.split('?', 1)[0]}"


def comment(flow: mflow.Flow, line: str) -> None:
    """Add one line to the flow's comment (mitmweb shows the first in its list)."""
    flow.comment = f"{flow.comment}\n{line}" if flow.comment else line


def receipt(
    api: str, rep: EventRepairer | None, decision, truncation: str, body_fired: Counter[str] | None = None
) -> tuple[str, str]:
    """The receipt's first line (verdict, rules fired with counts) and its evidence; for
    a JSON body (no ``rep``) the rules that changed it (``body_fired``), once each."""
    head = ""
    why = ""
    if (
        decision is not None
        and not decision.native
        and ((decision.truncated and truncation != "off") or decision.failed)
    ):
        head = f"verdict {decision.outcome}; "
        why = "; ".join(f"{e.source}: {e.detail}" for e in decision.evidence) or "no evidence"
    if rep is None:
        rules = ", ".join(sorted(body_fired or ()))
        return f"{head}fixed {rules or 'the body'} (body, {api})", why
    fired = ", ".join(f"{rule} {n}" for rule, n in rep.fired.most_common())
    events = f"{rep.changed} event{'s' if rep.changed != 1 else ''}"
    return (f"{head}fixed {fired} ({events}, {api})" if fired else f"{head}fixed {events} ({api})"), why


def log_line(lines: list[str], notes: list[str]) -> str:
    """One log line of a receipt's ``lines`` and the repairer's ``notes``."""
    return "; ".join(lines + notes)


def write(
    flow: http.HTTPFlow,
    st,
    rep: EventRepairer | None,
    changed: bool,
    truncation: str,
    fired: Counter[str] | None = None,
    notes: list[str] | None = None,
) -> bool:
    """Write a finished flow's receipt (one log line with ``notes`` after it, comment
    lines, the 🔧 mark) and link it to its upstream flow. ``st`` is its
    :class:`addons.flowstream.FlowState`. Returns whether the flow was repaired."""
    notes = notes or []
    upstream, other = links.link_upstream(flow, st.resolver)
    if other is not None:
        comment(other, f"client flow {flow.id}")
        links.updated(other)
    if not changed:
        if upstream is not None:
            comment(flow, f"upstream flow {upstream}")
        if notes:
            logger.info(f"streamfix: {where(flow)}: {log_line([], notes)}")
            for note in notes:
                comment(flow, note)
        return False
    flow.marked = ":wrench:"
    # stream repairers keep their Decision; for a JSON body ask the verdict
    decision = getattr(rep, "decision", None) if rep is not None else st.verdict.decide()
    head, why = receipt(st.api, rep, decision, truncation, fired)
    lines = [head] + ([f"why: {why}"] if why else []) + ([f"upstream flow {upstream}"] if upstream else [])
    if st.verdict.upstream_counts is not None:  # the usage the fill used, with Devin's model
        lines.append(st.verdict.upstream_counts.detail())
    text = log_line(lines, notes)
    if why:
        logger.warning(f"streamfix: {where(flow)}: {text}")
    else:
        logger.info(f"streamfix: {where(flow)}: {text}")
    for line in lines + notes:  # the comment says all the log line says, a line each
        comment(flow, line)
    return True


def report(flow: http.HTTPFlow, st, rep: EventRepairer, err: BaseException | None, truncation: str) -> str:
    """A finished stream's notes and receipt, or the line saying its repairer failed and
    the rest passed through (one log line each, the repairer's notes in it). Returns
    ``"failed"``, ``"repaired"`` or ``""``."""
    if err is not None:
        msg = f"repairer failed ({type(err).__name__}: {err}); rest of the flow passed through unchanged"
        logger.error(f"streamfix: {where(flow)}: {log_line([msg], rep.notes)}")
        comment(flow, f"streamfix: {msg}")
        return "failed"
    return "repaired" if write(flow, st, rep, rep.changed > 0, truncation, notes=rep.notes) else ""


def why_ended(flow: http.HTTPFlow) -> str:
    msg = flow.error.msg if flow.error is not None else ""
    low = msg.lower()
    if "client" in low:
        return f"client aborted ({msg})"
    if low == mflow.Error.KILLED_MESSAGE.lower():
        return "killed in the proxy"
    return f"upstream reset ({msg})" if msg else "upstream reset"


def log_undelivered(flow: http.HTTPFlow, s) -> list[str]:
    """A streamed flow that failed (upstream reset or closed mid-body): mitmproxy 12.3.1
    sends the client the error without a last call of the stream callable
    (``proxy/layers/http/__init__.py`` ``HttpStream.handle_protocol_error``: the error hook,
    then ``SendHttp(ResponseProtocolError)``, which closes an HTTP/1 client connection).
    ``addons/salvage.py`` sends what the repairer still held first: say so; with
    ``streamfix_salvage=false`` say how much was not delivered, so it is not silent.
    ``s`` is the flow's :class:`addons.flowstream.FlowStream`. Returns those lines for the
    flow's comment."""
    lines: list[str] = []
    if s.salvaged:
        err = flow.error.msg if flow.error is not None else "flow failed"
        said = (
            f"{s.salvaged} bytes the repair still held (held events, repaired as far as a cut stream "
            "allows; an unfinished event, as it came) sent before the connection closed"
        )
        logger.info(f"streamfix: {where(flow)}: {err}; {said}")
        lines.append(said)
    events, held, partial = s.repair.undelivered()
    if held or partial:
        err = flow.error.msg if flow.error is not None else "flow failed"
        said = (
            f"not delivered: {events} held event(s) ({held} bytes) and {partial} bytes of an unfinished "
            "event (mitmproxy ends a failed stream without a last call to the stream callable)"
        )
        logger.warning(f"streamfix: {where(flow)}: {err}; {said}")
        lines.append(said)
    return lines
