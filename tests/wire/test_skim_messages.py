"""wire/messages.py skims (wire.skim): the same bytes, notes, counts, rules and verdict as
the full path, for every chunking; and it does skim.

The bar is a differential: each stream repaired with skimming on and off (``rep.skim =
None``), compared on everything a receipt, a log or a client sees. Streams: the messages
recordings, the messages bench stream (CPA's three-newline framing: every event's third LF
is a blank-line event of its own, which the messages repairer skims too), and generated
streams whose deltas carry what the skim must decline or decode exactly as orjson does
(escapes, non-ASCII, invalid UTF-8, raw control characters, odd integers, other key
orders, spaces, extra keys, wrong indexes), between block starts and stops, pings,
comments, extra blank lines and re-sent tool_use headers.
"""

from __future__ import annotations

import json
import random
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repairkit import recordings, skim_facts, skim_same
from streamfix.wire.messages import MessagesRepairer
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.stream import StreamRepair
from streamfix.wire.verdict import Verdict

from streamfix import bench

REQ = {"model": "devin/swe-2", "max_tokens": 400, "stream": True, "messages": []}


def repair(
    pieces: list[bytes], skim: bool, rules: Rules | None = None, request: dict | None = REQ
) -> tuple[tuple[Any, ...], int]:
    return skim_facts("messages", pieces, request, skim, rules)


def same(pieces: list[bytes], rules: Rules | None = None, request: dict | None = REQ) -> int:
    """Skimming on and off agree on ``pieces``; the number of events skimmed."""
    return skim_same("messages", pieces, request, rules)


def writes(body: bytes) -> list[bytes]:
    """One write per event as CPA makes them: the event with its blank third LF."""
    out: list[bytes] = []
    for raw in bench.events_of(body):
        if raw == b"\n" and out:
            out[-1] += raw
        else:
            out.append(raw)
    return out


def cut(body: bytes, seed: int, sizes: tuple[int, ...] = (1, 7, 100, 300, 4096, 16384)) -> list[bytes]:
    rng = random.Random(seed)
    out, i = [], 0
    while i < len(body):
        n = rng.choice(sizes)
        out.append(body[i : i + n])
        i += n
    return out


def chunkings(body: bytes) -> dict[str, list[bytes]]:
    return {
        "events": bench.events_of(body),
        "writes": writes(body),
        "whole": [body],
        "random1": cut(body, 1),
        "random2": cut(body, 2, (3, 50, 1000)),
        "16k": [body[i : i + 16384] for i in range(0, len(body), 16384)],
    }


BENCH = bench.devin_messages_stream()
SMALL = bench.devin_messages_stream(calls=(60, 30), reasoning=15, text=20, seed=5)


# --- (a) recordings and the bench stream -----------------------------------------------------
@pytest.mark.parametrize("rec", [r for r in recordings("messages") if r.streaming], ids=lambda r: r.name)
def test_recordings_skim_as_they_repair(rec):
    req = rec.request.get("body")
    for pieces in chunkings(rec.body).values():
        same(pieces, request=req)


@pytest.mark.parametrize("how", ["events", "writes", "whole", "random1", "random2", "16k"])
def test_bench_stream_skims_as_it_repairs(how):
    skimmed = same(chunkings(BENCH)[how])
    if how != "whole":  # one read: the layouts are learned in it, nothing left to skim
        assert skimmed > 4000, skimmed


@pytest.mark.parametrize(
    "rules",
    [Rules(), Rules(tool_header=False), Rules(truncation="off")],
    ids=["default", "no-tool-header", "no-truncation"],
)
def test_small_bench_stream_byte_by_byte_and_two_newlines(rules):
    """Every cut (one byte a read), and the same stream in the usual two-newline framing.
    One byte a read, no delta is ever whole in a read, but the read that ends one
    completes the event the parser holds: it is skimmed as the same event read whole
    would be, so exactly the events skimmed one per read are, deltas too, not only the
    third LFs (each read alone, between events)."""
    evs = bench.events_of(SMALL)
    blanks = evs.count(b"\n")
    assert blanks > 100
    skimmed = same([SMALL[i : i + 1] for i in range(len(SMALL))], rules)
    assert skimmed == same(evs, rules)
    assert skimmed > blanks + 100
    two = SMALL.replace(b"\n\n\n", b"\n\n")
    for pieces in chunkings(two).values():
        same(pieces, rules)
    assert same(bench.events_of(two), rules) > 100


def test_truncated_bench_stream_skims_as_it_repairs():
    """Devin stopped on its budget inside the last call (its last argument deltas never
    came, usage at the cap): the verdict turns tool_use into max_tokens, on the evidence
    the skimmed deltas gave (the call's arguments are not whole JSON)."""
    evs = bench.events_of(BENCH)
    last_stop = max(i for i, e in enumerate(evs) if e.startswith(b"event: content_block_stop"))
    cut_evs = evs[: last_stop - 6] + evs[last_stop:]  # three deltas and their blank lines
    assert cut_evs[last_stop - 8].startswith(b"event: content_block_delta")
    md = next(orjson.loads(e.split(b"data: ", 1)[1]) for e in evs if e.startswith(b"event: message_delta"))
    req = dict(REQ, max_tokens=md["usage"]["output_tokens"])
    on, skimmed = repair(cut_evs, True, request=req)
    off, _ = repair(cut_evs, False, request=req)
    assert on == off and skimmed > 4000
    assert b'"stop_reason":"max_tokens"' in on[0] and b'"stop_reason":"tool_use"' not in on[0]
    assert on[3] == {"truncation": 1}


# --- (c) it skims -----------------------------------------------------------------------------
def test_the_bench_stream_is_mostly_skimmed():
    """The deltas and their blank lines are skimmed, in one-event writes and in CPA's
    writes (event and third LF in one read); the full path still sees the rest."""
    for pieces in (bench.events_of(BENCH), writes(BENCH)):
        v = Verdict()
        v.request(REQ)
        rep = MessagesRepairer(Rules(), FlowContext(request=REQ), v)
        s = StreamRepair(rep)
        for c in pieces:
            s.feed(c)
        s.close()
        assert s.error is None
        assert s.skimmed > s.events // 3, (s.skimmed, s.events)
        assert s.skimmed < s.events  # starts, stops, the first delta of each layout: parsed


def test_a_skimmed_delta_is_evidence_like_a_parsed_one():
    """The skimmed text and arguments reach the verdict: the digest equals the full
    path's and is not the empty one."""
    on, _ = repair(bench.events_of(BENCH), True)
    empty = Verdict().digest()
    assert on[5] != empty and on[5][1] > 1000 and on[5][3] > 1000


@pytest.mark.parametrize("skim", [True, False], ids=["skim", "no-skim"])
def test_a_skimmed_event_is_not_parsed(monkeypatch, skim):
    """What skimming removes: the event's JSON parse. Every data event is parsed once
    (``orjson.loads`` of its data) except the skimmed deltas, none of them (an escaped
    string of one is decoded alone, by orjson: a string, not an event's object)."""
    real = orjson.loads
    parsed: list[bytes] = []

    def counting(data):
        if isinstance(data, bytes) and data[:1] == b"{":
            parsed.append(data)
        return real(data)

    monkeypatch.setattr(orjson, "loads", counting)
    pieces = writes(BENCH)
    v = Verdict()
    v.request(REQ)
    rep = MessagesRepairer(Rules(), FlowContext(request=REQ), v)
    if not skim:
        rep.skim = None
    s = StreamRepair(rep)
    for c in pieces:
        s.feed(c)
    s.close()
    evs = bench.events_of(BENCH)
    data_events = sum(1 for e in evs if b"\ndata: " in e)
    blanks = evs.count(b"\n")
    assert s.error is None and s.events == len(evs)
    assert parsed, "the count saw no parse: orjson.loads was not the one the repairer calls"
    if skim:
        # parsed: every event but the deltas, and the first delta of each of the three
        # layouts (thinking, text, arguments), which teaches it; skimmed: the other deltas
        # and the blank lines but the two read with the first content_block_start and the
        # first delta (no layout learned yet: those reads go whole); the stream's first
        # read goes event by event, so message_start's blank line is skimmed
        deltas = sum(1 for e in evs if e.startswith(b"event: content_block_delta"))
        assert deltas > 2000
        assert len(parsed) == data_events - deltas + 3
        assert s.skimmed == deltas - 3 + blanks - 2
    else:
        assert s.skimmed == 0 and len(parsed) == data_events


# --- (b) generated streams --------------------------------------------------------------------
_TRICKY = st.sampled_from(
    ["<", "/", '"', "\\", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "€", "😀", "\u2028", "\ufeff", " ", "a"]
)
TEXT = st.text(alphabet=_TRICKY | st.characters(codec="utf-8"), max_size=12)
STYLES = ["plain"] * 6 + [
    "escape",
    "ascii",
    "reorder",
    "spaces",
    "badutf8",
    "ctrl",
    "surrogate",
    "extra",
    "badextra",
    "index",
]
ODD_INTS = [b"01", b"-0", b"1.0", b"1e0", b"true", b"null", b'"1"', b"99999999999999999999", b"-1"]
_KEYS = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "input_json_delta": "partial_json",
    "signature_delta": "signature",
}
_DELTA_FOR = {"text": "text_delta", "thinking": "thinking_delta", "tool_use": "input_json_delta"}


def _frame(data: bytes, name: str | None, nl: int) -> bytes:
    head = b"event: " + name.encode() + b"\n" if name is not None else b""
    return head + b"data: " + data + b"\n" * nl


def delta_data(index: int, t: str, value: str, style: str, odd: bytes, extra: str) -> bytes:
    """A content_block_delta's data in one of the ways a gateway may write it."""
    key = _KEYS[t]
    obj: dict[str, Any] = {"type": "content_block_delta", "index": index, "delta": {"type": t, key: value}}
    plain = orjson.dumps(obj)
    head = b'{"type":"content_block_delta","index":%d,"delta":{"type":"%s","%s":"' % (index, t.encode(), key.encode())
    if style == "escape":  # escapes orjson does not write: \u003c for <, \/ for /
        return plain.replace(b"<", b"\\u003c").replace(b"/", b"\\/")
    if style == "ascii":
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode()
    if style == "reorder":
        return orjson.dumps({"index": index, "delta": {key: value, "type": t}, "type": "content_block_delta"})
    if style == "spaces":
        return json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if style == "badutf8":
        return head + orjson.dumps(value)[1:-1] + b"\xff\xc3(" + b'"}}'
    if style == "ctrl":
        return head + b"a\x01b" + b'"}}'
    if style == "surrogate":
        return head + b"x\\ud800y" + b'"}}'
    if style == "extra":
        return orjson.dumps(dict(obj, usage={"note": extra, "n": 7}))
    if style == "badextra":  # "extra"'s layout, its other string not UTF-8
        return orjson.dumps(dict(obj, usage={"note": extra, "n": 7})).replace(b'","n":7}', b'\xfe","n":7}')
    if style == "index":
        return plain.replace(b'"index":%d' % index, b'"index":' + odd, 1)
    return plain


@st.composite
def streams(draw: Any) -> bytes:
    nl = draw(st.sampled_from([3, 3, 2]))  # CPA's three newlines, or the usual two
    named = draw(st.booleans()) or nl == 3  # event: lines (CPA writes them)
    out: list[bytes] = []

    def emit(obj: dict[str, Any] | bytes, name: str | None = None) -> None:
        data = obj if isinstance(obj, bytes) else orjson.dumps(obj)
        if name is None and not isinstance(obj, bytes):
            name = obj["type"]
        out.append(_frame(data, name if named else None, nl))

    emit(
        {
            "type": "message_start",
            "message": {
                "id": "interaction_1",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": "devin/swe-2",
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 5, "output_tokens": 0},
            },
        }
    )
    raw = -1  # the raw index of the last start
    btype = "text"
    tool_id = "write_file_0#a1"
    for _ in range(draw(st.integers(1, 4))):
        raw += 1
        btype = draw(st.sampled_from(["text", "thinking", "tool_use"]))
        cb: dict[str, Any] = {
            "type": btype,
            btype if btype != "tool_use" else "input": "" if btype != "tool_use" else {},
        }
        if btype == "tool_use":
            tool_id = draw(st.sampled_from(["write_file_0#a1", "toolu_interactions", "read_1#b"]))
            cb = {
                "type": "tool_use",
                "id": tool_id,
                "name": draw(st.sampled_from(["write_file", "", " "])),
                "input": {},
            }
        emit({"type": "content_block_start", "index": raw, "content_block": cb})
        for _ in range(draw(st.integers(0, 14))):
            op = draw(st.sampled_from(["delta"] * 8 + ["ping", "blank", "comment", "resend", "other-delta"]))
            if op == "ping":
                emit({"type": "ping"})
            elif op == "blank":
                out.append(b"\n" * draw(st.integers(1, 3)))
            elif op == "comment":
                out.append(b": keep-alive\n\n")
            elif op == "resend" and btype == "tool_use":  # CPA's re-sent header: stop, start again
                emit({"type": "content_block_stop", "index": raw})
                raw += 1
                emit(
                    {
                        "type": "content_block_start",
                        "index": raw,
                        "content_block": {
                            "type": "tool_use",
                            "id": draw(st.sampled_from([tool_id, "write_file_0#z9"])),
                            "name": "write_file",
                            "input": {},
                        },
                    }
                )
            else:
                t = _DELTA_FOR[btype] if op == "delta" else draw(st.sampled_from(sorted(_KEYS)))
                index = raw + draw(st.sampled_from([0] * 12 + [-1, 1, 5]))
                style = draw(st.sampled_from(STYLES))
                data = delta_data(index, t, draw(TEXT), style, draw(st.sampled_from(ODD_INTS)), draw(TEXT))
                emit(data, "content_block_delta")
        if draw(st.integers(0, 5)):
            emit({"type": "content_block_stop", "index": raw})
    ending = draw(st.sampled_from(["end", "end", "cut", "error"]))
    if ending == "error":
        emit({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    elif ending == "end":
        emit(
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": draw(st.sampled_from(["tool_use", "end_turn", "max_tokens"])),
                    "stop_sequence": None,
                },
                "usage": {"input_tokens": 5, "output_tokens": draw(st.integers(0, 500))},
            }
        )
        emit({"type": "message_stop"})
    return b"".join(out)


_SKIMMED: list[int] = []


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    streams(),
    st.lists(st.integers(min_value=0, max_value=4000), max_size=10),
    st.sampled_from([400, 20]),
    st.booleans(),
)
def _generated(body: bytes, cuts: list[int], cap: int, tool_header: bool) -> None:
    rules = Rules(tool_header=tool_header)
    req = dict(REQ, max_tokens=cap)
    pieces, last = [], 0
    for c in sorted({c for c in cuts if c < len(body)}):
        pieces.append(body[last:c])
        last = c
    pieces.append(body[last:])
    for p in (bench.events_of(body), writes(body), [body], pieces):
        _SKIMMED.append(same(p, rules, req))


def test_generated_streams_skim_as_they_repair():
    _SKIMMED.clear()
    _generated()
    # the generator reaches the skimmed path (else this test would compare two full paths)
    assert sum(1 for n in _SKIMMED if n) > len(_SKIMMED) // 10, (sum(_SKIMMED), len(_SKIMMED))


SKIMMABLE = ("escape", "ascii")
"""The tricky styles a layout learned just before matches and the skim decodes (escapes,
by orjson); the others are declined: no match (an extra key's value is literal in the
layout, so a new value is another layout; spaces,
other key order, raw control characters, integers orjson reads otherwise or not at all),
or a string that does not decode (invalid UTF-8, a lone surrogate escape)."""


@pytest.mark.parametrize("style", STYLES[6:])
def test_each_tricky_delta_after_a_learned_layout(style):
    """Each way of writing a delta, right after plain deltas taught the layout: the same
    as the full path, and skimmed exactly when it is compact JSON in the learned layout
    whose strings decode (else declined: the full path parses it, or notes bad JSON)."""
    values = ["<a/>", 'q"\\', "é😀", "\u2028", ""]
    for value in values:
        for t, btype in (("text_delta", "text"), ("input_json_delta", "tool_use"), ("thinking_delta", "thinking")):
            cb = (
                {"type": "tool_use", "id": "w#1", "name": "write_file", "input": {}}
                if btype == "tool_use"
                else {"type": btype, btype: ""}
            )
            evs = [
                _frame(
                    orjson.dumps({"type": "content_block_start", "index": 0, "content_block": cb}),
                    "content_block_start",
                    3,
                )
            ]
            taught = "extra" if style in ("extra", "badextra") else "plain"  # the layout learned first
            evs += [_frame(delta_data(0, t, "ab", taught, b"", "x"), "content_block_delta", 3)] * 3
            evs.append(_frame(delta_data(0, t, value, style, b"01", value), "content_block_delta", 3))
            evs.append(_frame(delta_data(0, t, value, taught, b"", "x"), "content_block_delta", 3))
            evs.append(_frame(orjson.dumps({"type": "content_block_stop", "index": 0}), "content_block_stop", 3))
            body = b"".join(evs)
            # skimmed: the blank lines after the first delta (6; not the one after a tool_use
            # block's stop, which is held, its input not yet whole JSON: the blank line
            # queues behind it), the plain deltas after the first (3), and the tricky one
            # if it is skimmable
            blanks = 5 if btype == "tool_use" else 6
            assert same(bench.events_of(body)) == blanks + 3 + (style in SKIMMABLE), (value, t)
            same(writes(body))
