"""Skimming (wire.skim): learned layouts read events without a JSON parse, and the repair
is the same with skimming on and off, byte for byte, with the same notes, counts, fired
rules and verdict, in any chunking.

The expected bytes of a rewritten event are built here from ``orjson.dumps`` of the
changed object (what the full path writes), never by the skim code itself.
"""

from __future__ import annotations

import random

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repairkit import cut, skim_same
from streamfix.wire.apis import stream_repairer
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.skim import MAX_LAYOUTS, MAX_MISSES, MAX_UNUSED, Skim
from streamfix.wire.sse import SseParser
from streamfix.wire.stream import EventRepairer, StreamRepair
from streamfix.wire.verdict import Verdict

from streamfix import bench
from streamfix.recordings import all_recordings

TEXT = "response.output_text.delta"
HOLES = frozenset({("sequence_number",), ("delta",)})


def framed(obj: dict, event: str | None = TEXT) -> bytes:
    head = b"event: " + event.encode() + b"\n" if event is not None else b""
    return head + b"data: " + orjson.dumps(obj) + b"\n\n"


def delta(seq: int, text: str, item: str = "msg_1", **extra) -> dict:
    return {
        "type": TEXT,
        "sequence_number": seq,
        "item_id": item,
        "output_index": 0,
        "content_index": 0,
        "delta": text,
        "logprobs": [],
        **extra,
    }


def learned(obj: dict, event: str | None = TEXT, holes=HOLES) -> Skim:
    skim = Skim()
    raw = framed(obj, event)
    p = SseParser()
    (ev,) = p.feed(raw)
    assert skim.learn(TEXT, ev.raw, ev.data, ev.event, orjson.loads(ev.data), holes) is not None
    return skim


# --- layouts ----------------------------------------------------------------------------


def test_a_layout_matches_the_next_delta_and_reads_its_values():
    skim = learned(delta(5, " the"))
    raw = framed(delta(6, ' a "quoted" <tag> é \\ end\n'))
    s = skim.match(raw, 0)
    assert s is not None and s.raw == raw
    layout = s.layout
    assert layout.consts[("item_id",)] == "msg_1" and layout.consts[("output_index",)] == 0
    assert s.number(layout.slot("sequence_number")) == 6
    assert s.text(layout.slot("delta")) == ' a "quoted" <tag> é \\ end\n'


@pytest.mark.parametrize(
    "data",
    [
        (
            '{"type":"response.output_text.delta","sequence_number":7,"item_id":"msg_1","output_index":0,'
            '"content_index":0,"delta":"\\u003cdiv\\u003e \\/ \\"x\\" \\n é \\u00e9","logprobs":[]}'
        ),
        (
            '{"type":"response.output_text.delta","sequence_number":7,"item_id":"msg_1","output_index":0,'
            '"content_index":0,"delta":"{\\"path\\": \\"a\\\\b\\"}\\n\\t\\r\\b\\f \x7f \u2028 é","logprobs":[]}'
        ),
        (
            '{"type":"response.output_text.delta","sequence_number":7,"item_id":"msg_1","output_index":0,'
            '"content_index":0,"delta":"\\\\u0041 \\\\/ \\u0001 \\u001F \\u000a","logprobs":[]}'
        ),
        (
            '{"type":"response.output_text.delta","sequence_number":7,"item_id":"msg_1","output_index":0,'
            '"content_index":0,"delta":"plain text","logprobs":[]}'
        ),
        (
            '{"type":"response.output_text.delta","sequence_number":7,"item_id":"msg_1","output_index":0,'
            '"content_index":0,"delta":"","logprobs":[]}'
        ),
    ],
)
def test_a_renumbered_event_is_what_orjson_writes_of_the_changed_object(data):
    skim = learned(delta(5, " the"))
    raw = b"event: " + TEXT.encode() + b"\ndata: " + data.encode() + b"\n\n"
    s = skim.match(raw, 0)
    assert s is not None
    slot = s.layout.slot("sequence_number")
    obj = orjson.loads(data)
    obj["sequence_number"] = 123
    want = framed(obj)
    dslot = s.layout.slot("delta")
    assert s.render(slot, 123) == want
    assert s.render(slot, 123, dslot, s.text(dslot)) == want


def test_layouts_are_per_shape_and_bounded():
    skim = learned(delta(5, " the"))
    # another item id: literal in the layout, so not this layout
    assert skim.match(framed(delta(6, "x", item="msg_2")), 0) is None
    # keys in another order, an extra key, no event line: not this layout
    reordered = {
        "type": TEXT,
        "item_id": "msg_1",
        "sequence_number": 6,
        "output_index": 0,
        "content_index": 0,
        "delta": "x",
        "logprobs": [],
    }
    assert skim.match(framed(reordered), 0) is None
    assert skim.match(framed(delta(6, "x", obfuscation="ab")), 0) is None
    assert skim.match(framed(delta(6, "x"), event=None), 0) is None
    for i in range(MAX_LAYOUTS + 3):
        obj = delta(6, "x", item=f"msg_{i + 10}")
        raw = framed(obj)
        assert skim.learn(TEXT, raw, raw[len(TEXT) + 14 : -2], TEXT, obj, HOLES) is not None
        assert skim.match(framed(delta(7, "y", item=f"msg_{i + 10}")), 0) is not None  # (used: kept learning)
    assert len(skim.layouts) == MAX_LAYOUTS


@pytest.mark.parametrize(
    "data",
    [
        b'{"type": "response.output_text.delta", "sequence_number": 5}',  # not compact
        b'{"type":"response.output_text.delta","sequence_number":5.0,"delta":"x"}',  # a float
    ],
)
def test_no_layout_of_what_is_not_compact_json(data):
    skim = Skim()
    raw = b"data: " + data + b"\n\n"
    assert skim.learn(TEXT, raw, data, None, orjson.loads(data), HOLES) is None
    assert not skim.active


@pytest.mark.parametrize(
    "seq",
    [b"05", b"-1", b"1234567890123456789", b"", b"1e3", b"0x1"],
)
def test_an_integer_hole_takes_canonical_integers_only(seq):
    skim = learned(delta(5, " the"))
    raw = (
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":'
        + seq
        + b',"item_id":"msg_1","output_index":0,"content_index":0,"delta":"x","logprobs":[]}\n\n'
    )
    assert skim.match(raw, 0) is None


@pytest.mark.parametrize(
    "text",
    [
        b"raw\x01control",
        b"bad utf-8 \xff\xfe",
        b"half an escape \\",
        b"bad escape \\x41",
        b'a","logprobs":[],"extra":"b',  # the hole would swallow a key: not one string
        b"lone \\ud800 surrogate",
        b"tab\there",
        b"line\nbreak",
    ],
)
def test_a_string_orjson_rejects_is_rejected(text):
    """Whatever a string hole holds, ``text`` decodes it exactly when orjson decodes the
    whole event, and to the same value."""
    skim = learned(delta(5, " the"))
    data = (
        b'{"type":"response.output_text.delta","sequence_number":6,"item_id":"msg_1",'
        b'"output_index":0,"content_index":0,"delta":"' + text + b'","logprobs":[]}'
    )
    raw = b"event: response.output_text.delta\ndata: " + data + b"\n\n"
    s = skim.match(raw, 0)
    try:
        whole = orjson.loads(data)
    except orjson.JSONDecodeError:
        whole = None
    assert s is not None  # the literal pieces match: the string's content is what decides
    slot = s.layout.slot("delta")
    if whole is None or whole.get("logprobs") != [] or len(whole) != 7:
        with pytest.raises(ValueError):
            s.text(slot)
    else:
        assert s.text(slot) == whole["delta"]


def test_an_escaped_quote_does_not_end_a_string_between_holes():
    obj = {"type": "t.delta", "name": 'a "b"', "n": 1}
    skim = Skim()
    raw = framed(obj, None)
    assert skim.learn("t", raw, raw[6:-2], None, obj, frozenset({("name",), ("n",)})) is not None
    other = framed({"type": "t.delta", "name": 'x \\"y\\" \\\\', "n": 22}, None)
    s = skim.match(other, 0)
    assert s is not None
    assert s.text(0) == 'x \\"y\\" \\\\' and s.number(1) == 22
    # an event that ends the read is matched from its end, one that does not by a search:
    # the same spans either way
    third = framed({"type": "t.delta", "name": '","n":5', "n": 3}, None)
    for read in (other + third, other + third + other):
        s = skim.match(read, 0)
        assert s is not None and s.raw == other and s.text(0) == 'x \\"y\\" \\\\' and s.number(1) == 22
        s = skim.match(read, len(other))
        assert s is not None and s.raw == third and s.text(0) == '","n":5' and s.number(1) == 3
    for bad in (b'"n":07}', b'"n":}', b'"n":-1}', b'"n":1234567890123456789}', b'"n":1 }'):
        assert skim.match(other.replace(b'"n":22}', bad), 0) is None, bad
    # a raw LF in the string (two SSE events, really): the match leaves its content to
    # the decoding, which rejects it (the repairer then sends it the full way)
    s = skim.match(framed({"type": "t.delta", "name": "x", "n": 1}, None).replace(b'"x"', b'"x\n\ny"'), 0)
    assert s is not None
    with pytest.raises(ValueError):
        s.text(0)


# --- the repair, skimming on and off ----------------------------------------------------


def _cuts(body: bytes, rng: random.Random) -> list[bytes]:
    out, i = [], 0
    while i < len(body):
        n = rng.choice([1, 2, 3, 17, 100, 250, 4096, 16384])
        out.append(body[i : i + n])
        i += n
    return out


def _driver(api: str = "responses", request: dict | None = None) -> tuple[EventRepairer, StreamRepair]:
    """A repairer (skimming on) and the driver around it, for tests that look inside."""
    rep = stream_repairer(api, Rules(), FlowContext(model="m", started_at=1, request=request or {}), Verdict())
    return rep, StreamRepair(rep)


def _pieces(body: bytes, cuts: list[int], per_event: bool) -> list[bytes]:
    """A generated stream as its events, one per read, or cut at ``cuts``."""
    if per_event:
        p = SseParser()
        return [e.raw for e in p.feed(body) + p.close()]
    return cut(body, cuts)


def _same(api: str, request: dict, pieces: list[bytes], rules: Rules | None = None) -> int:
    return skim_same(api, pieces, request, rules)


STREAMING = [r for r in all_recordings() if r.streaming]


@pytest.mark.parametrize("rec", STREAMING, ids=[r.name for r in STREAMING])
def test_every_recording_repairs_the_same_skimmed(rec):
    body = rec.body
    request = rec.request.get("body") or {}
    p = SseParser()
    events = [e.raw for e in p.feed(body) + p.close()]
    rng = random.Random(rec.name)
    for pieces in (events, [body], _cuts(body, rng), _cuts(body, rng)):
        _same(rec.api, request, pieces)


@pytest.mark.parametrize("name", sorted(bench.STREAMS))
def test_the_bench_streams_repair_the_same_skimmed(name):
    api, _, request, build = bench.STREAMS[name]
    body = build()
    events = bench.events_of(body)
    skimmed = _same(api, request, events)
    sixteen = [body[i : i + 16384] for i in range(0, len(body), 16384)]
    skimmed16 = _same(api, request, sixteen)
    if api == "responses":  # the deltas of open items: most events, one per read or 16 KiB reads
        assert skimmed > len(events) * 3 // 4 and skimmed16 > len(events) * 3 // 4


def test_rules_off_repair_the_same_skimmed():
    api, _, request, build = bench.STREAMS["responses-claude"]
    events = bench.events_of(build())
    _same(api, request, events, Rules(sequence=False))
    _same(api, request, events, Rules(replay=False, announce=False))


# --- generated Responses streams ----------------------------------------------------------

_TRICKY = st.sampled_from(
    [
        " the",
        "",
        ' "q" ',
        "<div> & </div>",
        "é ü 😀",
        "\n\t",
        "back\\slash",
        "\u2028",
        "\x7f",
    ]
)


@st.composite
def responses_streams(draw) -> tuple[bytes, list[int]]:
    """A Claude-path turn (message open while a call runs; sequence numbers that repeat)
    with deltas mangled in the ways a gateway's bytes may differ."""
    seq_last = draw(st.booleans())  # Devin's layout puts sequence_number last

    def ev(obj: dict, event: bool = True) -> bytes:
        if seq_last and "sequence_number" in obj:
            obj = {k: v for k, v in obj.items() if k != "sequence_number"} | {"sequence_number": obj["sequence_number"]}
        return framed(obj, obj["type"] if event else None)

    out = [
        ev(
            {
                "type": "response.created",
                "sequence_number": 1,
                "response": {"id": "r1", "object": "response", "status": "in_progress", "output": []},
            }
        ),
        ev(
            {
                "type": "response.output_item.added",
                "sequence_number": 2,
                "output_index": 0,
                "item": {"id": "msg_1", "type": "message", "status": "in_progress", "content": [], "role": "assistant"},
            }
        ),
        ev(
            {
                "type": "response.content_part.added",
                "sequence_number": 3,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "part": {"type": "output_text", "annotations": [], "text": ""},
            }
        ),
    ]
    seq = 3
    call_open = False
    for _ in range(draw(st.integers(1, 30))):
        seq += draw(st.sampled_from([1, 1, 1, 0, -1, 2]))
        kind = draw(st.integers(0, 12))
        text = draw(_TRICKY) if draw(st.booleans()) else draw(st.text(max_size=6))
        if kind <= 6:
            raw = ev(delta(seq, text))
        elif kind == 7 and not call_open:
            call_open = True
            raw = ev(
                {
                    "type": "response.output_item.added",
                    "sequence_number": seq,
                    "output_index": 1,
                    "item": {
                        "id": "fc_1",
                        "type": "function_call",
                        "status": "in_progress",
                        "call_id": "c1",
                        "name": "f",
                        "arguments": "",
                    },
                }
            )
        elif kind == 8 and call_open:
            raw = ev(
                {
                    "type": "response.function_call_arguments.delta",
                    "sequence_number": seq,
                    "item_id": "fc_1",
                    "output_index": 1,
                    "delta": text,
                }
            )
        elif kind == 9:
            raw = b": keep-alive\n\n"
        elif kind == 10:  # the same delta with a byte mangled
            raw = bytearray(ev(delta(seq, text or "x")))
            at = draw(st.integers(0, len(raw) - 3))
            raw[at] = draw(st.sampled_from(b' "\\\x01\xff0,{}:\n\r'))
            raw = bytes(raw)
        elif kind == 11:
            raw = ev(delta(seq, text), event=False)
        else:
            raw = ev(
                delta(seq, text, content_index=draw(st.sampled_from([0, 1])))
                | {"content_index": draw(st.sampled_from([0, 1]))}
            )
        out.append(raw)
    if draw(st.booleans()):
        out.append(
            ev(
                {
                    "type": "response.completed",
                    "sequence_number": seq + 1,
                    "response": {"id": "r1", "object": "response", "status": "completed", "output": []},
                }
            )
        )
        for _ in range(draw(st.integers(0, 3))):  # what a gateway sends after its terminal
            seq += draw(st.sampled_from([1, -1]))
            out.append(ev(delta(seq, draw(_TRICKY))))
    body = b"".join(out)
    cuts = draw(st.lists(st.integers(0, len(body)), max_size=12))
    return body, sorted(set(cuts))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(responses_streams(), st.booleans())
def test_generated_responses_streams_repair_the_same_skimmed(stream, per_event):
    _same("responses", {"model": "m", "stream": True}, _pieces(*stream, per_event))


def test_a_delta_with_a_changing_extra_string_is_skimmed_and_that_string_checked():
    """OpenAI's deltas carry ``obfuscation``, a string that changes every event: a hole
    too, decoded as a check only; the text's bytes handed on are the delta's, not its."""
    events = [
        framed(
            {
                "type": "response.created",
                "sequence_number": 1,
                "response": {"id": "r", "object": "response", "status": "in_progress", "output": []},
            }
        ),
        framed(
            {
                "type": "response.output_item.added",
                "sequence_number": 2,
                "output_index": 0,
                "item": {"id": "msg_1", "type": "message", "status": "in_progress", "content": [], "role": "assistant"},
            }
        ),
        framed(
            {
                "type": "response.content_part.added",
                "sequence_number": 3,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "part": {"type": "output_text", "annotations": [], "text": ""},
            }
        ),
    ]
    seq = 3
    for i, (text, noise) in enumerate(
        [("a", "xy"), ("b", "zz"), ("ü", "q"), ("c", "\\ud800"), ("d", "é"), ("e", "w")] * 3
    ):
        seq += 1 if i % 4 else 0  # every fourth repeats its number: renumbered, rendered
        raw = framed(delta(seq, text, obfuscation="OB"))
        events.append(raw.replace(b'"obfuscation":"OB"', b'"obfuscation":"' + noise.encode() + b'"'))
    events.append(
        framed(
            {
                "type": "response.completed",
                "sequence_number": seq + 1,
                "response": {"id": "r", "object": "response", "status": "completed", "output": []},
            }
        )
    )
    skimmed = _same("responses", {"model": "m", "stream": True}, events)
    assert skimmed >= 10  # the lone-surrogate noise is declined (orjson rejects it), the rest skimmed


# --- reasoning summary deltas: skimmed through a learned rewrite ---------------------------

SUMMARY = "response.reasoning_summary_text.delta"


def _devin_reasoning(deltas: list[str], seqs: list[int], done: bool = True, extra: list[bytes] = ()) -> list[bytes]:
    """Devin's reasoning item as unfixed CPA streams it: summary deltas with neither
    ``item_id`` nor ``summary_index``, ``sequence_number`` last."""
    events = [
        framed(
            {
                "type": "response.created",
                "response": {"id": "r", "object": "response", "status": "in_progress", "output": []},
                "sequence_number": 1,
            }
        ),
        framed(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {
                    "id": "item_0",
                    "type": "reasoning",
                    "status": "in_progress",
                    "encrypted_content": "",
                    "summary": [],
                },
                "sequence_number": 2,
            }
        ),
    ]
    for text, seq in zip(deltas, seqs):
        events.append(framed({"type": SUMMARY, "output_index": 0, "delta": text, "sequence_number": seq}, SUMMARY))
    events += list(extra)
    if done:
        events.append(
            framed(
                {
                    "type": "response.completed",
                    "response": {"id": "r", "object": "response", "status": "completed", "output": []},
                    "sequence_number": seqs[-1] + 1,
                }
            )
        )
    return events


def test_a_summary_delta_is_skimmed_as_the_full_path_rewrites_it():
    """Each delta gets the reasoning item's id and summary part (rule schema_fill) and,
    when its number repeats, the next one (rule sequence). The expected bytes are written
    here from orjson.dumps of the hand-changed object."""
    texts = [" every", " hero", ' "q"', " back\\slash", " é", "\n", " end"]
    seqs = [3, 4, 4, 5, 6, 6, 7]
    events = _devin_reasoning(texts, seqs)
    skimmed = _same("responses", {"model": "m", "stream": True}, events)
    assert skimmed >= len(texts) - 1  # the first is parsed, and teaches the layout
    # the bytes, by hand
    rep, s = _driver()
    outs = [s.feed(e) for e in events[:2]]
    before = dict(rep.fired)  # (the lifecycle event's own fills)
    outs += [s.feed(e) for e in events[2 : 2 + len(texts)]]
    assert s.skimmed == len(texts) - 1
    want_seq = [3, 4, 5, 6, 7, 8, 9]
    for out, text, seq in zip(outs[2:], texts, want_seq):
        obj = {
            "type": SUMMARY,
            "output_index": 0,
            "delta": text,
            "sequence_number": seq,
            "item_id": "item_0",
            "summary_index": 0,
        }
        assert out == b"event: " + SUMMARY.encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"
    assert rep.fired["schema_fill"] - before.get("schema_fill", 0) == len(texts)
    assert rep.fired["sequence"] - before.get("sequence", 0) == 5  # from the first repeat (4, 4) on, all moved up
    assert rep.items.by_id["item_0"].summary[0].text() == "".join(texts)


def test_a_summary_delta_for_another_part_or_item_is_not_skimmed_with_the_old_rewrite():
    """A rewrite's template holds the item's id and part as literals: after a
    ``reasoning_summary_part.added`` (part 1) the next deltas are part 1's, so the layout
    learned for part 0 does not serve them (the full path learns part 1's)."""
    part = framed(
        {
            "type": "response.reasoning_summary_part.added",
            "output_index": 0,
            "item_id": "item_0",
            "summary_index": 1,
            "part": {"type": "summary_text", "text": ""},
            "sequence_number": 6,
        },
        "response.reasoning_summary_part.added",
    )
    after = [
        framed({"type": SUMMARY, "output_index": 0, "delta": t, "sequence_number": 7 + i}, SUMMARY)
        for i, t in enumerate([" b", " c", " d"])
    ]
    events = _devin_reasoning([" a", " a2", " a3"], [3, 4, 5], done=False, extra=[part, *after])
    rep, s = _driver()
    outs = [s.feed(e) for e in events]
    assert s.skimmed == 4  # a2, a3; then c, d (b is parsed: the part changed)
    assert b'"summary_index":1' in outs[-1] and b'"summary_index":1' in outs[-3]
    summary = rep.items.by_id["item_0"].summary
    assert summary[0].text() == " a a2 a3" and summary[1].text() == " b c d"
    _same("responses", {"model": "m", "stream": True}, events)
    _same("responses", {"model": "m", "stream": True}, [b"".join(events)])


def test_summary_deltas_without_schema_fill_are_not_rewritten_and_the_same_skimmed():
    events = _devin_reasoning([" a", " b", " c", " d"], [3, 4, 5, 6])
    assert _same("responses", {"model": "m", "stream": True}, events, Rules(schema_fill=False)) == 0
    assert _same("responses", {"model": "m", "stream": True}, events, Rules(sequence=False)) == 3


@st.composite
def devin_streams(draw) -> tuple[bytes, list[int]]:
    """Devin-path reasoning: summary deltas without ids (some with, some mangled), a new
    summary part now and then, a text item in between, numbers that repeat, and an ending
    that may be missing (the item is then closed from what was streamed)."""
    out = [
        framed(
            {
                "type": "response.created",
                "response": {"id": "r", "object": "response", "status": "in_progress", "output": []},
                "sequence_number": 1,
            }
        ),
        framed(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {
                    "id": "item_0",
                    "type": "reasoning",
                    "status": "in_progress",
                    "encrypted_content": "",
                    "summary": [],
                },
                "sequence_number": 2,
            }
        ),
    ]
    seq, part = 2, 0
    for _ in range(draw(st.integers(1, 25))):
        seq += draw(st.sampled_from([1, 1, 1, 0, 2]))
        kind = draw(st.integers(0, 9))
        text = draw(_TRICKY) if draw(st.booleans()) else draw(st.text(max_size=6))
        obj: dict = {"type": SUMMARY, "output_index": 0, "delta": text, "sequence_number": seq}
        if kind <= 5:
            raw = framed(obj, SUMMARY)
        elif kind == 6:
            raw = framed(
                {
                    "type": SUMMARY,
                    "item_id": "item_0",
                    "output_index": 0,
                    "summary_index": part,
                    "delta": text,
                    "sequence_number": seq,
                },
                SUMMARY,
            )
        elif kind == 7:
            part += 1
            raw = framed(
                {
                    "type": "response.reasoning_summary_part.added",
                    "item_id": "item_0",
                    "output_index": 0,
                    "summary_index": part,
                    "part": {"type": "summary_text", "text": ""},
                    "sequence_number": seq,
                },
                "response.reasoning_summary_part.added",
            )
        elif kind == 8:
            raw = bytearray(framed(obj | {"delta": text or "x"}, SUMMARY))
            at = draw(st.integers(0, len(raw) - 3))
            raw[at] = draw(st.sampled_from(b' "\\\x01\xff0,{}:\n\r'))
            raw = bytes(raw)
        else:
            raw = framed(obj | {"output_index": draw(st.sampled_from([0, 1]))}, SUMMARY)
        out.append(raw)
    ending = draw(st.integers(0, 2))
    if ending >= 1:  # the item closed by the gateway, without the summary list half the time
        item = {"id": "item_0", "type": "reasoning", "encrypted_content": ""}
        if ending == 2:
            item["summary"] = []
        out.append(
            framed({"type": "response.output_item.done", "output_index": 0, "item": item, "sequence_number": seq + 1})
        )
        out.append(
            framed(
                {
                    "type": "response.completed",
                    "response": {"id": "r", "object": "response", "status": "completed", "output": []},
                    "sequence_number": seq + 2,
                }
            )
        )
    body = b"".join(out)
    cuts = draw(st.lists(st.integers(0, len(body)), max_size=10))
    return body, sorted(set(cuts))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(devin_streams(), st.booleans())
def test_generated_devin_reasoning_repairs_the_same_skimmed(stream, per_event):
    _same("responses", {"model": "m", "stream": True}, _pieces(*stream, per_event))


def test_a_literal_that_changes_every_event_stops_the_learning():
    """A gateway that stamps each delta (``"x_t":<clock>``, a count): every event's
    layout is new and none is ever matched. After MAX_UNUSED such layouts the kind is no
    longer learned (each try shapes the event, each layout is tested against every
    next event); the repair is the one without skimming."""
    events = [
        framed(
            {
                "type": "response.created",
                "sequence_number": 1,
                "response": {"id": "r", "object": "response", "status": "in_progress", "output": []},
            }
        ),
        framed(
            {
                "type": "response.output_item.added",
                "sequence_number": 2,
                "output_index": 0,
                "item": {"id": "msg_1", "type": "message", "status": "in_progress", "content": [], "role": "assistant"},
            }
        ),
        framed(
            {
                "type": "response.content_part.added",
                "sequence_number": 3,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "part": {"type": "output_text", "annotations": [], "text": ""},
            }
        ),
    ]
    for i in range(MAX_MISSES + 20):
        events.append(framed({"x_t": 1000 + i} | delta(4 + i, f" w{i}")))
    rep, s = _driver()
    for e in events:
        s.feed(e)
    assert s.skimmed == 0
    assert not rep.skim.tries(TEXT)
    assert len(rep.skim.layouts) <= MAX_LAYOUTS
    assert not rep.skim.active  # MAX_MISSES events matched nothing: the reads go the full way, whole
    assert max(layout.consts[("x_t",)] for layout in rep.skim.layouts) <= 1000 + MAX_UNUSED  # learned no more
    _same("responses", {"model": "m", "stream": True}, events)
    # a kind whose layouts serve events keeps learning new ones (a new item's id)
    api, _, request, build = bench.STREAMS["responses-claude"]
    rep, s = _driver(api, request)
    for e in bench.events_of(build()):
        s.feed(e)
    assert rep.skim.tries(TEXT) and rep.skim.tries("response.function_call_arguments.delta")
