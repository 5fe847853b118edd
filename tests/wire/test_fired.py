"""EventRepairer.fired: which rule changed how many events, on every API.

The expected counts were worked out by hand from each recording's body (the comments
say which events); they are not the repairer's output copied back.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import fields, replace

import pytest
from repairkit import run
from streamfix.wire.apis import stream_repairer
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.stream import StreamRepair
from streamfix.wire.verdict import Verdict

from streamfix.recordings import all_recordings, load

RULE_NAMES = {f.name for f in fields(Rules)}


def repair(name: str, rules: Rules | None = None):
    rec = load(name)
    req = rec.request.get("body")
    v = Verdict()
    v.request(req)
    s = StreamRepair(stream_repairer(rec.api, rules or Rules(), FlowContext(request=req), v))
    s.feed(rec.body)
    s.close()
    assert s.error is None
    return s.repairer


@pytest.mark.parametrize(
    "name, expected, changed",
    [
        # created: created_at missing; the reasoning delta: item_id and summary_index
        # missing (schema_fill x2); the call's added, its done and the terminal's output
        # lack status (status x3); the terminal becomes response.incomplete (truncation)
        ("responses-devin-truncated", {"schema_fill": 2, "status": 3, "truncation": 1}, 5),
        # three tool_calls chunks, all with index 1 -> 0
        ("chat-devin-index1", {"tool_index": 3}, 3),
        # one message_delta: stop_reason end_turn -> max_tokens
        ("messages-devin-truncated", {"truncation": 1}, 1),
        # one finishing chunk: finishReason STOP -> MAX_TOKENS
        ("gemini-devin-truncated", {"truncation": 1}, 1),
        # the second run's three chunks, content emptied
        ("chat-litellm-text-twice", {"replay": 3}, 3),
        # the second run's three deltas dropped; output_text.done, content_part.done and
        # output_item.done list the text once (replay x3 more); the terminal's output
        # lists the message as closed (terminal_output)
        ("responses-litellm-text-twice", {"replay": 6, "terminal_output": 1}, 7),
        # the reasoning item's added, done and the terminal's entry: summary []
        ("responses-reasoning-no-summary-done", {"reasoning_summary": 3}, 3),
        # one synthesized response.failed, listing the open call (terminal_output)
        ("responses-eof-open-call", {"eof_terminal": 1, "terminal_output": 1}, 1),
    ],
)
def test_fired_counts_per_rule(name, expected, changed):
    rep = repair(name)
    assert dict(rep.fired) == expected
    assert rep.changed == changed


@pytest.mark.parametrize("rec", [r for r in all_recordings() if r.streaming], ids=lambda r: r.name)
def test_every_changed_event_names_a_rule(rec):
    rep = repair(rec.name)
    assert set(rep.fired) <= RULE_NAMES
    assert (rep.changed == 0) == (not rep.fired)
    assert all(0 < n <= rep.changed for n in rep.fired.values())
    if rec.kind == "clean":
        assert not rep.fired


@pytest.mark.parametrize(
    "name, off",
    [
        ("responses-devin-truncated", "status"),
        ("responses-devin-truncated", "schema_fill"),
        ("responses-claude-text-then-tool", "item_order"),
        ("chat-devin-index1", "tool_index"),
        ("messages-devin-truncated", "truncation"),
    ],
)
def test_a_rule_switched_off_never_fires(name, off):
    value = "off" if off == "truncation" else False
    rep = repair(name, replace(Rules(), **{off: value}))
    assert off not in rep.fired


def test_chat_resent_header_fires_tool_header():
    from streamfix.wire.chat import ChatRepairer

    def chunk(tc):
        import orjson

        obj = {
            "id": "c",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"tool_calls": [tc]}, "finish_reason": None}],
        }
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    head = {"index": 0, "id": "call_a", "type": "function", "function": {"name": "f", "arguments": ""}}
    body = chunk(head) + chunk({"index": 0, "function": {"arguments": "{}"}}) + chunk(head)
    body += b"data: [DONE]\n\n"  # a whole stream: no eof_terminal error chunk
    # (no finish_reason before the [DONE]: rule hidden_failure's, off here)
    _, rep = run(ChatRepairer, body, rules=Rules(hidden_failure=False))
    # the third chunk re-sends the header: its id, type and name are stripped (one event)
    assert dict(rep.fired) == {"tool_header": 1}
    assert rep.changed == 1


@pytest.mark.parametrize(
    "name, expected",
    [
        # ids on the three output items, annotations on the text part, created_at
        # (schema_fill); status on the function_call (status); once each per body
        ("responses-devin-nonstream", {"schema_fill": 1, "status": 1}),
        # one call cut at max_tokens 300 with completion_tokens 300: finish_reason length
        ("chat-devin-nonstream", {"truncation": 1}),
    ],
)
def test_json_bodies_count_each_rule_once(name, expected):
    import orjson
    from streamfix.wire.apis import json_repairer

    rec = load(name)
    req = rec.request.get("body")
    v = Verdict()
    v.request(req)
    fired = Counter()
    assert json_repairer(rec.api)(orjson.loads(rec.body), Rules(), FlowContext(request=req), v, fired=fired)
    assert dict(fired) == expected
