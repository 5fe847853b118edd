"""wire/hidden.py's zeroed_completion: CPA's HTTP 200 for no answer (router-for-me/CLIProxyAPI#2193,
#2190), told apart from real completions that are short or empty (cases written by hand)."""

from __future__ import annotations

import pytest
from streamfix.wire.contract import check_json
from streamfix.wire.hidden import zeroed_completion

ZEROED = {"id": "", "object": "chat.completion", "created": 0, "model": "",
          "choices": [{"index": 0, "message": {"role": "assistant", "content": "", "tool_calls": None},
                       "finish_reason": "stop"}],
          "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}  # fmt: skip


def test_the_zeroed_body_of_the_issue_is_one():
    assert zeroed_completion(ZEROED)
    assert zeroed_completion({**ZEROED, "usage": None}) and zeroed_completion({k: v for k, v in ZEROED.items()
                                                                                if k != "created"})  # fmt: skip


@pytest.mark.parametrize(
    "change",
    [
        {"id": "chatcmpl-1"},  # a real completion names itself...
        {"model": "claude-sonnet-4-6"},
        {"created": 1789012345},
        {"usage": {"prompt_tokens": 12000, "completion_tokens": 3, "total_tokens": 12003}},  # ...and counts
        {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Done."}, "finish_reason": "stop"}]},
        {"choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            "finish_reason": "tool_calls"}]},
        {"choices": [{"index": 0, "message": {"role": "assistant", "refusal": "No."}, "finish_reason": "stop"}]},
        {"choices": "x"},
    ],
)  # fmt: skip
def test_anything_a_real_answer_has_makes_it_no_zeroed_completion(change):
    assert not zeroed_completion({**ZEROED, **change})


def test_an_empty_end_turn_with_its_names_is_the_models_answer_not_a_gateway_failure():
    """Claude's own empty end_turn (2-3 tokens, CPA #4886) keeps its id, model and usage."""
    body = {**ZEROED, "id": "msg_01", "model": "claude-sonnet-4-6", "created": 1789012345,
            "usage": {"prompt_tokens": 65000, "completion_tokens": 2, "total_tokens": 65002}}  # fmt: skip
    assert not zeroed_completion(body)


def test_the_contract_names_it_a_hidden_failure():
    assert [v.rule for v in check_json("chat", ZEROED)] == ["terminal.hidden_failure"]
