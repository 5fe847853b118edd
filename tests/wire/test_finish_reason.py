"""Non-standard finish reasons CPA's translators write, mapped to the spec's.

CPA v7.2.140's Gemini and Antigravity chat translators write ``finish_reason:
"max_tokens"`` for Gemini's MAX_TOKENS when streaming, and Gemini's finishReason
lower-cased when not (``max_tokens``, ``safety``, ``recitation``...). OpenAI clients
know only ``stop``, ``length``, ``tool_calls``, ``content_filter``, ``function_call``.
Rule ``finish_reason`` (``--set streamfix_finish_reason=false`` to switch off) writes the
spec's value; the gateway's own word stays in ``native_finish_reason``. The recordings
``chat-gemini-max-tokens``, ``chat-gemini-max-tokens-nonstream`` and
``chat-gemini-safety-nonstream`` carry the exact shapes (tests/wire/test_recordings.py,
tests/e2e/test_e2e.py). The other translators' values were checked and are spec values
(messages: end_turn/tool_use/max_tokens/refusal/model_context_window_exceeded; Gemini:
STOP/MAX_TOKENS/SAFETY/OTHER; Responses: incomplete_details max_output_tokens/content_filter).
"""

from __future__ import annotations

import pytest
from repairkit import events, run, sse
from streamfix.wire import stops
from streamfix.wire.chat import ChatRepairer, repair_chat_json
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.verdict import Verdict

SPEC = {"stop", "length", "tool_calls", "content_filter", "function_call"}


def chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "resp-1", "object": "chat.completion.chunk", "created": 1, "model": "gemini-2.5-pro",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "native_finish_reason": finish}]}  # fmt: skip


def body_json(finish: str) -> dict:
    return {"id": "resp-1", "object": "chat.completion", "created": 1, "model": "gemini-2.5-pro",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": finish,
                         "native_finish_reason": finish}]}  # fmt: skip


WANT = {"max_tokens": "length", "safety": "content_filter", "recitation": "content_filter",
        "blocklist": "content_filter", "prohibited_content": "content_filter", "spii": "content_filter",
        "image_safety": "content_filter"}  # fmt: skip


def test_every_alias_maps_to_a_spec_value():
    assert {k: stops.foreign("chat", k) for k in WANT} == WANT and set(WANT.values()) <= SPEC
    assert stops.OWN["chat"] == SPEC


@pytest.mark.parametrize(("cpa", "spec"), sorted(WANT.items()))
def test_stream_finish_reason_mapped(cpa, spec):
    body = sse(chunk({"role": "assistant", "content": "hi"}), chunk({}, cpa), b"[DONE]")
    out, rep = run(ChatRepairer, body)
    last = [e for e in events(out) if isinstance(e, dict)][-1]["choices"][0]
    assert (last["finish_reason"], last["native_finish_reason"]) == (spec, cpa)
    assert rep.decision.native and rep.decision.outcome == {"length": "max_tokens"}.get(spec, spec)
    assert any(f"{cpa!r}" in n for n in rep.notes)
    # nothing else moved: only that one event differs
    assert out.replace(f'"finish_reason":"{spec}"'.encode(), f'"finish_reason":"{cpa}"'.encode()) == body


@pytest.mark.parametrize(("cpa", "spec"), sorted(WANT.items()))
def test_json_finish_reason_mapped(cpa, spec):
    obj = body_json(cpa)
    assert repair_chat_json(obj, Rules(), FlowContext(), Verdict())
    assert (obj["choices"][0]["finish_reason"], obj["choices"][0]["native_finish_reason"]) == (spec, cpa)


def test_native_value_wins_over_upstream_evidence():
    # the gateway said MAX_TOKENS itself: a "complete" from the upstream leg cannot undo it
    v = Verdict()
    v.upstream("complete", "Devin StopReason 2 STOP_PATTERN")
    out, rep = run(ChatRepairer, sse(chunk({"content": "hi"}), chunk({}, "max_tokens")), verdict=v)
    assert [e for e in events(out) if isinstance(e, dict)][-1]["choices"][0]["finish_reason"] == "length"
    assert rep.decision.native


def test_rule_off_and_other_words_pass_as_they_came():
    body = sse(chunk({"content": "hi"}), chunk({}, "max_tokens"), b"[DONE]")
    out, _ = run(ChatRepairer, body, rules=Rules(finish_reason=False))
    assert out == body
    # Gemini reasons without a spec equivalent are left alone
    for word in ("malformed_function_call", "other", "language", "finish_reason_unspecified"):
        body = sse(chunk({"content": "hi"}), chunk({}, word), b"[DONE]")
        assert run(ChatRepairer, body)[0] == body
        assert not repair_chat_json(body_json(word), Rules(), FlowContext(), Verdict())
