"""Other gateways' defect classes: each has a recording built from its cited
issue, a contract rule that reports it, and a repair rule (an option) that removes it.

The hand-checked expected bodies are compared in test_recordings.py; here: the raw body
violates the contract rule, the repaired one does not, and with the repair rule off the
defect stays (so each rule is what removes it). Plus the two misfires of older rules on
these shapes, measured before the fix.
"""

from collections import Counter
from dataclasses import replace

import orjson
import pytest
from streamfix.wire.apis import stream_repairer
from streamfix.wire.contract import check
from streamfix.wire.invariants import json_events
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.stream import StreamRepair
from streamfix.wire.verdict import Verdict

from streamfix.recordings import Recording, load

# recording, repair rule (Rules field), contract rules it answers
CASES = [
    ("responses-litellm-unannounced", "announce", {"item.announced"}),
    ("responses-copilot-rotating-ids", "item_id", {"item.id"}),
    ("chat-litellm-text-replay", "replay", {"text.replay"}),
    ("chat-litellm-text-twice", "replay", {"text.replay"}),
    ("responses-litellm-text-twice", "replay", {"text.replay"}),
    ("responses-keepalive-ping", "nonstandard", {"sse.nonstandard", "sse.empty_data"}),
    ("responses-eof-no-terminal", "eof_terminal", {"terminal.present"}),
    ("responses-eof-open-call", "eof_terminal", {"terminal.present"}),
    ("responses-failed-sequence-restart", "sequence", {"response.sequence"}),
    ("responses-failed-sequence-restart", "response_id", {"response.id"}),
    ("responses-reasoning-no-summary", "reasoning_summary", {"reasoning.summary"}),
    ("responses-reasoning-no-summary-done", "reasoning_summary", {"reasoning.summary"}),
]


def repair(rec: Recording, rules: Rules | None = None, chunk: int = 0) -> bytes:
    req = rec.request["body"]
    ctx = FlowContext(model=req.get("model"), started_at=rec.meta["started_at"], request=req)
    s = StreamRepair(stream_repairer(rec.api, rules or Rules(), ctx, Verdict()))
    body = rec.body
    pieces = [body[i : i + chunk] for i in range(0, len(body), chunk)] if chunk else [body]
    out = b"".join(s.feed(p) for p in pieces) + s.close()
    assert s.error is None
    return out


def rules_of(body: bytes, api: str) -> set[str]:
    return {v.rule for v in check(api, body)}


@pytest.mark.parametrize(("name", "rule", "contract"), CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES])
def test_reported_raw_removed_by_its_rule_left_with_the_rule_off(name, rule, contract):
    rec = load(name)
    assert contract <= rules_of(rec.body, rec.api)
    out = repair(rec)
    assert out == rec.expected and check(rec.api, out) == []
    off = repair(rec, replace(Rules(), **{rule: False}))
    assert contract & rules_of(off, rec.api), f"with {rule} off the defect should stay"
    for n in (1, 5, 64):  # any chunk boundaries, same bytes
        assert repair(rec, chunk=n) == rec.expected


def test_eof_failure_is_a_failure_with_the_streams_id_and_next_number():
    rec = load("responses-eof-no-terminal")
    evs = json_events(rec.expected)
    last = evs[-1]
    assert last["type"] == "response.failed" and last["response"]["status"] == "failed"
    assert last["response"]["id"] == evs[0]["response"]["id"]
    assert last["sequence_number"] == evs[-2]["sequence_number"] + 1
    assert not any(e["type"] in ("response.completed", "response.incomplete") for e in evs)


def test_eof_failure_lists_every_announced_item_an_open_one_incomplete():
    """The synthesized response.failed lists the closed items as closed and the
    open call as announced, with its arguments so far and status incomplete; no done event
    is made up for it. Rule terminal_output off: the closed ones only (the old output),
    which the contract reports."""
    rec = load("responses-eof-open-call")
    evs = json_events(repair(rec))
    failed = evs[-1]
    assert failed["type"] == "response.failed"
    assert [o["id"] for o in failed["response"]["output"]] == ["rs_e2", "msg_e2", "fc_e2"]
    call = failed["response"]["output"][2]
    assert (call["status"], call["arguments"]) == ("incomplete", '{"cmd":"ls')
    assert not any(e["type"] == "response.output_item.done" and e["item"]["id"] == "fc_e2" for e in evs)
    off = repair(rec, Rules(terminal_output=False))
    assert [o["id"] for o in json_events(off)[-1]["response"]["output"]] == ["rs_e2", "msg_e2"]
    assert rules_of(off, "responses") == {"terminal.output"}


def test_misfire_dense_output_index_does_not_move_a_call_onto_an_unannounced_message():
    """Measured before the fix (LiteLLM #22102 shape): with the message never announced,
    the dense output_index rule renumbered the call from 1 to 0, onto the message's index,
    and the terminal output was reordered. Now: announce on, the message is announced and
    nothing moves; announce off, the stream passes as it came."""
    rec = load("responses-litellm-unannounced")
    out = json_events(repair(rec))
    [call_added] = [
        e for e in out if e["type"] == "response.output_item.added" and e["item"]["type"] == "function_call"
    ]
    assert call_added["output_index"] == 1
    assert [o["id"] for o in out[-1]["response"]["output"]] == ["msg_0a1b", "fc_0a1c"]
    assert repair(rec, Rules(announce=False)) == rec.body


def test_misfire_rotating_ids_give_two_terminal_items_not_four():
    """Measured before the fix (LiteLLM #30071 / Copilot shape): the terminal output came
    out with 4 items (the two announced ones, then the gateway's under its final ids as
    extras). Now 2, with the announced ids; rule item_id off shows the old result."""
    rec = load("responses-copilot-rotating-ids")
    ids = [o["id"] for o in json_events(repair(rec))[-1]["response"]["output"]]
    assert ids == ["rs_c1", "msg_c1"]
    old = [o["id"] for o in json_events(repair(rec, Rules(item_id=False)))[-1]["response"]["output"]]
    assert old == ["rs_c6", "msg_c7", "rs_c8", "msg_c9"]  # the done items, then the extras


def test_responses_text_replay_dropped_and_done_text_once():
    """LiteLLM #41109's replay on the Responses side: the delta repeating the whole text is
    dropped; a done text the replay doubled lists it once."""

    def ev(t, **kw):
        return b"event: " + t.encode() + b"\ndata: " + orjson.dumps({"type": t, **kw}) + b"\n\n"

    base = {"item_id": "m", "output_index": 0, "content_index": 0}
    body = (
        ev("response.created", response={"id": "r", "created_at": 1, "model": "m"})
        + ev("response.output_item.added", output_index=0, item={"id": "m", "type": "message", "content": []})
        + ev("response.content_part.added", **base, part={"type": "output_text", "text": ""})
        + ev("response.output_text.delta", **base, delta="ab")
        + ev("response.output_text.delta", **base, delta="cd")
        + ev("response.output_text.delta", **base, delta="abcd")
        + ev("response.output_text.done", **base, text="abcdabcd")
    )
    rec = Recording("t", None, {"api": "responses", "started_at": 1, "request": {"body": {}}}, body)
    out = repair(rec, Rules(eof_terminal=False))
    deltas = [e["delta"] for e in json_events(out) if e["type"] == "response.output_text.delta"]
    assert deltas == ["ab", "cd"]
    assert json_events(out)[-1]["text"] == "abcd"
    assert "text.replay" in rules_of(body, "responses")
    assert repair(rec, Rules(eof_terminal=False, replay=False)) == body
    # two equal deltas of one char each are text, not a replay (needs two deltas before)
    assert "text.replay" not in rules_of(body.replace(b'"cd"', b'"ab"').replace(b'"abcd"', b'"x"'), "responses")


# --- step aside: already-correct streams pass byte for byte ----------------------------

RULE_FIELDS = [f for f in Rules.__dataclass_fields__ if f != "truncation"]


@pytest.mark.parametrize("off", [None, *RULE_FIELDS])
def test_litellm_bridge_passes_byte_for_byte_with_any_rule_off(off):
    rec = load("responses-litellm-bridge-clean")
    rules = Rules() if off is None else replace(Rules(), **{off: False})
    assert repair(rec, rules) == rec.body
    assert check("responses", rec.body) == []


@pytest.mark.parametrize("off", [None, *RULE_FIELDS])
def test_fixed_cpa_v8_only_gets_created_at(off):
    """CPA v8's fixed translator (function_call status, announced summary parts): the one
    thing it still leaves out is created_at on response.created; check reports exactly
    that, repair fills exactly that, and every other byte passes with any rule off."""
    rec = load("responses-cpa-v8-fixed")
    assert [str(v) for v in check("responses", rec.body)] == [
        "event 0: response.fields: response.created without response.created_at"
    ]
    rules = Rules() if off is None else replace(Rules(), **{off: False})
    out = repair(rec, rules)
    assert out == (rec.body if off == "schema_fill" else rec.expected)
    first = rec.body.index(b"\n\n") + 2
    assert out[out.index(b"\n\n") + 2 :] == rec.body[first:]  # only response.created differs


def _ev(t, **kw):
    return b"event: " + t.encode() + b"\ndata: " + orjson.dumps({"type": t, **kw}) + b"\n\n"


def test_reasoning_summary_on_done_and_terminal_from_what_was_streamed():
    """The summary a gateway stripped from the done item and the terminal's
    output is what was streamed into the item (here one part), not an empty list; the
    terminal's entry takes the done item's."""
    rs = {"id": "rs", "type": "reasoning"}
    sd = {"item_id": "rs", "output_index": 0, "summary_index": 0}
    body = (
        _ev("response.created", sequence_number=0, response={"id": "r", "created_at": 1, "model": "m"})
        + _ev("response.output_item.added", sequence_number=1, output_index=0, item=rs)
        + _ev(
            "response.reasoning_summary_part.added", sequence_number=2, **sd, part={"type": "summary_text", "text": ""}
        )
        + _ev("response.reasoning_summary_text.delta", sequence_number=3, **sd, delta="Plan")
        + _ev("response.reasoning_summary_text.delta", sequence_number=4, **sd, delta=" it.")
        + _ev("response.output_item.done", sequence_number=5, output_index=0, item=rs)
        + _ev(
            "response.completed",
            sequence_number=6,
            response={
                "id": "r",
                "created_at": 1,
                "model": "m",
                "output": [rs],
                "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
            },
        )
    )
    rec = Recording("t", None, {"api": "responses", "started_at": 1, "request": {"body": {}}}, body)
    evs = json_events(repair(rec))
    want = [{"type": "summary_text", "text": "Plan it."}]
    assert evs[1]["item"]["summary"] == []
    assert evs[5]["item"] == {"id": "rs", "type": "reasoning", "summary": want}
    assert evs[6]["response"]["output"] == [{"id": "rs", "type": "reasoning", "summary": want}]
    assert rules_of(body, "responses") == {"reasoning.summary"}
    assert check("responses", repair(rec)) == []
    assert repair(rec, Rules(reasoning_summary=False)) == body


def test_reasoning_summary_in_a_json_body():
    from streamfix.wire.responses import repair_responses_json

    obj = {"id": "r", "created_at": 1, "model": "m", "output": [{"id": "rs", "type": "reasoning"}]}
    fired = Counter()
    assert repair_responses_json(obj, Rules(), FlowContext(model="m"), Verdict(), fired)
    assert obj["output"][0] == {"id": "rs", "type": "reasoning", "summary": []}
    assert fired["reasoning_summary"] == 1
    obj = {"id": "r", "created_at": 1, "model": "m", "output": [{"id": "rs", "type": "reasoning"}]}
    repair_responses_json(obj, Rules(reasoning_summary=False), FlowContext(model="m"), Verdict())
    assert "summary" not in obj["output"][0]


# --- the text sent twice as a second run of ordinary deltas ------------------


def _chat_body(contents: list[str], end: bool = True) -> bytes:
    def chunk(delta, finish=None):
        return (
            b"data: "
            + orjson.dumps(
                {
                    "id": "c",
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": "m",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                }
            )
            + b"\n\n"
        )

    body = chunk({"role": "assistant", "content": ""}) + b"".join(chunk({"content": c}) for c in contents)
    return body + (chunk({}, "stop") + b"data: [DONE]\n\n" if end else b"")


def _responses_body(deltas: list[str], end: bool = True) -> bytes:
    base = {"item_id": "m", "output_index": 0, "content_index": 0}
    evs = [
        ("response.created", {"response": {"id": "r", "created_at": 1, "model": "m"}}),
        ("response.output_item.added", {"output_index": 0, "item": {"id": "m", "type": "message", "content": []}}),
        ("response.content_part.added", {**base, "part": {"type": "output_text", "text": ""}}),
        *(("response.output_text.delta", {**base, "delta": d}) for d in deltas),
    ]
    if end:
        text = "".join(deltas)
        item = {"id": "m", "type": "message", "content": [{"type": "output_text", "text": text}]}
        usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
        evs += [
            ("response.output_text.done", {**base, "text": text}),
            ("response.output_item.done", {"output_index": 0, "item": item}),
            (
                "response.completed",
                {"response": {"id": "r", "created_at": 1, "model": "m", "output": [item], "usage": usage}},
            ),
        ]
    return b"".join(_ev(t, sequence_number=i, **kw) for i, (t, kw) in enumerate(evs))


def _texts(api: str, out: bytes) -> list[str]:
    """What the client is streamed, delta by delta (chat: non-empty contents)."""
    if api == "chat":
        return [
            e["choices"][0]["delta"]["content"]
            for e in json_events(out)
            if e.get("choices") and e["choices"][0]["delta"].get("content")
        ]
    return [e["delta"] for e in json_events(out) if e["type"] == "response.output_text.delta"]


def _run(api: str, deltas: list[str], end: bool = True, rules: Rules | None = None) -> tuple[bytes, bytes]:
    body = (_chat_body if api == "chat" else _responses_body)(deltas, end)
    rec = Recording("t", None, {"api": api, "started_at": 1, "request": {"body": {}}}, body)
    return body, repair(rec, rules or Rules(eof_terminal=False))


TEXT = ["The build", " passed", " on all targets."]  # 32 characters in three deltas
EDGES = {
    # deltas -> what the client is streamed
    "repeat, chunked otherwise": (TEXT + ["The", " build passed on", " all targets."], TEXT),
    "repeat, one delta": (TEXT + ["The build passed on all targets."], TEXT),
    "diverges at the last char": (
        TEXT + ["The build", " passed on all targets!"],
        TEXT + ["The build", " passed on all targets!"],
    ),
    "repeat that goes on": (
        TEXT + ["The build passed", " on all targets. Done."],
        TEXT + ["The build passed", " on all targets. Done."],
    ),
    "a text that starts ha ha": (
        ["ha ha", ", the build", " passed on all targets.", "ha ha", "!"],
        ["ha ha", ", the build", " passed on all targets.", "ha ha", "!"],
    ),
    "a phrase repeated": (["ha"] + [" ha"] * 7, ["ha"] + [" ha"] * 7),
    "a phrase repeated, spaces apart": (["ha", " "] * 12, ["ha", " "] * 12),
    "a rule of dashes": (["--"] * 20, ["--"] * 20),
    "too short to tell": (["ab", "cd", "ab", "cd"], ["ab", "cd", "ab", "cd"]),
    "diverges, then repeats": (
        TEXT + ["The", " end."] + ["The build passed on all targets.The end."],
        TEXT + ["The", " end."],
    ),
}


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("case", list(EDGES))
def test_text_twice_edges(api: str, case: str) -> None:
    """wire.contract.repeat's definition, on both APIs: the repeat is dropped wherever it
    starts and however it is chunked; a run that diverges (at the last character too) or
    goes on, a text that starts "ha ha", a phrase said over and over, and a text too short
    to tell pass whole and in order; the contract agrees with the repair."""
    deltas, want = EDGES[case]
    body, out = _run(api, deltas)
    assert _texts(api, out) == want
    repeated = want != deltas
    assert ("text.replay" in rules_of(body, api)) == repeated
    assert "text.replay" not in rules_of(out, api)
    if repeated:
        _, off = _run(api, deltas, rules=Rules(eof_terminal=False, replay=False))
        assert _texts(api, off) == deltas  # the rule off: the text twice
    else:
        assert out == body  # held, then released: byte for byte


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_text_twice_cut_by_the_end_or_the_upstream(api: str) -> None:
    """A repeat that the stream's end cuts before it completes cannot be told from text:
    every held delta goes out (before the failure that rule eof_terminal adds), and the
    same when the upstream fails (salvage): nothing held is lost, nothing is decided."""
    deltas = TEXT + ["The build", " passed"]
    body, out = _run(api, deltas, end=False, rules=Rules())
    assert _texts(api, out) == deltas
    assert "text.replay" not in rules_of(out, api)
    assert check(api, out) == []  # ended by the failure rule eof_terminal adds
    rep = stream_repairer(api, Rules(), FlowContext(model="m", request={}), Verdict())
    s = StreamRepair(rep)
    sent = s.feed(body)
    assert _texts(api, sent) == TEXT and len(rep.held) == 2  # the two deltas of the run wait
    got = sent + s.salvage()
    assert _texts(api, got) == deltas and not rep.held
    assert check(api, got, prefix=True) == []


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_text_twice_hold_is_bounded(api: str) -> None:
    """A run that stays a prefix of a long text is held for at most REPLAY_HOLD_LIMIT events,
    then goes out as it came."""
    from streamfix.wire.holding import REPLAY_HOLD_LIMIT

    first = [f"w{i} " for i in range(REPLAY_HOLD_LIMIT + 10)]
    body = (_chat_body if api == "chat" else _responses_body)(first + first[: REPLAY_HOLD_LIMIT + 5], end=False)
    rep = stream_repairer(api, Rules(), FlowContext(model="m", request={}), Verdict())
    s = StreamRepair(rep)
    out = s.feed(body)
    assert len(rep.held) < REPLAY_HOLD_LIMIT
    assert len(_texts(api, out)) > len(first) + REPLAY_HOLD_LIMIT - 10


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_text_twice_with_an_empty_delta_inside(api: str) -> None:
    """An empty delta inside a possible repeat is held with it, in its place: dropped with a
    repeat (Responses; a chat chunk with empty content stays as it is), numbered in order
    with a run that diverges (the stream then passes byte for byte)."""
    body, out = _run(api, TEXT + ["The", "", " build passed on", " all targets."])
    assert [t for t in _texts(api, out) if t] == TEXT
    assert "text.replay" in rules_of(body, api) and "text.replay" not in rules_of(out, api)
    body, out = _run(api, TEXT + ["The", "", " build passed!"])
    assert out == body
