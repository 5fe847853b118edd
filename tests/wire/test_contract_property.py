"""hypothesis over the stream contract.

Streams generated from the contract (Responses: messages, function calls and reasoning
items in any order and number; chat: text and tool calls) pass the checker and pass every
repairer byte for byte. Each defect class of the other gateways, injected into such a
stream, is reported by the checker (its rule) and removed by the repairer, whose output
then passes the checker. The checker gives the same violations for any chunking.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamfix.wire.apis import stream_repairer
from streamfix.wire.contract import StreamChecker, check
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.stream import StreamRepair
from streamfix.wire.verdict import Verdict

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
WORDS = st.text(alphabet="abcdefgh ", min_size=1, max_size=6)


def repair(api: str, body: bytes) -> bytes:
    s = StreamRepair(stream_repairer(api, Rules(), FlowContext(model="m", started_at=7), Verdict()))
    out = s.feed(body) + s.close()
    assert s.error is None
    return out


def rules(api: str, body: bytes) -> set[str]:
    return {v.rule for v in check(api, body)}


# --- a correct Responses stream, built from the contract -----------------------------

item_spec = st.one_of(
    st.tuples(st.just("message"), st.lists(WORDS, min_size=1, max_size=4)),
    st.tuples(st.just("function_call"), st.dictionaries(st.sampled_from("xyz"), st.integers(0, 9), max_size=3)),
    st.tuples(st.just("reasoning"), st.lists(WORDS, min_size=1, max_size=3)),
)


def responses_events(items: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Every event a correct stream of these items has, in order, numbered."""
    resp = {"id": "resp_1", "object": "response", "created_at": 7, "model": "m", "status": "in_progress", "output": []}
    evs: list[dict[str, Any]] = [
        {"type": "response.created", "response": resp},
        {"type": "response.in_progress", "response": resp},
    ]
    done_items = []
    for i, (kind, spec) in enumerate(items):
        iid = f"{kind[:2]}_{i}"
        at = {"item_id": iid, "output_index": i}
        if kind == "message":
            deltas = [f"{n}{w}" for n, w in enumerate(spec)]  # a delta never repeats the text so far
            text = "".join(deltas)
            part = {"type": "output_text", "annotations": [], "text": ""}
            done = {
                "id": iid,
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{**part, "text": text}],
            }
            evs += [
                {
                    "type": "response.output_item.added",
                    "output_index": i,
                    "item": {"id": iid, "type": "message", "status": "in_progress", "role": "assistant", "content": []},
                },
                {"type": "response.content_part.added", **at, "content_index": 0, "part": part},
            ]
            evs += [{"type": "response.output_text.delta", **at, "content_index": 0, "delta": d} for d in deltas]
            evs += [
                {"type": "response.output_text.done", **at, "content_index": 0, "text": text},
                {"type": "response.content_part.done", **at, "content_index": 0, "part": {**part, "text": text}},
            ]
        elif kind == "function_call":
            args = orjson.dumps(spec).decode()
            call = {"id": iid, "type": "function_call", "call_id": f"call_{i}", "name": "f", "arguments": ""}
            done = {**call, "arguments": args, "status": "completed"}
            evs += [
                {"type": "response.output_item.added", "output_index": i, "item": {**call, "status": "in_progress"}},
                *[
                    {"type": "response.function_call_arguments.delta", **at, "delta": args[k : k + 4]}
                    for k in range(0, len(args), 4)
                ],
                {"type": "response.function_call_arguments.done", **at, "arguments": args},
            ]
        else:
            text = "".join(spec)
            done = {"id": iid, "type": "reasoning", "summary": [{"type": "summary_text", "text": text}]}
            sat = {**at, "summary_index": 0}
            evs += [
                {
                    "type": "response.output_item.added",
                    "output_index": i,
                    "item": {"id": iid, "type": "reasoning", "summary": []},
                },
                {"type": "response.reasoning_summary_part.added", **sat, "part": {"type": "summary_text", "text": ""}},
                *[{"type": "response.reasoning_summary_text.delta", **sat, "delta": w} for w in spec],
                {"type": "response.reasoning_summary_text.done", **sat, "text": text},
            ]
        evs.append({"type": "response.output_item.done", "output_index": i, "item": done})
        done_items.append(done)
    final = {
        **resp,
        "status": "completed",
        "output": done_items,
        "usage": {"input_tokens": 3, "output_tokens": 5, "total_tokens": 8},
    }
    evs.append({"type": "response.completed", "response": final})
    return [
        {"type": e["type"], "sequence_number": n, **{k: v for k, v in e.items() if k != "type"}}
        for n, e in enumerate(evs)
    ]


def sse(evs: list[Any]) -> bytes:
    return b"".join(
        e if isinstance(e, bytes) else b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n"
        for e in evs
    )


@SETTINGS
@given(st.lists(item_spec, max_size=5))
def test_generated_responses_streams_pass_checker_and_repairer_unchanged(items):
    body = sse(responses_events(items))
    assert check("responses", body) == []
    assert repair("responses", body) == body


@SETTINGS
@given(st.lists(item_spec, max_size=4), st.lists(st.integers(1, 50), max_size=8))
def test_checker_is_the_same_for_any_chunking(items, cuts):
    evs = responses_events(items)
    evs[1]["sequence_number"] = 0  # a violation or two, so there is something to compare
    body = sse(evs)[:-20]
    whole = check("responses", body)
    c, pos = StreamChecker("responses"), 0
    for n in cuts:
        c.feed(body[pos : pos + n])
        pos += n
    c.feed(body[pos:])
    assert c.close() == whole


# --- each defect class injected: reported, removed, and the repaired stream passes ----


def drop_announcements(evs, kinds):
    """LiteLLM #22102: a message's output_item.added and content_part.added left out."""
    msg = next(
        (e["item"]["id"] for e in evs if e["type"] == "response.output_item.added" and e["item"]["type"] == "message"),
        None,
    )
    if msg is None:
        return None, None
    out = [
        e
        for e in evs
        if not (e["type"] == "response.content_part.added" and e.get("item_id") == msg)
        and not (e["type"] == "response.output_item.added" and e["item"].get("id") == msg)
    ]
    return out, "item.announced"


def rotate_ids(evs, kinds):
    """LiteLLM #30071: every event of an item carries another item_id (the done item and the
    terminal's entry too)."""
    n = 0
    out = []
    for e in evs:
        e = orjson.loads(orjson.dumps(e))
        if "item_id" in e:
            n += 1
            e["item_id"] = f"{e['item_id']}_r{n}"
        elif e["type"] == "response.output_item.done":
            e["item"]["id"] += "_done"
        elif e["type"] == "response.completed":
            for o in e["response"]["output"]:
                o["id"] += "_final"
        out.append(e)
    return (out, "item.id") if n else (None, None)


def replay_text(evs, kinds):
    """LiteLLM #41109: after a message's deltas (two or more), the whole text once more."""
    for k, e in enumerate(evs):
        if e["type"] == "response.output_text.done":
            deltas = [d for d in evs[:k] if d["type"] == "response.output_text.delta" and d["item_id"] == e["item_id"]]
            if len(deltas) >= 2:
                return evs[:k] + [{**deltas[0], "delta": e["text"]}] + evs[k:], "text.replay"
    return None, None


def foreign_events(evs, kinds):
    """opencode #40171, vercel/ai #20574, CPA #2460: ping, keepalive, empty data."""
    at = len(evs) // 2
    extra = [
        b'event: ping\ndata: {"type":"ping"}\n\n',
        b"data: \n\n",
        b'event: keepalive\ndata: {"type":"keepalive"}\n\n',
    ]
    return evs[:at] + extra + evs[at:], "sse.nonstandard"


def cut_before_terminal(evs, kinds):
    """pi #8473, codex #41340: the stream ends without a terminal event."""
    return evs[:-1], "terminal.present"


def failed_restarting(evs, kinds):
    """onyx #13730: a relay's response.failed numbered 0, with another response id."""
    failed = {
        "type": "response.failed",
        "sequence_number": 0,
        "response": {
            "id": "resp_other",
            "object": "response",
            "status": "failed",
            "output": [],
            "error": {"code": "server_error", "message": "x"},
        },
    }
    return evs[:-1] + [failed], "response.sequence"


def no_summary(evs, kinds):
    """codex-acp #266: a reasoning item announced without summary."""
    out, hit = [], False
    for e in evs:
        if e["type"] == "response.output_item.added" and e["item"]["type"] == "reasoning":
            e = orjson.loads(orjson.dumps(e))
            del e["item"]["summary"]
            hit = True
        out.append(e)
    return (out, "reasoning.summary") if hit else (None, None)


DEFECTS = [
    drop_announcements,
    rotate_ids,
    replay_text,
    foreign_events,
    cut_before_terminal,
    failed_restarting,
    no_summary,
]


@SETTINGS
@given(st.lists(item_spec, min_size=1, max_size=4), st.sampled_from(DEFECTS))
def test_each_injected_defect_is_reported_and_repaired(items, defect):
    evs, rule = defect(responses_events(items), items)
    if evs is None:
        return  # this stream has nothing the defect applies to
    body = sse(evs)
    assert rule in rules("responses", body), defect.__name__
    out = repair("responses", body)
    assert check("responses", out) == [], (defect.__name__, check("responses", out))
    assert repair("responses", out) == out  # idempotent


# --- chat ----------------------------------------------------------------------------


def chat_chunks(texts: list[str], calls: list[dict[str, int]]) -> list[dict[str, Any]]:
    def chunk(delta, finish=None):
        return {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 7,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": f"{n}{t}"}) for n, t in enumerate(texts)]
    for i, args in enumerate(calls):
        a = orjson.dumps(args).decode()
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {"index": i, "id": f"call_{i}", "type": "function", "function": {"name": "f", "arguments": ""}}
                    ]
                }
            )
        )
        out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": a}}]}))
    out.append(chunk({}, "tool_calls" if calls else "stop"))
    return out


def chat_sse(chunks: list[Any], done: bool = True) -> bytes:
    body = b"".join(c if isinstance(c, bytes) else b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks)
    return body + (b"data: [DONE]\n\n" if done else b"")


chat_spec = (
    st.lists(WORDS, max_size=4),
    st.lists(st.dictionaries(st.sampled_from("xy"), st.integers(0, 9)), max_size=3),
)


@SETTINGS
@given(*chat_spec)
def test_generated_chat_streams_pass_checker_and_repairer_unchanged(texts, calls):
    body = chat_sse(chat_chunks(texts, calls))
    assert check("chat", body) == []
    assert repair("chat", body) == body


@SETTINGS
@given(*chat_spec, st.sampled_from(["replay", "foreign", "cut"]))
def test_chat_defects_reported_and_repaired(texts, calls, defect):
    chunks = chat_chunks(texts, calls)
    done = True
    if defect == "replay":
        if len(texts) < 2:
            return
        whole = "".join(f"{n}{t}" for n, t in enumerate(texts))
        chunks.insert(
            len(texts) + 1, {**chunks[1], "choices": [{**chunks[1]["choices"][0], "delta": {"content": whole}}]}
        )
        rule = "text.replay"
    elif defect == "foreign":
        chunks.insert(1, b'data: {"type":"keepalive"}\n\n')
        chunks.insert(2, b"data: \n\n")
        rule = "sse.nonstandard"
    else:
        chunks, done, rule = chunks[:-1], False, "terminal.present"
    body = chat_sse(chunks, done)
    assert rule in rules("chat", body)
    out = repair("chat", body)
    assert check("chat", out) == [], check("chat", out)
