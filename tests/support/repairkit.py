"""Shared helpers for the per-API repairer tests (chat, messages, gemini)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.stream import EventRepairer, StreamRepair
from streamfix.wire.verdict import Verdict

from streamfix.recordings import Recording, all_recordings


def make(
    cls: type, request: dict | None = None, rules: Rules | None = None, verdict: Verdict | None = None
) -> EventRepairer:
    v = verdict if verdict is not None else Verdict()
    v.request(request)
    return cls(rules or Rules(), FlowContext(request=request), v)


def run(
    cls: type,
    body: bytes,
    request: dict | None = None,
    rules: Rules | None = None,
    verdict: Verdict | None = None,
    cuts: list[int] | None = None,
) -> tuple[bytes, Any]:
    """Repair ``body`` fed in pieces cut at ``cuts``; returns (output, repairer)."""
    rep = make(cls, request, rules, verdict)
    s = StreamRepair(rep)
    out, last = [], 0
    for c in sorted(set(cuts or [])):
        out.append(s.feed(body[last:c]))
        last = c
    out.append(s.feed(body[last:]))
    out.append(s.close())
    assert s.error is None, s.error
    return b"".join(out), rep


def recordings(api: str) -> list[Recording]:
    return [r for r in all_recordings() if r.api == api]


def repair_recording(
    rec: Recording,
    cls: type,
    json_fn: Callable,
    body: bytes | None = None,
    rules: Rules | None = None,
    cuts: list[int] | None = None,
) -> bytes:
    """The recording's body repaired the way the addon does it (stream or JSON)."""
    body = rec.body if body is None else body
    req = rec.request.get("body")
    if rec.streaming:
        out, _ = run(cls, body, req, rules, cuts=cuts)
        return out
    obj = orjson.loads(body)
    v = Verdict()
    v.request(req)
    changed = json_fn(obj, rules or Rules(), FlowContext(request=req), v)
    return orjson.dumps(obj) if changed else body


def chunking_property(rec: Recording, cls: type, json_fn: Callable) -> Callable:
    """A hypothesis test: any chunking of the recording gives the same output as one chunk."""
    whole = repair_recording(rec, cls, json_fn)

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.integers(min_value=0, max_value=len(rec.body)), max_size=12))
    def prop(cuts: list[int]) -> None:
        assert repair_recording(rec, cls, json_fn, cuts=cuts) == whole

    return prop


def sse(*objs: Any, eol: bytes = b"\n") -> bytes:
    """``data:`` events from JSON-able objects (bytes are used as the data verbatim)."""
    out = []
    for o in objs:
        data = o if isinstance(o, bytes) else orjson.dumps(o)
        out.append(b"data: " + data + eol + eol)
    return b"".join(out)


def events(body: bytes) -> list[Any]:
    """The data of each event in a body: parsed JSON, or the raw bytes if not JSON."""
    out = []
    body = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n")  # SSE line ends: CRLF, CR, LF
    for block in body.split(b"\n\n"):
        for line in block.split(b"\n"):
            if line.startswith(b"data: "):
                d = line[6:]
                try:
                    out.append(orjson.loads(d))
                except orjson.JSONDecodeError:
                    out.append(d)
    return out


def error_cuts(rec: Recording, cls: type, error: bytes, terminals: Callable[[bytes], int]) -> None:
    """Cut the recording after every event, append an upstream error: the output must end
    with the error and hold no more terminal markers than the input prefix did."""
    from streamfix.wire.sse import SseParser

    p = SseParser()
    raws = [e.raw for e in p.feed(rec.body) + p.close()]
    for k in range(len(raws) + 1):
        body = b"".join(raws[:k]) + error
        out, _rep = run(cls, body, rec.request.get("body"))
        assert out.endswith(error), (rec.name, k)
        # (fewer where a rule drops the gateway's false success before its error: rule
        # hidden_failure's message_stop without message_delta, finish_reason's early STOP)
        assert terminals(out) <= terminals(body), (rec.name, k)
        assert len(out) >= len(error)


def cut(body: bytes, cuts: list[int]) -> list[bytes]:
    """``body`` cut at the offsets in ``cuts`` (any order, repeats and ends allowed), no
    empty piece."""
    pieces, last = [], 0
    for c in sorted(set(cuts)):
        if last < c < len(body):
            pieces.append(body[last:c])
            last = c
    pieces.append(body[last:])
    return [p for p in pieces if p]


def skim_facts(
    api: str, pieces: list[bytes], request: Any, skim: bool, rules: Rules | None = None
) -> tuple[tuple[Any, ...], int]:
    """Everything a repair of ``pieces`` shows that skimming (wire.skim) could change:
    bytes, notes, counts, fired rules, decision, the verdict's digest, events, error,
    what is undelivered, the fault; and how many events were skimmed."""
    from streamfix.wire.apis import stream_repairer

    v = Verdict()
    v.request(request)
    rep = stream_repairer(api, rules or Rules(), FlowContext(model="m", started_at=1700000000, request=request), v)
    if not skim:
        rep.skim = None
    s = StreamRepair(rep)
    out = b"".join([s.feed(c) for c in pieces] + [s.close()])
    facts = (
        out,
        list(rep.notes),
        rep.changed,
        dict(rep.fired),
        repr(getattr(rep, "decision", None)),
        v.digest(),
        s.events,
        repr(s.error),
        s.undelivered(),
        rep.fault() if hasattr(rep, "fault") else None,
    )
    return facts, s.skimmed


def skim_same(api: str, pieces: list[bytes], request: Any, rules: Rules | None = None) -> int:
    """Skimming on and off give the same repair of ``pieces``; how many events were skimmed."""
    on, skimmed = skim_facts(api, pieces, request, True, rules)
    off, none = skim_facts(api, pieces, request, False, rules)
    assert none == 0
    assert on[0] == off[0], "skimmed bytes differ"
    assert on[1:] == off[1:]
    return skimmed
