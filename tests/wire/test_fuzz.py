"""The fuzz targets of tests/support/fuzz.py, run with a bounded budget (CI) and their findings
kept as tests.

- hypothesis drives each target with random byte strings (a fixed number of examples);
- atheris (libFuzzer, coverage-guided) runs all targets for a few seconds in a
  subprocess; ``just fuzz`` runs it for as long as you like;
- every input that once failed is in ``tests/support/fuzz_regressions/`` (a file's first byte
  picks the target, see :func:`fuzz.target_all`) and is replayed here; the inputs draw
  events from the recordings, so each finding also has a plain test below that does not
  depend on them.
"""

from __future__ import annotations

from pathlib import Path

import fuzz
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamfix.wire.chat import repair_chat_json
from streamfix.wire.messages import repair_messages_json
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.verdict import Verdict

REGRESSIONS = sorted((Path(fuzz.__file__).parent / "fuzz_regressions").glob("*"))
BUDGET = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)


@pytest.mark.parametrize("name", sorted(fuzz.TARGETS))
@BUDGET
@given(data=st.binary(max_size=2048))
def test_target(name: str, data: bytes) -> None:
    fuzz.TARGETS[name](data)


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.name for p in REGRESSIONS])
def test_regression(path: Path) -> None:
    fuzz.target_all(path.read_bytes())


def test_regressions_exist() -> None:
    assert REGRESSIONS, "the fuzz findings are kept as inputs"


# --- the findings, as plain tests ---------------------------------------------------
def _verdict() -> Verdict:
    v = Verdict()
    v.request({"model": "m", "stream": True})
    return v


@pytest.mark.parametrize("value", [[], {}, ["length"], {"a": 1}])
def test_chat_finish_reason_not_a_string(value) -> None:
    """A finish_reason that is a list or an object (found by the fuzzer: the chat
    repairer raised TypeError and the rest of the flow went unrepaired)."""
    body = (
        b'data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"id":"call_1",'
        b'"type":"function","function":{"name":"f","arguments":""}}]},"finish_reason":null}]}\n\n'
        b'data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":' + orjson.dumps(value) + b"}]}\n\n"
        b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}\n\n'
        b"data: [DONE]\n\n"
    )
    out, s = fuzz._repair("chat", {"model": "m", "stream": True}, [body])
    assert s.error is None, s.error
    assert b'"index":0' in out, "the tool call was still renumbered"
    obj = {"choices": [{"index": 0, "message": {"role": "assistant"}, "finish_reason": value}]}
    repair_chat_json(obj, Rules(), FlowContext(model="m"), _verdict())


@pytest.mark.parametrize("value", [[], {}, ["max_tokens"], {"a": 1}])
def test_messages_stop_reason_not_a_string(value) -> None:
    body = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message",'
        b'"role":"assistant","content":[],"model":"m","stop_reason":null,"usage":{"input_tokens":1,"output_tokens":0}}}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
        + orjson.dumps(value)
        + b'},"usage":{"output_tokens":1}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    _, s = fuzz._repair("messages", {"model": "m", "stream": True}, [body])
    assert s.error is None, s.error
    obj = {"type": "message", "role": "assistant", "content": [], "stop_reason": value}
    repair_messages_json(obj, Rules(), FlowContext(model="m"), _verdict())
