"""Skimming on /v1/chat/completions (wire/skim.py; ChatRepairer._common, _takes, skimmed).

The bar is equivalence: a stream repaired with skimming on (common chunks read from a
learned layout, no JSON parse) and off (every chunk parsed) gives the same bytes, notes,
counts, fired rules, decision and verdict digest, in every chunking. Checked on every chat
recording and the chat bench stream, and on generated streams built to find the seams:
escapes (\\u003c, \\/, \\n, \\uXXXX, surrogate pairs, invalid ones), non-ASCII, invalid
UTF-8, raw control characters, big, negative, ``-0`` and leading-zero integers, key order
changes, spaces, tool call index gaps and reuse, finishes, usage chunks, errors and repeats
(rule replay) in between. In the pure build the parsed common path (``_common``) is also
compared with the full path alone (``_common`` switched off), the code it short-cuts.
"""

from __future__ import annotations

import json
import random
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repairkit import cut, recordings, skim_facts, skim_same
from streamfix.wire.chat import ChatRepairer
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.stream import StreamRepair
from streamfix.wire.verdict import Verdict
from support import compiled_core

from streamfix import bench

REQ = {"model": "devin/swe-2", "stream": True, "max_tokens": 400, "messages": []}


def repair(body_pieces: list[bytes], request: Any, skim: bool, rules: Rules | None = None) -> tuple[Any, ...]:
    return skim_facts("chat", body_pieces, request, skim, rules)


def chunkings(body: bytes, seed: int) -> dict[str, list[bytes]]:
    evs = bench.events_of(body)
    rng = random.Random(seed)
    cut: list[bytes] = []
    i = 0
    while i < len(body):
        n = rng.choice([1, 2, 7, 33, 100, 300, 4096, 16384])
        cut.append(body[i : i + n])
        i += n
    pairs = [b"".join(evs[k : k + 2]) for k in range(0, len(evs), 2)]
    return {"events": evs, "whole": [body], "pairs": pairs, "random": cut}


def same(pieces: list[bytes], request: Any, rules: Rules | None = None) -> int:
    return skim_same("chat", pieces, request, rules)


# --- (a) recordings and the bench stream ------------------------------------------
CHAT_RECORDINGS = [r for r in recordings("chat") if r.streaming]


def test_there_are_chat_recordings():
    assert len(CHAT_RECORDINGS) >= 5


@pytest.mark.parametrize("rec", CHAT_RECORDINGS, ids=lambda r: r.name)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_recording_skim_on_equals_off(rec, seed):
    for pieces in chunkings(rec.body, seed).values():
        same(pieces, rec.request.get("body") or {})


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize(
    "rules",
    [Rules(), Rules(tool_index=False), Rules(replay=False, tool_header=False)],
    ids=["default", "no-tool_index", "no-replay"],
)
def test_bench_chat_skim_on_equals_off(seed, rules):
    _, _, request, build = bench.STREAMS["chat"]
    body = build()
    got = {mode: same(pieces, request, rules) for mode, pieces in chunkings(body, seed).items()}
    n = len(bench.events_of(body))
    assert got["events"] > n * 0.9 and got["pairs"] > n * 0.9 and got["random"] > n * 0.5, got


# --- (c) skimming happens ----------------------------------------------------------
def test_bench_chat_is_mostly_skimmed_and_renumbered_while_skimmed():
    """More than half the chunks skimmed, one write each (as CPA sends them), the renumbered
    argument deltas among them: a skimmed chunk rewritten by rule tool_index (no parse)."""
    _, _, request, build = bench.STREAMS["chat"]
    evs = bench.events_of(build())
    v = Verdict()
    v.request(request)
    rep = ChatRepairer(Rules(), FlowContext(model="m", request=request), v)
    s = StreamRepair(rep)
    body = b"".join([s.feed(c) for c in evs] + [s.close()])
    assert s.error is None
    assert s.skimmed > len(evs) // 2
    kinds = sorted({layout.kind for layout in rep.skim.layouts})
    assert any(k.startswith("chat.call:") for k in kinds) and any(k.startswith("chat.text:") for k in kinds), kinds
    outs = bench.events_of(body)
    assert len(outs) == len(evs)
    # every tool call chunk went out renumbered (raw index 2.., ordinal 0..): the headers
    # parsed, the argument deltas after each call's first one skimmed (rendered, no parse)
    tool = [i for i, raw in enumerate(evs) if b'"tool_calls":[' in raw]
    assert len(tool) > 1500
    for i in tool:
        entry = orjson.loads(outs[i][6:])["choices"][0]["delta"]["tool_calls"][0]
        assert entry["index"] == orjson.loads(evs[i][6:])["choices"][0]["delta"]["tool_calls"][0]["index"] - 2
        assert outs[i] != evs[i]
    assert rep.fired["tool_index"] == len(tool)
    others = set(range(len(evs))) - set(tool)
    assert all(outs[i] == evs[i] for i in others)  # the rest as they came


# --- (b) generated streams -----------------------------------------------------------
MARK_STR = "\ue000"
"""In a generated string: replaced after serializing by one of BAD_STR (bytes no JSON
serializer writes)."""
BAD_STR = [
    b"\xff",
    b"\xc3",
    b"\xed\xa0\x80",
    b"\x01",
    b"\x1f",
    b"\\ud800",
    b"\\udc00x",
    b"\\x",
    b"\\u12",
    b"\\u003c",
    b"\\/",
    b"\\ud83d\\ude00",
    b"\\u0000",
    b"\t",
    b"\x7f",
    "\u2028".encode(),
]
MARK_INT = 918273645
"""A generated integer replaced by one of BAD_INT."""
BAD_INT = [
    b"-0",
    b"007",
    b"01",
    b"1e2",
    b"1.0",
    b"-1",
    b"123456789012345678",
    b"1234567890123456789",
    b"99999999999999999999",
    b"-5",
    b"0",
]

TEXT = st.text(
    alphabet=st.sampled_from(
        list('ab /<>&\\"\n\t\r') + ["é", "ü", "中", "😀", "\u2028", "\x00", "\x1f", "\x7f", MARK_STR]
    ),
    max_size=8,
)


def dumps(obj: Any, style: str) -> bytes:
    """JSON as one of the serializers gateways use."""
    if style == "orjson":
        return orjson.dumps(obj)
    if style == "go":  # Go's encoding/json: <, >, & escaped, compact
        return (
            json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
            .replace("<", "\\u003c")
            .replace(">", "\\u003e")
            .replace("&", "\\u0026")
            .encode("utf-8", "surrogatepass")
        )
    if style == "ascii":
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode()
    if style == "slash":
        return (
            json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
            .replace("/", "\\/")
            .encode("utf-8", "surrogatepass")
        )
    return json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass")  # "spaced"


@st.composite
def chat_stream(draw: Any) -> bytes:
    rnd = draw(st.randoms(use_true_random=False))
    ident = draw(st.sampled_from(["interaction_1", "chatcmpl-<x>/1", "id" + MARK_STR, "é"]))
    base: dict[str, Any] = {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": draw(st.sampled_from([1789000000, -3, 0, MARK_INT])),
        "model": "devin/swe-2",
    }
    if draw(st.booleans()):
        base["system_fingerprint"] = draw(TEXT)
    style = draw(st.sampled_from(["orjson", "go", "ascii", "slash", "spaced"]))
    out: list[bytes] = []
    texts: list[str] = []
    calls: list[int] = []

    def emit(delta: Any, finish: Any = None, usage: Any = None, shuffle: bool = False, **extra: Any) -> None:
        ch: dict[str, Any] = {"index": extra.pop("ci", 0), "delta": delta, "finish_reason": finish}
        obj = {**base, "choices": [ch], **extra}
        if usage is not None:
            obj["usage"] = usage
        if shuffle:  # another key order
            keys = list(obj)
            rnd.shuffle(keys)
            obj = {k: obj[k] for k in keys}
        st_ = style if rnd.random() < 0.9 else rnd.choice(["orjson", "go", "ascii", "slash", "spaced"])
        data = dumps(obj, st_)
        while MARK_STR.encode() in data:
            data = data.replace(MARK_STR.encode(), rnd.choice(BAD_STR), 1)
        while b"\\ue000" in data:
            data = data.replace(b"\\ue000", rnd.choice(BAD_STR), 1)
        while str(MARK_INT).encode() in data:
            data = data.replace(str(MARK_INT).encode(), rnd.choice(BAD_INT), 1)
        out.append(b"data: " + data + b"\n\n")

    steps = draw(
        st.lists(
            st.sampled_from(
                [
                    "role",
                    "text",
                    "text",
                    "text",
                    "reason",
                    "header",
                    "args",
                    "args",
                    "args",
                    "args",
                    "nameless",
                    "repeat",
                    "finish",
                    "usage",
                    "error",
                    "done",
                    "keepalive",
                    "shuffle",
                    "junk",
                    "two",
                    "ci",
                ]
            ),
            min_size=1,
            max_size=30,
        )
    )
    for step in steps:
        n = rnd.randint(1, 12)
        if step == "role":
            emit({"role": "assistant", "content": ""})
        elif step == "text":
            for _ in range(n):
                t = draw(TEXT)
                ci = 0 if rnd.random() < 0.85 else 1  # now and then another choice's delta
                if ci == 0:
                    texts.append(t)
                emit({"content": t}, ci=ci)
        elif step == "reason":
            for _ in range(n):
                emit({"reasoning_content": draw(TEXT)})
        elif step == "repeat":  # rule replay: the text so far again, delta by delta
            for t in texts:
                emit({"content": t})
        elif step in ("header", "nameless"):
            raw = rnd.choice([0, 1, 2, 5, MARK_INT, 3 + len(calls)])
            calls.append(raw)
            name = "" if step == "nameless" else rnd.choice(["write_file", "read", "é" + MARK_STR])
            emit(
                {
                    "tool_calls": [
                        {
                            "index": raw,
                            "id": rnd.choice(["call_1", f"call_{raw}", "", "x" + MARK_STR]),
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        elif step == "args":
            raw = rnd.choice(calls) if calls and rnd.random() < 0.9 else rnd.choice([0, 7, -1])
            full = rnd.random() < 0.3  # id, type and name on every delta, mostly blank (a late one now and then)
            for _ in range(n):
                entry: dict[str, Any] = {"index": raw, "function": {"arguments": draw(TEXT)}}
                if full:
                    entry = {
                        "index": raw,
                        "id": rnd.choice(["", "", " ", "call_9", None]),
                        "type": "function",
                        "function": {"name": rnd.choice(["", "", "late", None]), "arguments": draw(TEXT)},
                    }
                emit({"tool_calls": [entry]})
        elif step == "finish":
            usage = {"prompt_tokens": 10, "completion_tokens": rnd.choice([5, 500, MARK_INT]), "total_tokens": 20}
            emit({}, rnd.choice(["stop", "tool_calls", "length", "max_tokens"]), usage if rnd.random() < 0.5 else None)
        elif step == "usage":
            obj = {**base, "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 400, "total_tokens": 410}}
            out.append(b"data: " + dumps(obj, style) + b"\n\n")
        elif step == "error":
            out.append(b'data: {"error":{"message":"boom","type":"server_error"}}\n\n')
        elif step == "done":
            out.append(b"data: [DONE]\n\n")
        elif step == "keepalive":
            out.append(rnd.choice([b": keep-alive\n\n", b'data: {"type":"ping"}\n\n', b"event: ping\n\n"]))
        elif step == "shuffle":
            for _ in range(n):
                emit({"content": draw(TEXT)}, shuffle=True)
        elif step == "junk":
            out.append(
                rnd.choice(
                    [
                        b'data: {"choices":[{"delta":{"content":"a"}\n\n',
                        b"data: [1,2]\n\n",
                        b'data: {"choices": [ {"index":0,"delta":{"content":"x"}} ] }\n\n',
                    ]
                )
            )
        elif step == "two":  # two choices in one chunk
            obj = {
                **base,
                "choices": [
                    {"index": 0, "delta": {"content": "a"}, "finish_reason": None},
                    {"index": 1, "delta": {"content": "b"}, "finish_reason": None},
                ],
            }
            out.append(b"data: " + dumps(obj, style) + b"\n\n")
        elif step == "ci":  # another choice index, alone
            for _ in range(n):
                emit({"content": draw(TEXT)}, ci=rnd.choice([1, 2, MARK_INT]))
    return b"".join(out)


RULES = st.sampled_from(
    [
        Rules(),
        Rules(tool_index=False),
        Rules(replay=False),
        Rules(tool_header=False),
        Rules(truncation="off", nonstandard=False),
    ]
)


def test_generated_streams_skim_on_equals_off():
    seen = {"skimmed": 0, "skimmed_streams": 0, "examples": 0}

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(chat_stream(), RULES, st.lists(st.integers(min_value=0, max_value=20000), max_size=8), st.booleans())
    def prop(body: bytes, rules: Rules, cuts: list[int], nonempty_req: bool) -> None:
        request = REQ if nonempty_req else {}
        n = 0
        for pieces in (bench.events_of(body), cut(body, [c % (len(body) + 1) for c in cuts]), [body]):
            n += same(pieces, request, rules)
        seen["skimmed"] += n
        seen["skimmed_streams"] += n > 0
        seen["examples"] += 1

    prop()
    assert seen["examples"] >= 100
    # the generated streams exercise the skimmed path
    assert seen["skimmed"] > 60 and seen["skimmed_streams"] > 10, (
        seen
    )  # (the generator varies ids and models: another layout each time)


def test_skimmed_tricky_chunks_by_hand():
    """Chunks that match a learned layout but must not be skimmed as they are (checked by
    hand, not only against the full path): invalid UTF-8 in an unread string, a lone
    surrogate escape; and a rewritten one's escapes and ``-0`` as orjson writes them."""
    base = b'"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    head = (
        b"data: {"
        + base
        + b'"delta":{"tool_calls":[{"index":2,"id":"call_a","type":"function","function":{"name":"w","arguments":""}}]},"finish_reason":null}]}\n\n'
    )

    def args(arg: bytes, created: bytes = b"1", ident: bytes = b"c1") -> bytes:
        b = base.replace(b'"created":1', b'"created":' + created).replace(b'"id":"c1"', b'"id":"' + ident + b'"')
        return (
            b"data: {"
            + b
            + b'"delta":{"tool_calls":[{"index":2,"function":{"arguments":"'
            + arg
            + b'"}}]},"finish_reason":null}]}\n\n'
        )

    evs = [
        head,
        args(b"a"),
        args(b"\\u003c\\/x\\n"),
        args(b"b", ident=b"\xff"),
        args(b"\\ud800"),
        args(b"c", created=b"-0"),
        args(b"\xc3\xa9"),
        args(b"d"),
    ]
    v = Verdict()
    rep = ChatRepairer(Rules(), FlowContext(model="m"), v)
    s = StreamRepair(rep)
    outs = [s.feed(e) for e in evs]
    s.close()
    assert s.error is None
    assert outs[0].count(b'"index":0') == 2  # the header renumbered (parsed), choice index 0 too
    assert outs[1] == args(b"a").replace(b'"index":2', b'"index":0')  # learned here (parsed)
    # skimmed and rendered: the escapes as orjson writes them (< and / literal, \n kept)
    assert outs[2] == args(b"<\\/x\\n").replace(b"\\/", b"/").replace(b'"index":2', b'"index":0')
    assert outs[3] == evs[3] and outs[4] == evs[4]  # not JSON: passed as they came (full path, noted)
    assert outs[5] == args(b"c", created=b"0").replace(
        b'"index":2', b'"index":0'
    )  # orjson writes -0 as 0, so does this
    assert outs[6] == args("é".encode()).replace(b'"index":2', b'"index":0')
    assert s.skimmed == 3  # outs[2], outs[6], outs[7]; not the invalid ones, nor outs[5] (created is literal)
    assert sum("not JSON" in n for n in rep.notes) == 2  # a note for each
    assert v.digest() == repair([*evs], {}, False)[0][5]


@pytest.mark.skipif(compiled_core(), reason="switches a method off at run time, which compiled code does not see")
def test_common_path_equals_the_full_path(monkeypatch):
    """The parsed common path (``_common``) does what the full path alone does: the bench
    stream, the recordings and generated streams, with it switched off and on."""
    cases = [(bench.STREAMS["chat"][2], bench.STREAMS["chat"][3]())]
    cases += [(r.request.get("body") or {}, r.body) for r in CHAT_RECORDINGS]

    def both(pieces: list[bytes], request: Any, rules: Rules | None = None) -> None:
        on = repair(pieces, request, False, rules)[0]
        with monkeypatch.context() as m:
            m.setattr(ChatRepairer, "_common", lambda self, ev, obj: None)
            off = repair(pieces, request, False, rules)[0]
        assert on == off

    for request, body in cases:
        for pieces in chunkings(body, 1).values():
            both(pieces, request)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(chat_stream(), RULES)
    def prop(body: bytes, rules: Rules) -> None:
        both(bench.events_of(body), REQ, rules)

    prop()


def test_skimmed_values_the_rules_read():
    """A chunk's choice index and a call entry's id are literal in a layout (wire.chat's
    _SKIM_HOLES): a chunk of another choice, or an entry whose id is no longer the learned
    blank one, is another layout, parsed: recorded for that choice, or a header (rule
    tool_header)."""

    def text(ci: int, t: str) -> bytes:
        return (
            b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":%d,"delta":{"content":"%s"}}]}\n\n'
            % (ci, t.encode())
        )

    def args(id_: str, a: str) -> bytes:
        return (
            b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":'
            b'[{"index":4,"id":"%s","function":{"arguments":"%s"}}]}}]}\n\n' % (id_.encode(), a.encode())
        )

    head = (
        b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":'
        b'[{"index":4,"id":"call_a","type":"function","function":{"name":"w","arguments":""}}]}}]}\n\n'
    )
    evs = [
        text(0, "a"),
        text(0, "b"),
        text(1, "c"),
        head,
        args("", "x"),
        args("", "y"),
        args("call_a", "z"),
        args(" ", "w"),
    ]
    rep = ChatRepairer(Rules(), FlowContext(model="m"), Verdict())
    s = StreamRepair(rep)
    outs = [s.feed(e) for e in evs]
    s.close()
    assert s.error is None
    assert rep._choices == {0, 1}
    # skimmed: text b, args y (the learned layouts); parsed: the rest
    assert s.skimmed == 2
    assert outs[:3] == evs[:3]
    assert outs[5] == args("", "y").replace(b'"index":4', b'"index":0')
    assert outs[6] == args("call_a", "z").replace(b'"index":4', b'"index":0').replace(
        b'"id":"call_a",', b""
    )  # re-sent id dropped
    assert outs[7] == args(" ", "w").replace(b'"index":4', b'"index":0')
    assert rep._order[0].args.text() == "xyzw"


def test_a_created_that_changes_every_chunk_stops_the_learning():
    """A gateway whose every chunk has its own ``created`` (a clock): no layout serves a
    second chunk, so after MAX_UNUSED the text kind is learned no more (wire.skim); the
    repair is the one without skimming."""
    from streamfix.wire.skim import MAX_UNUSED

    def chunk(n: int, text: str) -> bytes:
        return (
            b"data: "
            + orjson.dumps(
                {
                    "id": "c1",
                    "object": "chat.completion.chunk",
                    "created": 1000 + n,
                    "model": "m",
                    "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
                }
            )
            + b"\n\n"
        )

    evs = [chunk(i, f" w{i}") for i in range(MAX_UNUSED + 12)] + [b"data: [DONE]\n\n"]
    rep = ChatRepairer(Rules(), FlowContext(model="m"), Verdict())
    s = StreamRepair(rep)
    for e in evs:
        s.feed(e)
    assert s.skimmed == 0
    assert rep.skim is not None and not rep.skim.tries("chat.text:content")
    assert max(layout.consts[("created",)] for layout in rep.skim.layouts) <= 1000 + MAX_UNUSED  # learned no more
    assert same(evs, {"model": "m", "stream": True}) == 0
