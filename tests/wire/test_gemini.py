"""wire/gemini.py: truncation on Gemini streamGenerateContent (alt=sse) and generateContent; recordings."""

from __future__ import annotations

import pytest
from repairkit import chunking_property, error_cuts, events, recordings, repair_recording, run, sse
from streamfix.wire import gemini
from streamfix.wire.gemini import GeminiRepairer, repair_gemini_json
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.stream import StreamRepair
from streamfix.wire.verdict import Verdict

REQ = {"contents": [], "generationConfig": {"maxOutputTokens": 400}}


def chunk(*parts, finish=None, usage=None, candidates=None):
    cand = {"content": {"parts": list(parts), "role": "model"}, "index": 0}
    if finish is not None:
        cand["finishReason"] = finish
    obj = {
        "candidates": candidates if candidates is not None else [cand],
        "modelVersion": "devin/swe-2",
        "responseId": "interaction_1",
    }
    if usage is not None:
        obj["usageMetadata"] = {"promptTokenCount": 10, "candidatesTokenCount": usage, "totalTokenCount": 10 + usage}
    return obj


def text(t, thought=False):
    return {"text": t, "thought": True} if thought else {"text": t}


CALL = {"functionCall": {"name": "write_file", "args": {}, "id": "write_file_0#a1"}}


def reasons(out):
    return [
        c.get("finishReason")
        for e in events(out)
        if isinstance(e, dict)
        for c in e.get("candidates", [])
        if "finishReason" in c
    ]


def fix(*objs, request=REQ, rules=None, verdict=None):
    return run(GeminiRepairer, sse(*objs), request, rules, verdict)


def test_usage_at_cap_becomes_max_tokens():
    out, rep = fix(chunk(text("Once")), chunk(CALL), chunk(text(""), finish="STOP", usage=400))
    assert reasons(out) == ["MAX_TOKENS"] and rep.decision.outcome == "max_tokens" and rep.changed == 1


def test_truncation_off_leaves_stop():
    out, rep = fix(chunk(text("Once")), chunk(text(""), finish="STOP", usage=400), rules=Rules(truncation="off"))
    assert reasons(out) == ["STOP"] and rep.decision.truncated


def test_below_cap_untouched():
    b = sse(chunk(text("Once")), chunk(text(""), finish="STOP", usage=399))
    out, rep = run(GeminiRepairer, b, REQ)
    assert out == b and rep.decision.outcome == "complete"


def test_thoughts_count_against_the_cap():
    fin = chunk(text(""), finish="STOP", usage=300)
    fin["usageMetadata"]["thoughtsTokenCount"] = 100
    out, _ = fix(chunk(text("think", thought=True)), chunk(text("a")), fin)
    assert reasons(out) == ["MAX_TOKENS"]


def test_thought_text_is_not_observed():
    v, direct = Verdict(), Verdict()
    fix(chunk(text("think", thought=True)), chunk(text("Hi")), chunk(text(""), finish="STOP", usage=3), verdict=v)
    direct.observe_text("Hi")
    assert v.digest() == direct.digest() and v.output_tokens == 3


def test_upstream_content_filter_becomes_safety():
    v = Verdict(resolver=lambda ver: ver.upstream("content_filter", "StopReason 11"))
    out, _ = fix(chunk(text("I")), chunk(text(""), finish="STOP", usage=2), verdict=v)
    assert reasons(out) == ["SAFETY"]


@pytest.mark.parametrize(
    "native, outcome",
    [
        ("MAX_TOKENS", "max_tokens"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("MALFORMED_FUNCTION_CALL", "unknown"),
    ],
)
def test_native_finish_reasons_left_alone(native, outcome):
    b = sse(chunk(text("a")), chunk(text(""), finish=native, usage=400))
    out, rep = run(GeminiRepairer, b, REQ)
    assert out == b and rep.decision.native and rep.decision.outcome == outcome


def test_finish_without_usage_waits_for_the_next_event():
    s = StreamRepair(GeminiRepairer(Rules(), FlowContext(request=REQ), Verdict()))
    assert s.feed(sse(chunk(text("a"), finish="STOP"))) == b""
    assert s.feed(b": ping\n\n") == b""
    late = {"usageMetadata": {"candidatesTokenCount": 400}}
    out = s.feed(sse(late))
    assert reasons(out) == ["MAX_TOKENS"] and out.endswith(sse(late)) and b": ping" in out


def test_finish_without_usage_at_end_of_stream():
    out, rep = fix(chunk(text("a"), finish="STOP"))
    assert reasons(out) == ["STOP"] and rep.decision.outcome == "unknown"


def test_hold_after_finish_is_bounded():
    s = StreamRepair(GeminiRepairer(Rules(), FlowContext(request=REQ), Verdict()))
    s.feed(sse(chunk(text("a"), finish="STOP")))
    out = s.feed(b": ping\n\n" * (gemini.HOLD_LIMIT + 1))
    assert out.count(b"data: ") == 1 and out.count(b": ping") == gemini.HOLD_LIMIT + 1


def test_several_candidates_are_not_rewritten():
    two = [
        {"content": {"parts": [text("a")], "role": "model"}, "index": 0, "finishReason": "STOP"},
        {"content": {"parts": [text("b")], "role": "model"}, "index": 1, "finishReason": "STOP"},
    ]
    b = sse(chunk(candidates=two, usage=400))
    out, rep = run(GeminiRepairer, b, REQ)
    assert out == b and any("candidates" in n for n in rep.notes)


def test_error_passes_and_nothing_is_synthesized():
    err = {"error": {"code": 502, "message": "devin stream terminated prematurely", "status": "UNAVAILABLE"}}
    b = sse(chunk(text("a")), err)
    out, rep = run(GeminiRepairer, b, REQ)
    assert out == b and reasons(out) == []
    assert not any("without a finishReason" in n for n in rep.notes)


def test_stream_without_finish_ends_with_an_error():
    """Rule eof_terminal: chunks, then the end without a finishReason or an error: an error
    object, as Gemini sends a failure; off: as it came, noted."""
    b = sse(chunk(text("a")))
    out, rep = run(GeminiRepairer, b, REQ)
    assert out == b + (b'data: {"error":{"code":500,"message":"The upstream stream ended without a finishReason.",'
                       b'"status":"INTERNAL"}}\n\n')  # fmt: skip
    assert rep.fired == {"eof_terminal": 1}
    out, rep = run(GeminiRepairer, b, REQ, rules=Rules(eof_terminal=False))
    assert out == b and any("without a finishReason" in n for n in rep.notes)


def test_bad_json_and_comments_pass():
    b = b": x\n\ndata: [1]\n\ndata: {oops\n\n"
    out, rep = run(GeminiRepairer, b, REQ)
    assert out == b and rep.changed == 0


# --- non-stream ---------------------------------------------------------------------------------
def repair_json(obj, rules=None, request=REQ):
    v = Verdict()
    v.request(request)
    return repair_gemini_json(obj, rules or Rules(), FlowContext(request=request), v), obj


def test_json_truncation():
    changed, obj = repair_json(chunk(text("a"), finish="STOP", usage=400))
    assert changed and obj["candidates"][0]["finishReason"] == "MAX_TOKENS"


def test_json_off_below_cap_native_missing():
    assert repair_json(chunk(text("a"), finish="STOP", usage=400), Rules(truncation="off"))[0] is False
    assert repair_json(chunk(text("a"), finish="STOP", usage=4))[0] is False
    assert repair_json(chunk(text("a"), finish="MAX_TOKENS", usage=400))[0] is False
    assert repair_json(chunk(text("a"), usage=400))[0] is False  # no finish: never invent one
    assert repair_json({"error": {"code": 400}})[0] is False


# --- recordings -----------------------------------------------------------------------------------
GEM = recordings("gemini")
NAMES = [r.name for r in GEM]


def test_the_recordings_are_there():
    assert {"gemini-devin-truncated", "gemini-clean"} <= set(NAMES)


@pytest.mark.parametrize("rec", GEM, ids=NAMES)
def test_recording_repaired_is_expected(rec):
    out = repair_recording(rec, GeminiRepairer, repair_gemini_json)
    assert out == rec.expected
    assert (out == rec.body) == (rec.kind == "clean")


@pytest.mark.parametrize("rec", GEM, ids=NAMES)
def test_recording_repair_is_idempotent(rec):
    once = repair_recording(rec, GeminiRepairer, repair_gemini_json)
    assert repair_recording(rec, GeminiRepairer, repair_gemini_json, body=once) == once


@pytest.mark.parametrize("rec", GEM, ids=NAMES)
def test_recording_any_chunking(rec):
    chunking_property(rec, GeminiRepairer, repair_gemini_json)()


@pytest.mark.parametrize("rec", [r for r in GEM if r.streaming], ids=lambda r: r.name)
def test_no_error_stream_becomes_success(rec):
    err = b'data: {"error":{"code":502,"message":"stream_truncated","status":"UNAVAILABLE"}}\n\n'
    error_cuts(rec, GeminiRepairer, err, lambda b: len(reasons(b)))


def test_fail_open_when_the_verdict_raises_loses_and_duplicates_nothing():
    def boom(ver):
        raise RuntimeError("resolver down")

    b = sse(chunk(text("a")), chunk(text(""), finish="STOP"), {"usageMetadata": {"candidatesTokenCount": 1}})
    b = b.replace(b'\n\ndata: {"usage', b'\n\n: ping\n\ndata: {"usage')
    for cut in range(0, len(b), 9):
        s = StreamRepair(GeminiRepairer(Rules(), FlowContext(request=REQ), Verdict(resolver=boom)))
        out = s.feed(b[:cut]) + s.feed(b[cut:]) + s.close()
        assert isinstance(s.error, RuntimeError)
        assert out == b
