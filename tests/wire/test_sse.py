"""wire/sse.py: the incremental SSE parser and serializer."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from streamfix.wire.sse import Event, SseParser, format_event


def parse(data: bytes, cuts: list[int] | None = None) -> list[Event]:
    p = SseParser()
    out: list[Event] = []
    last = 0
    for c in sorted(set(cuts or [])):
        out += p.feed(data[last:c])
        last = c
    out += p.feed(data[last:])
    return out + p.close()


def test_fields_and_raw_bytes():
    body = b'event: response.created\ndata: {"a":1}\nid: 7\nretry: 10\n\n'
    [ev] = parse(body)
    assert ev.raw == body
    assert ev.event == "response.created"
    assert ev.data == b'{"a":1}'
    assert ev.fields == [(b"event", b"response.created"), (b"data", b'{"a":1}'), (b"id", b"7"), (b"retry", b"10")]
    assert ev.complete


def test_multiline_data_joined_by_lf():
    [ev] = parse(b"data: one\ndata:two\ndata:  three\n\n")
    # one leading space is stripped, not two (WHATWG)
    assert ev.data == b"one\ntwo\n three"


def test_comments_keep_alive_and_done():
    evs = parse(b": keep-alive\n\ndata: [DONE]\n\n")
    assert [e.raw for e in evs] == [b": keep-alive\n\n", b"data: [DONE]\n\n"]
    assert evs[0].is_comment_only and evs[0].data is None
    assert evs[1].data == b"[DONE]"


def test_line_ends_crlf_and_cr():
    crlf = parse(b"event: x\r\ndata: 1\r\n\r\n")
    cr = parse(b"event: x\rdata: 1\r\r")
    for [ev] in (crlf, cr):
        assert (ev.event, ev.data) == ("x", b"1")
    assert crlf[0].eol == b"\r\n" and cr[0].eol == b"\r"


def test_cr_at_chunk_end_waits_for_possible_lf():
    p = SseParser()
    assert p.feed(b"data: 1\r") == []  # could be CRLF
    assert p.feed(b"\n") == []
    [ev] = p.feed(b"\r\n")
    assert ev.raw == b"data: 1\r\n\r\n" and ev.data == b"1"


def test_lone_cr_terminator_at_eof_completes_event():
    evs = parse(b"data: 1\r\r")
    assert len(evs) == 1 and evs[0].complete and evs[0].data == b"1"


def test_unterminated_tail_is_returned_incomplete():
    evs = parse(b"data: 1\n\ndata: tail")
    assert [e.complete for e in evs] == [True, False]
    assert evs[1].raw == b"data: tail" and evs[1].data == b"tail"


def test_extra_blank_line_is_its_own_event():
    # CPA's Responses framer ends the body with one extra "\n" after the terminal event
    evs = parse(b"data: 1\n\n\n")
    assert [e.raw for e in evs] == [b"data: 1\n\n", b"\n"]
    assert evs[1].fields == [] and evs[1].data is None


def test_bom_is_ignored_for_fields_but_kept_in_raw():
    [ev] = parse(b"\xef\xbb\xbfdata: 1\n\n")
    assert ev.data == b"1" and ev.raw.startswith(b"\xef\xbb\xbf")


def test_utf8_split_across_chunks():
    body = 'data: {"t":"héllo ✓"}\n\n'.encode()
    cut = body.index("✓".encode()) + 1
    [ev] = parse(body, [cut])
    assert ev.data.decode() == '{"t":"héllo ✓"}'


def test_with_data_keeps_other_fields_and_eol():
    [ev] = parse(b": c\r\nevent: a\r\nid: 1\r\ndata: x\r\ndata: y\r\n\r\n")
    out = ev.with_data(b"new", event="b")
    assert out == b":c\r\nevent: b\r\nid: 1\r\ndata: new\r\n\r\n".replace(b":c", b": c")
    [again] = parse(out)
    assert (again.event, again.data) == ("b", b"new")


def test_format_event():
    assert format_event(b'{"a":1}', "x") == b'event: x\ndata: {"a":1}\n\n'
    assert format_event(b"a\nb") == b"data: a\ndata: b\n\n"


_line = st.sampled_from(
    [
        b'data: {"x": 1}',
        b"event: e",
        b": keep-alive",
        b"id: 3",
        b"data:",
        b"",
        b"data: \xc3\xa9\xe2\x9c\x93",
        b"retry: 5",
        b"bogus",
    ]
)
_eol = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def streams(draw):
    parts = draw(st.lists(st.tuples(_line, _eol), max_size=30))
    tail = draw(st.sampled_from([b"", b"data: tail", b"\r"]))
    return b"".join(a + b for a, b in parts) + tail


@settings(max_examples=300, deadline=None)
@given(streams(), st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_any_chunking_gives_same_events_and_loses_no_byte(body, cuts):
    whole = parse(body)
    chunked = parse(body, [c for c in cuts if c <= len(body)])
    assert [(e.raw, e.fields, e.complete) for e in chunked] == [(e.raw, e.fields, e.complete) for e in whole]
    assert b"".join(e.raw for e in whole) == body


# --- the fast path (LF framing) against an independent reading of the grammar ---------

_LINE_END = re.compile(rb"\r\n|\r|\n")


def reference(body: bytes) -> list[tuple[bytes, list[tuple[bytes, bytes]], bool]]:
    """The WHATWG event-stream grammar read off the whole body at once (no chunking, no
    fast path): (raw, fields, complete) per event, as the parser must give them."""
    out = []
    fields: list[tuple[bytes, bytes]] = []
    start = pos = 0
    first = True
    while pos < len(body):
        m = _LINE_END.search(body, pos)
        if m is None:
            break
        line = body[pos : m.start()]
        if first and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        first = False
        pos = m.end()
        if not line:
            out.append((body[start:pos], fields, True))
            fields, start = [], pos
        elif line.startswith(b":"):
            fields.append((b"", line[1:]))
        else:
            name, colon, value = line.partition(b":")
            fields.append((name, value[1:] if value.startswith(b" ") else value) if colon else (line, b""))
    if pos < len(body):
        line = body[pos:]
        if first and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        if line:
            name, colon, value = line.partition(b":")
            if not name and colon:
                fields.append((b"", value))
            else:
                fields.append((name, value[1:] if value.startswith(b" ") else value) if colon else (line, b""))
    if start < len(body):
        out.append((body[start:], fields, False))
    return out


_lf_line = st.sampled_from(
    [b'data: {"x": 1}', b"event: e", b": keep-alive", b":", b"id: 3", b"data:", b"", b"", b"data: \xc3\xa9", b"x"]
)


@st.composite
def lf_streams(draw):
    lines = draw(st.lists(_lf_line, max_size=40))
    tail = draw(st.sampled_from([b"", b"data: tail", b"\n", b"\xef\xbb\xbf"]))
    head = draw(st.sampled_from([b"", b"", b"\xef\xbb\xbf", b"\n"]))
    return head + b"".join(line + b"\n" for line in lines) + tail


@settings(max_examples=400, deadline=None)
@given(lf_streams(), st.lists(st.integers(min_value=0, max_value=600), max_size=20))
def test_fast_path_matches_the_grammar_under_any_chunking(body, cuts):
    got = parse(body, [c for c in cuts if c <= len(body)])
    assert [(e.raw, e.fields, e.complete) for e in got] == reference(body)


@settings(max_examples=300, deadline=None)
@given(
    lf_streams(),
    st.sampled_from([b"\r\n", b"\r", b"data: x\r\n\r\n"]),
    lf_streams(),
    st.lists(st.integers(0, 900), max_size=12),
)
def test_switch_to_the_general_path_mid_stream(a, cr, b, cuts):
    """A CR after the fast path started (even mid-event): same events as the grammar."""
    body = a + cr + b
    got = parse(body, [c for c in cuts if c <= len(body)])
    assert [(e.raw, e.fields, e.complete) for e in got] == reference(body)
    assert b"".join(e.raw for e in got) == body


_shape_line = st.sampled_from(
    [
        b"event: e",
        b"event:  two spaces",
        b"event: a:b",
        b"event:",
        b"event: \xff\xfe",
        b'data: {"x": 1}',
        b"data: ",
        b"data:  lead",
        b"data:x",
        b"data: a: b",
        b": keep-alive",
        b"id: 3",
        b"x",
    ]
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.lists(_shape_line, min_size=1, max_size=3), max_size=12),
    st.sampled_from([b"", b"event: e\ndata: x\r\n\n", b"data: x\r\n\n", b"data: x\r\n"]),
)
def test_one_event_per_read_matches_the_grammar(events, cr_read):
    """Each read holding exactly one event (what gateways write; ``wire.sse.whole_event``
    takes the usual shapes), in all the shapes near the usual one: same events as the
    grammar, and a CR anywhere still moves the stream to the general path."""
    reads = [b"".join(line + b"\n" for line in ev) + b"\n" for ev in events]
    if cr_read:
        reads.append(cr_read)
    body = b"".join(reads)
    p = SseParser()
    got = [e for r in reads for e in p.feed(r)] + p.close()
    assert [(e.raw, e.fields, e.complete) for e in got] == reference(body)
    assert [e.data for e in got] == [e.data for e in parse(body)]
    assert [e.event for e in got] == [e.event for e in parse(body)]


def test_event_end_split_across_chunks_on_the_fast_path():
    p = SseParser()
    assert p.feed(b"data: 1\n") == []
    [ev] = p.feed(b"\ndata: 2\n")  # "\n" | "\n": the seam ends the event
    assert ev.raw == b"data: 1\n\n" and ev.data == b"1"
    ev2, blank = p.feed(b"\n\n")  # ends event 2, then a blank line of its own
    assert (ev2.raw, blank.raw, blank.fields) == (b"data: 2\n\n", b"\n", [])
    assert p.close() == []


def test_bom_split_across_the_first_chunks():
    p = SseParser()
    assert p.feed(b"\xef") == [] and p.feed(b"\xbb") == []
    [ev] = p.feed(b"\xbfdata: 1\n\n")
    assert ev.raw == b"\xef\xbb\xbfdata: 1\n\n" and ev.data == b"1"


def test_data_and_event_are_computed_once():
    [ev] = parse(b"event: a\ndata: x\ndata: y\nevent: b\n\n")
    assert ev.data == b"x\ny" and ev.event == "b"
    assert ev.data is ev.data  # an attribute, not a join per read


def _long_line(sep: bytes) -> None:
    """10 MB in one line, fed in 1 KiB chunks, then its end: linear work, or this test
    does not finish (a rescan or re-join per chunk would copy ~50 GB)."""
    p = SseParser()
    p.feed(b"data: 0" + sep + sep + b"data: ")  # decide the path first
    piece = b"x" * 1024
    for _ in range(10 * 1024):
        assert p.feed(piece) == []
    [ev] = p.feed(sep + sep)
    assert len(ev.raw) == 6 + 10 * 1024 * 1024 + 2 * len(sep) and ev.data[:2] == b"xx"


def test_ten_megabyte_line_in_small_chunks_is_linear_on_both_paths():
    _long_line(b"\n")
    _long_line(b"\r\n")
