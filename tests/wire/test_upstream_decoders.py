"""The upstream leg's provider decoders (wire/upstream_decoders.py), sans-IO.

- every documented sample of tests/support/upstream_samples.py decodes to the facts worked out by
  hand there (finish raw, outcome, usage, errors, how the body ended, bytes hashed);
- any chunking (hypothesis) gives the same result as one chunk; the hash is the one the
  client leg computes of the same text and arguments (wire.verdict.Verdict.digest);
- garbage fails open: no exception, counted, nothing claimed; atheris over
  tests/support/fuzz_upstream.py for a few seconds (tests/e2e/test_fuzz_atheris.py);
- the request side (prompt texts, cap) and path/content-type routing;
- the client APIs' failure shapes (wire/upstream_terminal.py) and the verdict's use of a
  ``failed`` upstream on every API (the repairers' terminals), and usage made the
  provider's (``authoritative``).
"""

from __future__ import annotations

import base64
import dataclasses

import fuzz_upstream
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from streamfix.wire.apis import stream_repairer
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.stream import StreamRepair
from streamfix.wire.upstream_call import CallResult
from streamfix.wire.upstream_decoders import decoder_for, provider_for_path, read_json_request
from streamfix.wire.upstream_terminal import chat_error, gemini_error, json_failure, messages_error
from streamfix.wire.verdict import UpstreamUsage, Verdict
from upstream_samples import EXPECT, SAMPLES

CTYPE = {"sse": "text/event-stream", "json": "application/json; charset=utf-8"}
BUDGET = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)


def decode(provider: str, framing: str, pieces, cut: bool = False) -> CallResult:
    d = decoder_for(provider, CTYPE[framing])
    assert d is not None
    for p in pieces:
        d.feed(p)
    return d.close(cut=cut)


@pytest.mark.parametrize("key", sorted(SAMPLES), ids=["/".join(k) for k in sorted(SAMPLES)])
def test_documented_samples(key):
    provider, framing, _ = key
    finish, outcome, ended, errors, usage, text, args = EXPECT[key]
    r = decode(provider, framing, [SAMPLES[key]])
    assert (r.finish, r.outcome, r.ended, len(r.errors)) == (finish, outcome, ended, errors), r
    got = None if r.usage is None else (r.usage.input_tokens, r.usage.output_tokens, r.usage.reasoning_tokens,
                                        r.usage.cached_tokens, r.usage.total_tokens)  # fmt: skip
    assert got == usage
    assert (r.digest[1], r.digest[3]) == (text, args)
    assert r.bad == 0 or ended == "cut"
    assert r.framing == framing
    assert r.usage is None or r.usage.authoritative


def test_every_sample_has_its_facts():
    assert set(SAMPLES) == set(EXPECT)
    assert {p for p, _, _ in SAMPLES} == set(fuzz_upstream.PROVIDERS)
    assert {(p, f) for p, f, _ in SAMPLES} == {(p, f) for p in fuzz_upstream.PROVIDERS for f in ("sse", "json")}


def test_details_name_the_frame_and_value_never_content():
    assert (
        decode("gemini", "sse", [SAMPLES[("gemini", "sse", "thoughts_max")]]).detail()
        == "Gemini finishReason MAX_TOKENS"
    )
    assert (
        decode("anthropic", "sse", [SAMPLES[("anthropic", "sse", "refusal")]]).detail()
        == "Anthropic stop_reason refusal"
    )
    err = decode("gemini", "sse", [SAMPLES[("gemini", "sse", "error")]]).detail()
    assert err == ("Gemini in-band error 503 UNAVAILABLE: The model is overloaded. Please try again later., "
                   "body ended without a finishReason")  # fmt: skip
    assert decode("openai_chat", "sse", [SAMPLES[("openai_chat", "sse", "done_no_finish")]]).detail() == (
        "OpenAI chat body ended without a finish_reason"
    )
    assert decode("gemini", "sse", [SAMPLES[("gemini", "sse", "cut")]]).detail() == "Gemini body cut"
    cut = decode("responses", "sse", [SAMPLES[("responses", "sse", "completed")]], cut=True)
    assert (cut.outcome, cut.detail()) == ("failed", "Responses status completed, body cut")
    assert "Hello" not in decode("anthropic", "sse", [SAMPLES[("anthropic", "sse", "end_turn")]]).detail()


@pytest.mark.parametrize("key", sorted(SAMPLES), ids=["/".join(k) for k in sorted(SAMPLES)])
@BUDGET
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_any_chunking_gives_the_same_result(key, cuts):
    provider, framing, _ = key
    body = SAMPLES[key]
    points = sorted({c % (len(body) + 1) for c in cuts})
    pieces = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    assert decode(provider, framing, pieces) == decode(provider, framing, [body])


@pytest.mark.parametrize(
    ("key", "meaning"),
    [
        (("openai_chat", "sse", "refusal"), "declined"),
        (("responses", "sse", "refusal"), "declined"),
        (("anthropic", "sse", "pause"), "pause"),
        (("anthropic", "sse", "refusal"), "refusal"),
        (("gemini", "sse", "thoughts_max"), "length"),
        (("gemini", "sse", "safety"), "filter"),
        (("responses", "sse", "content_filter"), "filter"),
        (("openai_chat", "sse", "length"), "length"),
        (("openai_chat", "sse", "done_no_finish"), None),
        (("responses", "sse", "completed"), None),
    ],
)
def test_the_meaning_of_the_stop(key, meaning):
    """What the provider's stop meant, for each client API's own word (wire/stops.py):
    an OpenAI refusal is said in content before a normal end (``declined``), Anthropic's
    ``pause_turn`` is an unfinished turn."""
    r = decode(key[0], key[1], [SAMPLES[key]])
    assert r.meaning == meaning
    if meaning == "declined":
        assert r.detail().endswith("after a refusal")


def test_the_digest_is_the_client_legs():
    """The text and arguments hashed upstream are hashed as the client leg hashes what it
    is told (CPA copies them): the correlator matches the two by it."""
    r = decode("anthropic", "sse", [SAMPLES[("anthropic", "sse", "tool_use")]])
    v = Verdict()
    for t in ("Hel", "lo!"):
        v.observe_text(t)
    v.observe_args('{"location": "San Francisco, CA"}')
    assert r.digest == v.digest()


def test_the_decisive_event_comes_before_the_end():
    """``decided`` turns True at the provider's finish with its usage (Gemini; OpenAI chat,
    whose usage chunk comes after the finish: CPA's OpenAI -> Claude translator writes
    message_delta and message_stop on it, before it reads [DONE]), its message_delta
    (Anthropic), the terminal (Responses), [DONE]: before CPA has read it."""
    for key, upto in ((("gemini", "sse", "stop"), None), (("anthropic", "sse", "end_turn"), b"event: message_stop"),
                      (("responses", "sse", "completed"), None), (("openai_chat", "sse", "length"), b"data: [DONE]")):  # fmt: skip
        provider, framing, _ = key
        body = SAMPLES[key]
        d = decoder_for(provider, CTYPE[framing])
        d.feed(body[: body.index(upto)] if upto else body)
        assert d.decided, key
        r = d.result()
        assert r.ended in (None, "finish") and r.outcome != "failed", (key, r)
    d = decoder_for("gemini", CTYPE["sse"])
    d.feed(SAMPLES[("gemini", "sse", "no_finish")])
    assert not d.decided  # no finish: only the end of the body decides
    body = SAMPLES[("openai_chat", "sse", "length")]
    d = decoder_for("openai_chat", CTYPE["sse"])
    d.feed(
        body[
            : body.index(
                b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"usage"'
            )
        ]
    )
    assert d.finish == "length" and not d.decided  # the finish without its usage chunk yet: not decided


@pytest.mark.parametrize("provider", fuzz_upstream.PROVIDERS)
@pytest.mark.parametrize("framing", ["sse", "json"])
@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"\x00\xff\xfe" * 50,
        b"data: {not json}\n\n",
        b"data: [1,2,3]\n\n",
        b"<html>502</html>",
        b"data: " + b"x" * 70_000,
    ],
    ids=["empty", "binary", "bad-json", "array", "html", "long-line"],
)
def test_garbage_fails_open(provider, framing, garbage):
    r = decode(provider, framing, [garbage[i : i + 7] for i in range(0, len(garbage), 7)])
    assert r.finish is None and r.usage is None and r.outcome == "failed"
    assert r.ended in ("no_finish", "cut")


def test_a_decoder_that_breaks_stops_reading_and_says_so():
    d = decoder_for("gemini", CTYPE["sse"])
    d._sse = None  # an internal error on the next read (no parser, no JSON reader): works compiled too
    d.feed(SAMPLES[("gemini", "sse", "stop")])
    assert d.stopped == "gemini decoder failed: AttributeError"
    d.feed(b"more")  # nothing raises, nothing more is read
    assert d.close().finish is None


def test_the_tap_returns_every_read_as_it_came_and_reports_twice():
    import gzip

    from streamfix.wire.encoding import decoder_for as inflater
    from streamfix.wire.upstream_decoders import CallTap

    seen = []
    body = SAMPLES[("anthropic", "sse", "tool_use")]
    tap = CallTap(
        decoder_for("anthropic", CTYPE["sse"]), None, True, lambda: seen.append("decided"), lambda: seen.append("end")
    )
    reads = [body[i : i + 50] for i in range(0, len(body), 50)]
    assert all(tap(r) is r for r in reads) and tap(b"") == []
    assert seen == ["decided", "end"] and b"".join(tap.chunks) == body
    z = gzip.compress(body)
    d = decoder_for("anthropic", CTYPE["sse"])
    tap = CallTap(d, inflater("gzip"), False, lambda: None, lambda: None)
    assert tap(z[:7]) is not None and tap(z[7:]) == z[7:] and tap(b"") == []
    assert d.close().finish == "tool_use" and tap.chunks == []
    broken = CallTap(decoder_for("gemini", CTYPE["sse"]), inflater("gzip"), False, lambda: None, lambda: None)
    assert broken(b"not gzip") == b"not gzip" and broken.failed is not None  # the read still goes out


@BUDGET
@given(data=st.binary(max_size=4096))
@example(data=base64.b64decode("Cm1vZWX/////////PWwLCg=="))  # atheris, 2026-12-01 (below)
@example(data=base64.b64decode("ZGVn635z634AACs="))  # atheris, 2026-12-02: a skimmed delta's modelVersion
def test_fuzz_target_under_hypothesis(data):
    fuzz_upstream.target_decoder(data)


def test_a_skimmed_event_whose_unread_string_is_not_one_is_bad_as_parsed():
    """Found by atheris in CI: a Gemini thought layout (its text not hashed) matched an event
    whose "text" held a quote, i.e. a broken JSON object; the skim counted it as a good event
    where the full path counts it bad, so the count depended on where the reads were cut."""
    good = b'data: {"candidates":[{"content":{"parts":[{"text":"a","thought":true}]}}]}\n\n'
    broken = (
        b'data: {"candidates":[{"content":{"parts":[{"text":"b"}]}}],"x":{"parts":[{"text":"c","thought":true}]}}]}\n\n'
    )
    results = []
    for pieces in ([good + good + broken], [good, good + broken], [good, good, broken]):
        d = decoder_for("gemini", CTYPE["sse"])
        for p in pieces:
            d.feed(p)
        results.append(d.close())
    assert [r.bad for r in results] == [1, 1, 1]
    assert [r.events for r in results] == [3, 3, 3]


# --- routing and the request side ---------------------------------------------------------


@pytest.mark.parametrize(
    "path, provider",
    [
        ("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "gemini"),
        ("/v1beta/models/gemini-2.5-flash:generateContent", "gemini"),
        ("/v1/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse", "gemini"),
        ("/v1internal:streamGenerateContent?alt=sse", "gemini"),
        ("/v1beta/interactions", "interactions"),
        ("/v1/messages?beta=true", "anthropic"),
        ("/v1/messages/count_tokens?beta=true", None),
        ("/v1/chat/completions", "openai_chat"),
        ("/backend-api/codex/responses", "responses"),
        ("/v1/responses/compact", None),
        ("/v1beta/models", None),
    ],
)
def test_provider_for_path(path, provider):
    assert provider_for_path(path) == provider


def test_content_types():
    assert decoder_for("gemini", "text/event-stream; charset=utf-8").framing == "sse"
    assert decoder_for("anthropic", "application/json").framing == "json"
    assert decoder_for("anthropic", "text/html") is None
    assert decoder_for("devin", "text/event-stream") is None  # Devin keeps its own tap


def test_request_side_reads_prompts_and_cap():
    body = orjson.dumps({"model": "gemini-2.5-flash", "contents": [{"role": "user", "parts": [{"text": "first"}]},
                         {"role": "model", "parts": [{"text": "reply"}]}, {"role": "user", "parts": [{"text": "last ask"}]}],
                         "generationConfig": {"maxOutputTokens": 77}})  # fmt: skip
    r = read_json_request("gemini", body)
    assert [t for _, t in r.prompts] == ["gemini-2.5-flash", "user", "first", "model", "reply", "user", "last ask"]
    assert (r.max_tokens, r.model) == (77, "gemini-2.5-flash")
    wrapped = orjson.dumps(
        {
            "model": "gemini-3-pro",
            "project": "p",
            "request": {"contents": [], "generationConfig": {"maxOutputTokens": 5}},
        }
    )
    assert (read_json_request("gemini", wrapped).max_tokens, read_json_request("gemini", wrapped).model) == (
        5,
        "gemini-3-pro",
    )
    assert read_json_request("anthropic", orjson.dumps({"max_tokens": 1024, "messages": []})).max_tokens == 1024
    assert read_json_request("openai_chat", b"not json") is None


# --- the client APIs' failure shapes, and the verdict's use of them -------------------------


def test_failure_shapes():
    assert chat_error("Gemini body cut") == {"error": {"message": "The upstream provider failed: Gemini body cut.",
                                                       "type": "server_error", "param": None, "code": None}}  # fmt: skip
    assert messages_error("Gemini in-band error 503 UNAVAILABLE")["error"]["type"] == "overloaded_error"
    assert messages_error("Gemini body cut")["error"]["type"] == "api_error"
    assert gemini_error("Anthropic in-band error overloaded_error: Overloaded")["error"]["status"] == "UNAVAILABLE"
    assert json_failure("responses", "x")[0] == 502 and json_failure("messages", "x")[1]["type"] == "error"


def _run(api: str, body: bytes, result: CallResult | None, rules: Rules | None = None) -> bytes:
    v = Verdict()
    v.request({"model": "m", "stream": True})
    if result is not None:

        def resolver(verdict):
            verdict.upstream(result.outcome, result.detail())
            if result.usage is not None:
                verdict.upstream_usage(result.usage)

        v.resolver = resolver
    s = StreamRepair(stream_repairer(api, rules or Rules(), FlowContext(model="m"), v))
    return s.feed(body) + s.close()


_CUT = decode("gemini", "sse", [SAMPLES[("gemini", "sse", "cut")]])
_MAX = decode("gemini", "sse", [SAMPLES[("gemini", "sse", "thoughts_max")]])
RESP_OK = (
    b'event: response.created\ndata: {"type":"response.created","sequence_number":1,"response":{"id":"r","object":"response","created_at":1,"status":"in_progress","model":"m","output":[]}}\n\n'
    b'event: response.output_item.added\ndata: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"i","type":"message","status":"in_progress","role":"assistant","content":[]}}\n\n'
    b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":3,"item_id":"i","output_index":0,"content_index":0,"delta":"The"}\n\n'
    b'event: response.completed\ndata: {"type":"response.completed","sequence_number":4,"response":{"id":"r","object":"response","created_at":1,"status":"completed","model":"m","output":[],"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":65,"output_tokens_details":{"reasoning_tokens":50}}}}\n\n'
)  # fmt: skip
CHAT_OK = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"The"},"finish_reason":null}]}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":65}}\n\n'
    b"data: [DONE]\n\n"
)  # fmt: skip
CHAT_DONE_ONLY = CHAT_OK.split(b"\n\n")[0] + b"\n\ndata: [DONE]\n\n"
MSG_OK = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)  # fmt: skip
MSG_STOP_ONLY = MSG_OK.replace(
    MSG_OK[MSG_OK.index(b"event: message_delta") : MSG_OK.index(b"event: message_stop")], b""
)
GEM_OK = (
    b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"The"}]},"index":0}]}\n\n'
    b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":""}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,"totalTokenCount":65}}\n\n'
)  # fmt: skip


def _events(out: bytes) -> list[tuple[str | None, dict | str]]:
    from upstream_matrix import _objs

    return _objs(out)


def test_responses_completed_becomes_failed_and_usage_the_providers():
    out = _run("responses", RESP_OK, _CUT)
    evs = _events(out)
    last = evs[-1]
    assert last[0] == "response.failed" and last[1]["type"] == "response.failed"
    # numbered after the events the repair closed the open message with
    assert last[1]["response"]["status"] == "failed" and last[1]["sequence_number"] == evs[-2][1]["sequence_number"] + 1
    assert last[1]["response"]["error"] == {
        "code": "server_error",
        "message": "The upstream provider failed: Gemini body cut.",
    }
    out = _run("responses", RESP_OK, _MAX)
    last = _events(out)[-1][1]
    assert last["type"] == "response.incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    # Gemini's thoughts counted in output, as the provider said (CPA's 5 corrected to 55)
    assert last["response"]["usage"]["output_tokens"] == 55 and last["response"]["usage"]["total_tokens"] == 65
    off = _events(_run("responses", RESP_OK, _CUT, Rules(upstream_failure=False)))[-1][1]
    assert off["type"] == "response.completed"  # the rule off: the terminal as it came (usage still the provider's)
    none = _events(_run("responses", RESP_OK, None, Rules(usage_math=False)))[-1][1]
    assert none["type"] == "response.completed" and none["response"]["usage"]["output_tokens"] == 5  # no upstream leg
    # no upstream leg, rule usage_math on: the client leg's own sum (total = input + output + reasoning) says 55 too
    alone = _events(_run("responses", RESP_OK, None))[-1][1]
    assert alone["type"] == "response.completed" and alone["response"]["usage"]["output_tokens"] == 55


def test_chat_finish_and_done_become_the_error_chunk():
    out = _run("chat", CHAT_OK, _CUT)
    evs = _events(out)
    assert evs[-1] == (None, chat_error("Gemini body cut"))  # the finish chunk became it
    assert b"[DONE]" in out and b"data: [DONE]" not in out  # withheld, as a comment
    out = _run("chat", CHAT_DONE_ONLY, _CUT)  # N3: [DONE] with no finish at all
    assert _events(out)[-1] == (None, chat_error("Gemini body cut"))
    assert b"data: [DONE]" not in out
    out = _run("chat", CHAT_OK, _MAX)
    fin = [o for _, o in _events(out) if isinstance(o, dict) and o.get("choices") and o["choices"][0]["finish_reason"]]
    assert fin[0]["choices"][0]["finish_reason"] == "length" and fin[0]["usage"]["completion_tokens"] == 55


def test_messages_stop_becomes_the_error_event():
    out = _run("messages", MSG_OK, _CUT)
    evs = _events(out)
    assert evs[-1] == ("error", messages_error("Gemini body cut")) and b"event: message_stop" not in out
    out = _run("messages", MSG_STOP_ONLY, _CUT)  # N2: message_stop with no message_delta
    assert _events(out)[-1] == ("error", messages_error("Gemini body cut"))
    out = _run("messages", MSG_OK.replace(MSG_OK[MSG_OK.index(b"event: message_delta") :], b""), _CUT)  # no end at all
    assert _events(out)[-1] == ("error", messages_error("Gemini body cut"))
    out = _run("messages", MSG_OK, _MAX)
    md = next(o for _, o in _events(out) if isinstance(o, dict) and o.get("type") == "message_delta")
    assert md["delta"]["stop_reason"] == "max_tokens" and md["usage"]["output_tokens"] == 55


def test_gemini_finish_becomes_the_error_object():
    out = _run("gemini", GEM_OK, _CUT)
    evs = _events(out)
    assert evs[-1] == (None, gemini_error("Gemini body cut"))
    assert "finishReason" not in orjson.dumps(evs[-2][1]).decode()  # the chunk keeps its content, not its finish
    out = _run("gemini", GEM_OK.split(b"\n\n")[0] + b"\n\n", _CUT)  # no finishing chunk at all
    assert _events(out)[-1] == (None, gemini_error("Gemini body cut"))
    out = _run("gemini", GEM_OK, _MAX)
    um = _events(out)[-1][1]["usageMetadata"]
    assert um["candidatesTokenCount"] == 5 and um["thoughtsTokenCount"] == 50 and um["totalTokenCount"] == 65


DEVIN_SAYS = {"error": "Devin StopReason 2 STOP_PATTERN, trailer error resource_exhausted",
              "truncated": "Devin StopReason 2 STOP_PATTERN, truncated"}  # fmt: skip


def _devin_run(api: str, body: bytes, how: str) -> bytes:
    """A client stream whose Devin call failed, resolved through the correlator as the
    sidecar resolves it (the client's text "The" is the Devin call's text: same digest)."""
    from correlatekit import frame
    from streamfix.wire.connect import encode_end_stream
    from streamfix.wire.correlate import Correlator
    from streamfix.wire.devin import DevinTap

    tap = DevinTap()
    tap.feed(frame(text=b"The", stop_reason=2))
    tap.feed(encode_end_stream("resource_exhausted", "quota") if how == "error" else b"\x00\x00")
    corr = Correlator()
    corr.upstream_started("up")
    corr.upstream_finished("up", tap.close())
    v = Verdict()
    v.request({"model": "m", "stream": True})
    v.resolver = corr.resolver("client")
    s = StreamRepair(stream_repairer(api, Rules(), FlowContext(model="m"), v))
    out = s.feed(body) + s.close()
    assert corr.stats["resolved"] == 1
    return out


@pytest.mark.parametrize("how", ["error", "truncated"])
def test_a_failed_devin_call_ends_every_api_as_a_failure(how):
    """Devin's trailer error, or its body stopping before the end-of-stream envelope, is
    a failed call (wire/devin.py ``TapResult.failed``): each client API hears its own
    failure, naming Devin's evidence, where the gateway reported a success."""
    said = DEVIN_SAYS[how]
    last = _events(_devin_run("responses", RESP_OK, how))[-1][1]
    assert last["type"] == "response.failed" and said in last["response"]["error"]["message"]
    out = _devin_run("chat", CHAT_OK, how)
    assert _events(out)[-1] == (None, chat_error(said)) and b"data: [DONE]" not in out
    out = _devin_run("chat", CHAT_DONE_ONLY, how)
    assert _events(out)[-1] == (None, chat_error(said)) and b"data: [DONE]" not in out
    out = _devin_run("messages", MSG_OK, how)
    assert _events(out)[-1] == ("error", messages_error(said)) and b"event: message_stop" not in out
    assert messages_error(said)["error"]["type"] == ("overloaded_error" if how == "error" else "api_error")
    assert _events(_devin_run("gemini", GEM_OK, how))[-1] == (None, gemini_error(said))


def test_authoritative_usage_corrects_only_what_differs():
    u = UpstreamUsage(10, 55, 4, 65, "m", "usageMetadata", reasoning_tokens=50, authoritative=True)
    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 65, "input_tokens_details": {"cached_tokens": 4}}
    filled = u.fill(usage, {"input_tokens": "input_tokens", "output_tokens": "output_tokens",
                            "input_tokens_details.cached_tokens": "cached_tokens",
                            "output_tokens_details.reasoning_tokens": "reasoning_tokens"}, "total_tokens",
                    ("input_tokens", "output_tokens"))  # fmt: skip
    assert filled == ["output_tokens", "output_tokens_details.reasoning_tokens"]
    assert usage == {"input_tokens": 10, "output_tokens": 55, "total_tokens": 65, "input_tokens_details": {"cached_tokens": 4},
                     "output_tokens_details": {"reasoning_tokens": 50}}  # fmt: skip
    devin = UpstreamUsage(10, 55, 4, 65)  # not authoritative: a non-zero count is never overwritten
    usage = {"input_tokens": 10, "output_tokens": 5}
    assert devin.fill(usage, {"output_tokens": "output_tokens"}) == [] and usage["output_tokens"] == 5


def per_event(body: bytes) -> list[bytes]:
    """A body cut at its events' ends, one event per read (as providers write them)."""
    out, i = [], 0
    while True:
        j = body.find(b"\n\n", i)
        if j < 0:
            return [*out, body[i:]] if body[i:] else out
        out.append(body[i : j + 2])
        i = j + 2


def _long_streams() -> dict[str, bytes]:
    from streamfix import bench
    from streamfix.bench.instructions import anthropic_stream, gemini_stream

    return {"gemini": gemini_stream(text=50, thoughts=5), "anthropic": anthropic_stream(),
            "openai_chat": bench.devin_chat_stream(), "responses": bench.claude_responses_stream()}  # fmt: skip


@pytest.mark.parametrize("key", sorted(SAMPLES), ids=["/".join(k) for k in sorted(SAMPLES)])
def test_skimming_gives_the_full_paths_facts(key):
    """The deltas read without a JSON parse (a layout learned by wire/skim.py) record what
    the full parse records, escapes, spacing and envelopes included, in any cuts."""
    provider, framing, _ = key
    for pieces in ([SAMPLES[key]], per_event(SAMPLES[key])):
        d = decoder_for(provider, CTYPE[framing])
        d.skimming = False
        for p in pieces:
            d.feed(p)
        assert d.close() == decode(provider, framing, pieces) and d.skimmed == 0


@pytest.mark.parametrize("provider", ["gemini", "anthropic", "openai_chat", "responses"])
def test_long_streams_skimmed_give_the_full_paths_facts(provider):
    body = _long_streams()[provider]
    pieces = (
        per_event(body.replace(b"\r\n", b"\n"))
        if provider != "gemini"
        else [e.replace(b"\n\n", b"\r\n\r\n") for e in per_event(body.replace(b"\r\n", b"\n"))]
    )
    d = decoder_for(provider, CTYPE["sse"])
    d.skimming = False
    for p in pieces:
        d.feed(p)
    full = d.close()
    d = decoder_for(provider, CTYPE["sse"])
    for p in pieces:
        d.feed(p)
    assert d.close() == full and full.digest[1] > 0
    assert d.skimmed > len(pieces) * 0.8, (d.skimmed, len(pieces))  # most events skimmed
    whole = b"".join(pieces)
    for size in (1000, 16384, 7):  # reads that cut events: the parser ends the cut one, skimming goes on
        d = decoder_for(provider, CTYPE["sse"])
        for i in range(0, len(whole), size):
            d.feed(whole[i : i + size])
        assert d.close() == full
        if size != 7 and len(whole) > 4 * size:  # the first read learns the layouts, the next ones use them
            assert d.skimmed > len(pieces) * 0.6, (size, d.skimmed, len(pieces))


@pytest.mark.parametrize("provider", ["gemini", "anthropic", "openai_chat", "responses"])
def test_reads_of_many_events_are_skimmed_as_one_event_reads_are(provider):
    """The bench's provider streams (Google's in CRLF) in 16 KiB and 4 KiB reads: every
    event skimmed in one-event reads is skimmed in these too: the first read's (its first
    events teach the layouts that serve the rest of it), those after an event of another
    layout (which hands the rest back to the skim, not to the parser), and the one each
    read cuts (the parser's unfinished event, joined once and read as a one-event read);
    the facts are the one-event reads' (which the other tests hold to the full path's)."""
    from streamfix import bench
    from streamfix.bench.instructions import anthropic_stream, gemini_stream

    body = {"gemini": gemini_stream, "anthropic": anthropic_stream, "openai_chat": bench.devin_chat_stream,
            "responses": bench.claude_responses_stream}[provider]()  # fmt: skip
    blank = b"\r\n\r\n" if provider == "gemini" else b"\n\n"
    events = [e + blank for e in body.split(blank) if e]
    assert b"".join(events) == body
    d = decoder_for(provider, CTYPE["sse"])
    one = _feed(d, events)
    per_read = d.skimmed
    assert per_read > len(events) - 30, (per_read, len(events))
    for size in (16384, 4096):
        reads = [body[i : i + size] for i in range(0, len(body), size)]
        d = decoder_for(provider, CTYPE["sse"])
        assert _feed(d, reads) == one
        assert d.skimmed == per_read, (size, d.skimmed, per_read, len(reads))


def test_the_common_deltas_are_skimmed():
    """Counted by hand: a kind's first delta is parsed (its layout learned), each next one
    of the same layout is skimmed."""
    from streamfix.bench.instructions import gemini_stream

    cases = (
        ("gemini", gemini_stream(text=50, thoughts=5), 4 + 49),  # thoughts 5, text 50; call and finish parsed
        ("anthropic", SAMPLES[("anthropic", "sse", "tool_use")], 1 + 2),  # "!"; two input_json after ""
        ("openai_chat", SAMPLES[("openai_chat", "sse", "length")], 1),  # " world"
        ("responses", SAMPLES[("responses", "sse", "completed")], 2),  # " there", "2}"
        ("interactions", SAMPLES[("interactions", "sse", "completed")], 1),  # the second arguments_delta
    )
    for provider, body, n in cases:
        d = decoder_for(provider, CTYPE["sse"])
        for p in per_event(body.replace(b"\r\n", b"\n")):
            d.feed(p)
        assert d.skimmed == n, (provider, d.skimmed)


# --- the skim path's own pieces (perf28): the same digests and strings as the shared ones ----


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=3000), max_size=40))
def test_the_decoders_digest_is_verdicts(pieces):
    """The decoders' batched digest hashes exactly what wire.verdict.Digest hashes (the
    client leg's digest of the same pieces must match it)."""
    from streamfix.wire.upstream_decoders import _Digest
    from streamfix.wire.verdict import Digest

    ours, theirs = _Digest(), Digest()
    for p in pieces:
        ours.add(p)
        theirs.add(p)
    assert (ours.hexdigest(), ours.size) == (theirs.hexdigest(), theirs.size)


_STRING_BITS = st.sampled_from(
    [b"a", b" the", b"\xc3\xa9", b"\xff", b"\xed\xa0\x80", b"\x01", b'"', b"\\", b'\\"', b"\\\\", b"\\n", b"\\u003c",
     b"\\ud83d\\ude00", b"\\ud800", b"\\x", b'a", "b', b"\\/", b"\t"]
)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.lists(_STRING_BITS, max_size=8))
@example([b"\\ud800"])
@example([b'a", "b'])
def test_a_skimmed_holes_bytes_are_what_skimmed_text_decodes(bits):
    """The decoder reads a matched event's string as wire.skim.Skimmed.text does: the same
    text (as UTF-8, surrogates passed) or a ValueError on the same bytes."""
    from streamfix.wire.skim import Layout, Skimmed
    from streamfix.wire.upstream_decoders import _hole

    content = b"".join(bits)
    src = b'data: {"d":"' + content + b'"}\n\n'
    spans = [12, 12 + len(content)]
    layout = Layout("k", [b'data: {"d":"', b'"}\n\n'], ["s"], [("d",)], {})
    s = Skimmed(layout, src, spans)
    try:
        text = s.text(0)
        want: bytes | type = s.plain if s.plain is not None else text.encode("utf-8", "surrogatepass")
    except ValueError:
        want = ValueError
    try:
        got: bytes | type = _hole(src, spans, 0)
    except ValueError:
        got = ValueError
    assert got == want, (content, got, want)


def test_gemini_crlf_reads_are_skimmed_as_lf_ones():
    """Google's CRLF framing, one event per read (as the provider writes it): the same facts
    and the same events skimmed as the same stream in LF."""
    from streamfix.bench.instructions import gemini_stream

    body = gemini_stream(text=50, thoughts=5)
    results = []
    for framing in (body, body.replace(b"\r\n", b"\n")):
        sep = b"\r\n\r\n" if b"\r" in framing else b"\n\n"
        d = decoder_for("gemini", CTYPE["sse"])
        for p in framing.split(sep)[:-1]:
            d.feed(p + sep)
        results.append((d.close(), d.skimmed))
    assert results[0] == results[1] and results[0][1] == 4 + 49, results


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 59), _STRING_BITS | st.sampled_from([b"\r", b"\r\n", b"\\r"])), max_size=6))
def test_gemini_crlf_reads_with_bad_strings_give_the_full_paths_facts(edits):
    """CRLF reads, one event each, with escapes, CRs and broken bytes put into deltas'
    texts: skimmed off the raw read, the facts are those of the full path (skimming off)."""
    from streamfix.bench.instructions import gemini_stream

    events = [e + b"\r\n\r\n" for e in gemini_stream(text=50, thoughts=5).split(b"\r\n\r\n")[:-1]]
    for i, bit in edits:
        i %= len(events) - 2  # a thought or text delta (then the call and the finish)
        at = events[i].find(b'"text":"') + 8
        events[i] = events[i][:at] + bit + events[i][at:]
    got = []
    for skimming in (True, False):
        d = decoder_for("gemini", CTYPE["sse"])
        d.skimming = skimming
        for e in events:
            d.feed(e)
        got.append(d.close())
    assert got[0] == got[1]


def test_the_fuzz_harness_keeps_its_bodies_bounded():
    """atheris, 2026-12-02: 73 bytes of 0x1f (an Interactions sample, every op "repeat the
    tail") doubled the body 23 times, 2 GB, an out-of-memory in the harness, not the
    decoders. A mutated body stops growing at fuzz_upstream.MAX_BODY."""
    _, _, body, _ = fuzz_upstream._body(b"\x1f" * 72 + b"\n")
    assert len(body) < 2 * fuzz_upstream.MAX_BODY


# --- the fused match (perf2): the same facts as Layout.match's way ----


def _wire_events() -> dict[str, list[bytes]]:
    """Per provider wire, a stream of one event per read whose deltas keep a layout (the
    bench's, cut short; Interactions' sample with its deltas repeated)."""
    out = {}
    for provider, body in _long_streams().items():
        evs = per_event(body.replace(b"\r\n", b"\n"))
        out[provider] = evs[:40] + evs[-4:]
    evs = per_event(SAMPLES[("interactions", "sse", "completed")])
    out["interactions"] = evs[:3] + [evs[3]] * 4 + evs[4:6] + [evs[6]] * 4 + evs[7:9] + [evs[9], evs[10]] * 3 + evs[10:]
    return out


_WIRES = _wire_events()
_ESCAPE_BITS = _STRING_BITS | st.sampled_from(
    [b"\\u00E9", b"\\u00e9", b"\\uD83D\\uDE00", b"\\udc00", b"\\u12", b"\\u12g4", b"\\", b"\\b\\f\\r\\t", b"\\u0000",
     b"\x7f", b"\n", b"\r", b"\xe2\x82", b"\xe2\x82\xac", b"\\\\\\", b"\\\\\\\"", b"0", b"00", b"-1", b"1" * 19, b"1" * 17, b'"}', b":",
     b".5", b"e1", b" "]
)  # fmt: skip


def _cut(events: list[bytes], cuts: list[int] | None) -> list[bytes]:
    """The events as they are (None), or their bytes cut in reads of the sizes ``cuts``, in turn."""
    if cuts is None:
        return events
    whole, pieces, i, c = b"".join(events), [], 0, 0
    while i < len(whole):
        pieces.append(whole[i : i + cuts[c % len(cuts)]])
        i += cuts[c % len(cuts)]
        c += 1
    return pieces


def _facts(provider: str, pieces: list[bytes], skimming: bool, fused: bool) -> tuple:
    d = decoder_for(provider, CTYPE["sse"])
    d.skimming = skimming
    d.fused = fused
    for p in pieces:
        d.feed(p)
    return d.close(), d.skimmed, d.stopped


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(
    provider=st.sampled_from(sorted(_WIRES)),
    edits=st.lists(
        st.tuples(st.integers(0, 10**6), st.sampled_from("sna"), st.integers(0, 10**6), _ESCAPE_BITS), max_size=6
    ),
    crlf=st.booleans(),
    cuts=st.none() | st.lists(st.integers(1, 400) | st.integers(1000, 20_000), min_size=1, max_size=30),
)
@example(provider="responses", edits=[], crlf=False, cuts=None)
def test_the_fused_match_gives_layout_matchs_facts(provider, edits, crlf, cuts):
    """Every provider wire, deltas with escapes, surrogates, quotes, control bytes, bad UTF-8,
    odd digits, bytes put anywhere (a piece cut or changed), LF or CRLF, one event per
    read or cut anywhere (reads of many events too): the fused match (fused on) records what
    Layout.match's way records (fused off: the same result, skimmed count, stop), and
    that is what the full path (skimming off) records."""
    events = list(_WIRES[provider])
    for i, where, at, bit in edits:
        i %= len(events)
        e = events[i]
        numbers = [m for m in range(len(e) - 1) if e[m : m + 1] == b":" and 48 <= e[m + 1] <= 57]
        if where == "s" and b'":"' in e:  # into a string hole: after the last '":"' (the delta's text)
            k = e.rfind(b'":"') + 3
        elif where == "n" and numbers:  # before or into a number (an index, a created, a sequence_number)
            k = numbers[at % len(numbers)] + 1 + at % 3
        else:  # anywhere in the event (a piece, the framing)
            k = at % (len(e) + 1)
        events[i] = e[:k] + bit + e[k:]
    if crlf:
        events = [e.replace(b"\n", b"\r\n") for e in events]
    pieces = _cut(events, cuts)
    fused = _facts(provider, pieces, True, True)
    assert fused == _facts(provider, pieces, True, False)
    assert fused[0] == _facts(provider, pieces, False, False)[0]


def test_the_fused_match_serves_the_usual_deltas():
    """The bench streams cut short and Interactions' sample (one event per read): every
    layout learned has its string as its last hole, so each has a fused match (LF and
    CRLF); what the decoder records with them is Layout.match's way's."""
    for provider, events in _WIRES.items():
        on, off = _facts(provider, events, True, True), _facts(provider, events, True, False)
        assert on == off and on[1] > 0, provider
    layout_of = {}
    for provider in ("gemini", "anthropic", "openai_chat", "responses", "interactions"):
        d = decoder_for(provider, CTYPE["sse"])
        for e in _WIRES[provider]:
            d.feed(e)
        layout_of[provider] = [(lay.info.fast is not None, lay.info.crfast is not None) for lay in d._skim.layouts]
    assert all(v and all(f and c for f, c in v) for v in layout_of.values()), layout_of


@pytest.mark.parametrize("provider", sorted(_WIRES))
@pytest.mark.parametrize("crlf", [False, True])
def test_a_delta_read_after_an_unended_event_is_not_skimmed_alone(provider, crlf):
    """A read that ends one LF short of its event's blank line, then a whole delta in the
    next read: the parser still holds the first event (the delta's lines belong to it), so
    the delta is not read alone; the facts are Layout.match's way's and the full path's."""
    events = list(_WIRES[provider])
    for i in (12, 20, 21):
        events[i] = events[i][:-1]
    if crlf:
        events = [e.replace(b"\n", b"\r\n") for e in events]
    fused = _facts(provider, events, True, True)
    assert fused == _facts(provider, events, True, False)
    assert fused[0] == _facts(provider, events, False, False)[0]


# --- what the decoders leave unread: Responses' repeats, integer holes kept -------------------


def _no_repeats(provider: str) -> object:
    d = decoder_for(provider, CTYPE["sse"])
    d.repeats = {}
    d.repeat_lines = {}
    return d


def _feed(d, pieces) -> CallResult:
    for p in pieces:
        d.feed(p)
    return d.close()


def test_responses_repeats_are_counted_not_parsed():
    """The ``*.done`` events of the bench's Responses stream (5 items, a text part, four
    calls' arguments): every one counted, none parsed (one with its JSON broken inside is
    not among the bad), the facts those of the decoder that parses them; a repeat cut
    across reads is not read either (skipped to its end: the next test); with its type
    not its SSE name's, or not its first key, it is parsed and read."""
    from streamfix import bench

    events = per_event(bench.claude_responses_stream())
    names = [e.split(b"\n", 1)[0].removeprefix(b"event: ").decode() for e in events]
    repeats = [i for i, n in enumerate(names) if n.endswith(".done")]
    assert len(repeats) == 11  # counted by hand: 5 output_item, 4 arguments, 1 text, 1 content_part
    full = _feed(_no_repeats("responses"), events)
    assert full.finish == "completed" and full.bad == 0 and full.events == len(events)
    broken = list(events)
    for i in repeats:  # a quote taken out of the middle of each: not JSON any more
        e = broken[i]
        k = e.index(b'"', len(e) // 2)
        broken[i] = e[:k] + e[k + 1 :]
    for pieces in (events, broken, [b"".join(broken)[i : i + 1000] for i in range(0, len(b"".join(broken)), 1000)]):
        assert _feed(decoder_for("responses", CTYPE["sse"]), pieces) == full
    assert _feed(_no_repeats("responses"), broken).bad == len(repeats)  # (parsed, they are bad)
    # what a repeat's name does not say: read as any other event
    done = events[-1].replace(b"event: response.completed", b"event: response.output_item.done")
    assert _feed(decoder_for("responses", CTYPE["sse"]), [*events[:-1], done]) == full
    moved = events[-1].replace(b'{"type":"response.completed",', b'{"x":1,"type":"response.completed",')
    moved = moved.replace(b"event: response.completed", b"event: response.output_item.done")
    assert _feed(decoder_for("responses", CTYPE["sse"]), [*events[:-1], moved]) == full
    first = broken[repeats[0]].replace(b'data: {"type"', b'data: {"x":1,"type"')
    got = _feed(decoder_for("responses", CTYPE["sse"]), [*events[: repeats[0]], first, *events[repeats[0] + 1 :]])
    assert got == dataclasses.replace(full, bad=1)


def test_a_repeat_cut_across_reads_is_skipped_to_its_end_with_the_parsers_facts():
    """A ``*.done`` repeat whose ``data:`` line runs past its read (every big one does: a
    whole item's arguments) is skipped to its end without the parser, wherever the reads
    cut it (inside the line, at its LF, between the LF and the blank line, after it), and
    gives what parsing it gives; a CR in a later read, another line before the blank one,
    or the body ending inside it hand the bytes kept to the parser: the same facts as
    ever (a body ending inside the event is cut)."""
    from streamfix import bench

    events = per_event(bench.claude_responses_stream())
    i = max(range(len(events)), key=lambda k: len(events[k]) if b".done\n" in events[k][:60] else 0)
    big = events[i]
    assert big.startswith(b"event: response.") and len(big) > 30_000 and big.endswith(b"}\n\n")
    before, after = events[:i], events[i + 1 :]
    full = _feed(_no_repeats("responses"), events)
    head = big.index(b'"', big.index(b'"type":"') + 8) + 1  # event: NAME, data: {"type":"NAME"
    inside = [*before, big[: head - 3], big[head - 3 :], *after]  # the head itself cut: the parser reads it
    assert _feed(decoder_for("responses", CTYPE["sse"]), inside) == full
    for cut in sorted({head, head + 1, len(big) // 2, len(big) - 3, len(big) - 2, len(big) - 1,
                       *range(head + 60, len(big), 4999)}):  # fmt: skip
        d = decoder_for("responses", CTYPE["sse"])
        for e in before:
            d.feed(e)
        d.feed(big[:cut])
        assert d._skip is not None and d._sse.idle(), cut  # skipped, the parser given nothing
        assert _feed(d, [big[cut:], *after]) == full, cut
        for k in (7, 5000):  # the rest in reads of k bytes, the next events in the last of them
            rest = big[cut:] + b"".join(after)
            assert _feed(_fed(before, big[:cut]), [rest[j : j + k] for j in range(0, len(rest), k)]) == full, (cut, k)
    # the ways out to the parser: what parsing all along gives
    half = len(big) // 2
    crlf = [*before, big[:half], big[half:-2] + b"\r\n\r\n", *after]
    lined = [*before, big[:half], big[half:-1] + b"id: 7\n\n", *after]
    for pieces in (crlf, lined):
        assert _feed(decoder_for("responses", CTYPE["sse"]), pieces) == _feed(_no_repeats("responses"), pieces)
    ended = _feed(decoder_for("responses", CTYPE["sse"]), [*before, big[:half]])
    assert ended == _feed(_no_repeats("responses"), [*before, big[:half]]) and ended.ended == "cut"
    whole_line = _feed(decoder_for("responses", CTYPE["sse"]), [*before, big[:half], big[half:-1]])
    assert whole_line == _feed(_no_repeats("responses"), [*before, big[:half], big[half:-1]])


def _fed(pieces: list[bytes], last: bytes):
    d = decoder_for("responses", CTYPE["sse"])
    for p in [*pieces, last]:
        d.feed(p)
    return d


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), _ESCAPE_BITS), max_size=6),
    cuts=st.none() | st.lists(st.integers(1, 400) | st.integers(1000, 20_000), min_size=1, max_size=30),
)
def test_unread_repeats_change_nothing_but_the_bad_count(edits, cuts):
    """The Responses wire (its last events the repeats and the terminal) with bytes put
    anywhere, cut anywhere: what the decoder records is what it records parsing every
    event, but for the repeats it did not parse (fewer bad, never more)."""
    events = list(_WIRES["responses"])
    for i, at, bit in edits:
        i %= len(events)
        k = at % (len(events[i]) + 1)
        events[i] = events[i][:k] + bit + events[i][k:]
    pieces = _cut(events, cuts)
    on = _feed(decoder_for("responses", CTYPE["sse"]), pieces)
    off = _feed(_no_repeats("responses"), pieces)
    assert on.bad <= off.bad
    assert dataclasses.replace(on, bad=0) == dataclasses.replace(off, bad=0)


def test_an_integer_hole_that_repeats_is_matched_whole_and_one_that_changes_is_read():
    """The chat bench's deltas: ``created`` (the same in every chunk) is kept and matched by
    one compare; Responses' ``sequence_number`` (new at every event) stops being kept after
    SEEN_MISSES events. Either way the facts are those of the layout's own match. Reads of
    three events (the fused match is the way of a read of several; a read that is one
    delta is wire/fastread.py's)."""
    from streamfix.wire.upstream_decoders import SEEN_MISSES

    from streamfix import bench

    for provider, body in (("openai_chat", bench.devin_chat_stream()), ("responses", bench.claude_responses_stream())):
        one = per_event(body)
        events = [b"".join(one[i : i + 3]) for i in range(0, len(one), 3)]
        d = decoder_for(provider, CTYPE["sse"])
        got = _feed(d, events)
        generic = decoder_for(provider, CTYPE["sse"])
        generic.fused = False
        assert _feed(generic, events) == got
        fasts = [lay.info.fast for lay in d._skim.layouts if lay.info is not None and lay.info.fast is not None]
        assert fasts
        for f in fasts:
            if provider == "responses":
                assert f.top == 1 and not f.caching and f.seen == [b""] and f.misses == [SEEN_MISSES], (
                    f.seen,
                    f.misses,
                )
            else:
                created = [s for s in f.seen if s.startswith(b"1789012345,")]
                assert f.caching and len(created) == 1 and f.misses[f.seen.index(created[0])] == 0, (f.seen, f.misses)


@pytest.mark.parametrize("provider", sorted(_WIRES))
def test_a_byte_changed_anywhere_in_a_skimmed_delta_gives_layout_matchs_facts(provider):
    """Every byte of one delta, the 30th event (after its layout's integer holes were kept),
    changed in turn: the fused match (with what it keeps) records what Layout.match's way
    and the full path record."""
    events = list(_WIRES[provider])
    i = min(30, len(events) - 5)
    e = events[i]
    for k in range(len(e)):
        changed = e[:k] + bytes([e[k] ^ 1]) + e[k + 1 :]
        pieces = [*events[:i], changed, *events[i + 1 :]]
        fused = _facts(provider, pieces, True, True)
        assert fused == _facts(provider, pieces, True, False), (k, changed)
        assert fused[0] == _facts(provider, pieces, False, False)[0], (k, changed)
