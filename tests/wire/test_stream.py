"""wire/stream.py: the driver fails open and loses nothing."""

import orjson
import pytest
from streamfix.wire.sse import Event, SseParser
from streamfix.wire.stream import EventRepairer, Streamed, StreamRepair, repair_body
from support import pure_only

BODY = b"".join(b'data: {"n":%d}\n\n' % i for i in range(6)) + b"data: [DONE]\n\n"


class Upper(EventRepairer):
    """Rewrites events whose n is even; holds n == 3 until the next event; raises on n == boom."""

    def __init__(self, boom=None, boom_at_end=False):
        super().__init__()
        self.boom, self.boom_at_end = boom, boom_at_end

    def event(self, ev: Event) -> list[bytes]:
        obj = self.parse(ev)
        if obj is not None and obj["n"] == self.boom:
            raise RuntimeError("boom")
        out = [e.raw for e in self.held]
        self.held.clear()
        if obj is None:
            return out + [ev.raw]
        if obj["n"] == 3:
            self.held.append(ev)
            return out
        if obj["n"] % 2 == 0:
            self.changed += 1
            return out + [ev.with_data(orjson.dumps({"n": obj["n"], "fixed": True}))]
        return out + [ev.raw]

    def end(self):
        if self.boom_at_end:
            raise RuntimeError("late boom")
        return super().end()


def run(rep, chunks):
    s = StreamRepair(rep)
    return b"".join(s.feed(c) for c in chunks) + s.close(), s


def test_repairs_and_holds():
    out, s = run(Upper(), [BODY])
    assert s.error is None
    assert out.count(b'"fixed":true') == 3
    assert out.index(b'{"n":3}') < out.index(b'{"n":4,')  # held, then released in order


@pytest.mark.parametrize("boom", [1, 4, 5])
def test_exception_switches_to_passthrough_and_loses_nothing(boom):
    out, s = run(Upper(boom=boom), [BODY[:37], BODY[37:90], BODY[90:]])
    assert isinstance(s.error, RuntimeError)
    # every original event after the failure point is there, byte for byte, in order
    tail = BODY[BODY.index(b'data: {"n":%d}' % boom) :]
    assert out.endswith(tail)
    if boom == 4:  # the held event 3 went out raw before the failing one
        assert b'data: {"n":3}\n\ndata: {"n":4}' in out


def test_exception_in_end_flushes_held():
    body = b'data: {"n":3}\n\n'
    out, s = run(Upper(boom_at_end=True), [body])
    assert out == body and s.error is not None


def test_after_failure_later_chunks_pass_unchanged():
    s = StreamRepair(Upper(boom=0))
    first = s.feed(b'data: {"n":0}\n\ndata: {"n"')
    assert first == b'data: {"n":0}\n\ndata: {"n"'
    assert s.feed(b":2}\n\n") == b":2}\n\n"
    assert s.close() == b""


@pytest.mark.parametrize("cut", [b'data: {"n":4}\n', b'data: {"n":4}\r', b"da", b""])
def test_salvage_hands_back_held_and_unfinished_bytes_as_they_came(cut):
    """An upstream that fails mid-body: the held event 3 and the unfinished bytes after
    it come back raw, in order, with nothing added; the stream is passthrough after."""
    s = StreamRepair(Upper())
    head = b'data: {"n":2}\n\ndata: {"n":3}\n\n'
    sent = s.feed(head + cut)
    assert sent == b'data: {"n":2,"fixed":true}\n\n'  # 3 is held, the cut bytes unfinished
    assert s.salvage() == b'data: {"n":3}\n\n' + cut
    assert s.salvage() == b"" and s.close() == b""
    assert s.feed(b"late") == b"late"
    assert s.bytes_out == len(sent) + len(b'data: {"n":3}\n\n' + cut) + 4
    assert s.undelivered() == (0, 0, 0)


class Salvaging(Upper):
    """Upper whose salvage() repairs the held event 3 (or raises)."""

    def __init__(self, boom=False):
        super().__init__()
        self.salvage_boom = boom

    def salvage(self):
        if self.salvage_boom:
            raise RuntimeError("salvage boom")
        out = [e.with_data(orjson.dumps({"n": 3, "salvaged": True})) for e in self.held]
        self.held.clear()
        return out


@pytest.mark.parametrize("boom", [False, True])
def test_salvage_asks_the_repairer_and_fails_open(boom):
    """The held events go out through the repairer's salvage() (the rules a cut
    stream can still satisfy), then the unfinished bytes as they came; if salvage()
    raises, the held events go out raw and the error is kept."""
    s = StreamRepair(Salvaging(boom))
    sent = s.feed(b'data: {"n":2}\n\ndata: {"n":3}\n\ndata: {"n"')
    assert sent == b'data: {"n":2,"fixed":true}\n\n'
    held = b'data: {"n":3}\n\n' if boom else b'data: {"n":3,"salvaged":true}\n\n'
    assert s.salvage() == held + b'data: {"n"'
    assert (s.error is not None) == boom
    assert s.undelivered() == (0, 0, 0)


def test_repair_body_matches_streaming():
    out, err = repair_body(Upper(), BODY)
    assert err is None and out == run(Upper(), [BODY[i : i + 7] for i in range(0, len(BODY), 7)])[0]


def test_non_json_noted_not_lost():
    rep = Upper()
    out, _ = run(rep, [b"data: not json\n\n"])
    assert out == b"data: not json\n\n" and rep.notes


# --- Streamed: what an open item keeps of its deltas ----------------------------------


def test_streamed_joins_appends_and_keeps_every_character():
    s = Streamed("pre ")
    assert s
    for d in ["héllo", " ✓", "", " \ud800 lone surrogate", " end"]:
        s.append(d)
    assert s.text() == "pre héllo ✓ \ud800 lone surrogate end"
    s.append("!")  # appending after a read keeps both
    assert s.text() == "pre héllo ✓ \ud800 lone surrogate end!"
    s.set("whole")
    assert s.text() == "whole" and not Streamed()


def test_open_item_memory_is_its_text_not_a_string_per_delta():
    """50,000 text deltas of 10 characters into one open message: what the repairer holds
    grows by about the text (500 kB), not by a string object per delta (~3.3 MB)."""
    import tracemalloc

    from streamfix.wire.responses import ResponsesRepairer
    from streamfix.wire.rules import FlowContext, Rules
    from streamfix.wire.verdict import Verdict

    def ev(obj):
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    s = StreamRepair(ResponsesRepairer(Rules(), FlowContext(model="m"), Verdict()))
    s.feed(
        ev({"type": "response.created", "sequence_number": 0, "response": {"id": "r", "created_at": 1, "model": "m"}})
    )
    item = {"id": "m1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    s.feed(ev({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": item}))
    part = {"type": "output_text", "text": "", "annotations": []}
    s.feed(
        ev(
            {
                "type": "response.content_part.added",
                "sequence_number": 2,
                "item_id": "m1",
                "output_index": 0,
                "content_index": 0,
                "part": part,
            }
        )
    )
    deltas = [
        ev(
            {
                "type": "response.output_text.delta",
                "sequence_number": 3 + i,
                "item_id": "m1",
                "output_index": 0,
                "content_index": 0,
                "delta": f"{i:09d} ",
            }
        )
        for i in range(50_000)
    ]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for d in deltas:
            assert s.feed(d) == d  # unchanged deltas pass as their bytes
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 1_000_000, grown
    # and the close synthesized at the terminal carries the whole text
    out = s.feed(
        ev(
            {
                "type": "response.completed",
                "sequence_number": 60_000,
                "response": {"id": "r", "output": [], "usage": None},
            }
        )
    )
    assert b"".join(f"{i:09d} ".encode() for i in range(50_000)) in out


@pytest.mark.parametrize("skim", [True, False], ids=["skim", "no-skim"])
@pytest.mark.parametrize("api", ["responses", "chat"])
def test_at_most_one_json_parse_per_event(monkeypatch, api, skim):
    """The repairer and the checks before it (non-standard events) share one
    ``orjson.loads`` per event (``Event.json``); the verdict's one parse of the last
    call's arguments at the end is the only other. A skimmed event (wire.skim) is not
    parsed at all; only a string of it holding an escape is decoded, by orjson."""
    from streamfix.wire.apis import stream_repairer
    from streamfix.wire.rules import FlowContext, Rules
    from streamfix.wire.verdict import Verdict

    from streamfix import bench

    _, _, request, build = bench.STREAMS[api]
    chunks = bench.events_of(build())
    calls = []
    real = orjson.loads

    def counting(data):
        calls.append(len(data))
        return real(data)

    monkeypatch.setattr(orjson, "loads", counting)
    rep = stream_repairer(api, Rules(), FlowContext(model="m", request=request), Verdict())
    if not skim:
        rep.skim = None
    s = StreamRepair(rep)
    for c in chunks:
        s.feed(c)
    s.close()
    p = SseParser()
    with_data = sum(1 for c in chunks for e in p.feed(c) if e.data is not None)
    assert s.error is None
    assert with_data > 2000 and len(calls) <= with_data + 1
    if skim and rep.skim is not None:
        assert s.skimmed > with_data // 2, "the common deltas were not skimmed"
    else:
        assert s.skimmed == 0
    assert len(calls) >= with_data - s.skimmed, (
        "the count saw no parse: orjson.loads was not the one the repairer calls"
    )


@pytest.mark.parametrize("name", ["responses-openai-clean", "chat-openai-clean", "messages-clean", "gemini-clean"])
def test_fault_says_how_the_stream_ended(name):
    """``fault()`` (the turn log's ``ended``): None for a whole clean stream; the stream cut
    after its first event has no terminal; an error event in its place is named."""
    from streamfix.wire.apis import stream_repairer
    from streamfix.wire.rules import FlowContext, Rules
    from streamfix.wire.verdict import Verdict

    from streamfix.recordings import load

    rec = load(name)

    def fault(body: bytes, rules: Rules = Rules()) -> str | None:
        rep = stream_repairer(rec.api, rules, FlowContext(request=rec.request.get("body")), Verdict())
        repair_body(rep, body)
        return rep.fault()

    assert fault(rec.body) is None
    p = SseParser()
    first = p.feed(rec.body)[0].raw
    assert fault(first, Rules(eof_terminal=False)) == "stream ended without a terminal event"
    if rec.api != "responses":  # Responses: an error event is a failure terminal
        err = b'data: {"error":{"message":"boom","type":"server_error"}}\n\n'
        if rec.api == "messages":
            err = b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"x"}}\n\n'
        assert fault(first + err) == "the stream carried an error event"
    else:
        failed = b'data: {"type":"response.failed","sequence_number":99,"response":{"id":"r","status":"failed"}}\n\n'
        assert fault(first + failed) == "the stream ended with a failure event"


@pure_only  # a stand-in for StreamRepair: the compiled Reads takes the real class only
def test_reads_hands_the_first_read_and_the_end_to_its_owner_and_fails_open():
    """``wire.stream.Reads`` (the plain stream's per-read callable): the first read and
    the end go to the owner (the addon's FlowStream); the others straight to the repair;
    a repair that raises makes the read go out as it came, with the owner's ``failed``."""
    from streamfix.wire.stream import Reads

    class Owner:
        failed = None

        def __init__(self):
            self.calls = []

        def __call__(self, chunk):
            self.calls.append(chunk)
            return [b"owner:" + chunk]

    class Feed:
        def __init__(self):
            self.fed = []

        def feed(self, chunk):
            self.fed.append(chunk)
            if chunk == b"boom":
                raise RuntimeError("inside")
            return b"" if chunk == b"hold" else chunk.upper()

    owner, feed = Owner(), Feed()
    r = Reads(feed, owner)
    assert r(b"first") == [b"owner:first"] and feed.fed == []
    assert r(b"second") == [b"SECOND"]
    assert r(b"hold") == []  # nothing to send: no empty chunk for mitmproxy
    assert r(b"boom") == [b"boom"] and isinstance(owner.failed, RuntimeError)
    assert r(b"") == [b"owner:"] and owner.calls == [b"first", b""]
    owner.salvage = lambda: [b"held"]  # addons/salvage.py asks the callable for what is held
    assert r.salvage() == [b"held"]


def test_reads_feeds_a_real_repair_between_the_owners_first_read_and_end():
    """The same on either build, with a real StreamRepair: the middle reads are repaired
    (a chat chunk's tool-call index renumbered) without the owner."""
    from streamfix.wire.apis import stream_repairer
    from streamfix.wire.rules import FlowContext, Rules
    from streamfix.wire.stream import Reads
    from streamfix.wire.verdict import Verdict

    calls = []

    def owner(chunk):
        calls.append(chunk)
        return [chunk]

    rep = StreamRepair(stream_repairer("chat", Rules(), FlowContext(model="m"), Verdict()))
    r = Reads(rep, owner)
    head = b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
    call = b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"id":"t","type":"function","function":{"name":"f","arguments":""}}]}}]}\n\n'
    assert r(head) == [head] and calls == [head]
    (out,) = r(call)
    assert b'"tool_calls":[{"index":0,' in out and rep.events == 1
    assert r(b"") == [b""] and calls == [head, b""]


# --- skimmed events and the reads that cut them (wire.skim) -----------------------------


class Skimming(EventRepairer):
    """Learns the layout of ``{"n":N}`` on the full path and takes such events skimmed,
    as they came; declines n == ``decline`` (full path), raises on n == ``boom``."""

    def __init__(self, boom=None, decline=None):
        super().__init__()
        from streamfix.wire.skim import Skim

        self.skim = Skim()
        self.boom, self.decline = boom, decline
        self.full: list[int] = []  # n of each event the full path took
        self.fast: list[int] = []  # n of each event taken skimmed

    def event(self, ev: Event) -> list[bytes]:
        obj = self.parse(ev)
        if obj is not None:
            self.full.append(obj["n"])
            if obj["n"] == self.boom:
                raise RuntimeError("boom")
            holes = frozenset({("n",), ("s",)}) if "s" in obj else frozenset({("n",)})
            self.skim.learn("n", ev.raw, ev.data, ev.event, obj, holes)
        return [ev.raw]

    def skimmed(self, s):
        n = s.number(0)
        if n == self.boom:
            raise RuntimeError("boom")
        if n == self.decline:
            return None
        self.fast.append(n)
        return s.raw


TEN = b"".join(b'data: {"n":%d}\n\n' % i for i in range(10))


def _reads(body: bytes, size: int) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


@pytest.mark.parametrize("size", [1, 5, 11, 16, 25, len(TEN)])
def test_an_event_a_read_completes_is_skimmed_whole_and_the_first_read_too(size):
    """Whatever the reads (one byte each, events cut anywhere, the whole body as the
    first read): the first event teaches the layout on the full path, every later one
    is skimmed, whole, the one a read completes too (the parser's bytes and the read's)."""
    rep = Skimming()
    out, s = run(rep, _reads(TEN, size))
    assert out == TEN and s.error is None
    assert rep.full == [0] and rep.fast == list(range(1, 10))
    assert (s.events, s.skimmed) == (10, 9)
    assert s.parser is None or s.parser.idle()


@pytest.mark.parametrize("size", [1, 5, 11, len(TEN)])
def test_a_declined_event_takes_the_full_path_wherever_the_reads_cut_it(size):
    rep = Skimming(decline=4)
    out, s = run(rep, _reads(TEN, size))
    assert out == TEN and s.error is None
    assert rep.full == [0, 4] and rep.fast == [1, 2, 3, 5, 6, 7, 8, 9]


@pytest.mark.parametrize("size", [1, 5, 11, 16, len(TEN)])
def test_a_skimmed_event_that_raises_fails_open_and_loses_nothing(size):
    """n == 5 raises in ``skimmed``: whether a read holds it whole or completes it, the
    rest of the stream goes out as it came, byte for byte, and nothing more is repaired."""
    rep = Skimming(boom=5)
    out, s = run(rep, _reads(TEN, size))
    assert out == TEN
    assert isinstance(s.error, RuntimeError)
    assert rep.fast == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "first",
    [b"\xef\xbb\xbfdata: {}\n\n", b"\xef", b"\xef\xbb", b'data: {"n":0}\r\n\r\n', b""],
    ids=["bom", "bom-1", "bom-2", "cr", "empty"],
)
def test_a_first_read_that_does_not_decide_the_fast_path_leaves_the_parser_undecided(first):
    p = SseParser()
    assert not p.start(first)
    assert not p.fast()
    assert p.feed(first) == SseParser().feed(first)  # as if start had not been asked


def test_the_first_read_decides_the_fast_path_as_feed_would():
    p, q = SseParser(), SseParser()
    assert p.start(b"da")  # (no BOM starts with "d": decided on two bytes)
    assert p.fast() and p.idle()
    assert not p.start(b"data")  # decided: asked again, nothing changes
    assert p.feed(b'data: {"n":0}\n\nda') == q.feed(b'data: {"n":0}\n\nda')
    assert p.pending(b'ta: {"n":1}\n\n', 13) == b'data: {"n":1}\n\n'
    assert not p.idle()
    p.taken()
    assert p.idle() and p.close() == []


def test_a_large_event_a_read_completes_goes_the_full_way():
    """An event begun in earlier reads is joined to be matched only up to SEAMED_MAX bytes
    (else the parser would join it a second time): a larger one of a learned layout takes
    the full path, a small one cut the same way is skimmed."""
    from streamfix.wire.sse import SEAMED_MAX

    def ev(n, size):
        return b'data: {"n":%d,"s":"%s"}\n\n' % (n, b"x" * size)

    big, small = ev(2, SEAMED_MAX), ev(3, 100)
    body = ev(0, 10) + ev(1, 10) + big + small
    reads = [ev(0, 10) + ev(1, 10), big[:1000], big[1000:], small[:50], small[50:]]
    rep = Skimming()
    out, s = run(rep, reads)
    assert out == body and s.error is None
    assert rep.full == [0, 2] and rep.fast == [1, 3]
