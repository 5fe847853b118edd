"""wire/verdict.py: every evidence source alone, combined, switched off; the usage == cap rule."""

import pytest
from streamfix.wire.verdict import SOURCES, UpstreamUsage, Verdict, required_properties

VALID = '{"path":"a.md","content":"hi"}'
CUT = '{"path":"a.md","content":"h'


def v(*off: str, **kw) -> Verdict:
    return Verdict(enabled=frozenset(SOURCES) - set(off), **kw)


def sources(d) -> list[str]:
    return [e.source for e in d.evidence]


# --- no evidence, request_cap alone ------------------------------------------------------
def test_no_evidence_is_unknown():
    d = v().decide()
    assert d.outcome == "unknown" and not d.truncated and not d.native
    assert d.receipt() == "verdict unknown (no evidence)"


@pytest.mark.parametrize(
    "body, cap, field",
    [
        ({"max_tokens": 400}, 400, "max_tokens"),
        ({"max_completion_tokens": 300, "max_tokens": 400}, 300, "max_completion_tokens"),
        ({"max_output_tokens": 200, "max_tokens": 400}, 200, "max_output_tokens"),
        ({"generationConfig": {"maxOutputTokens": 128}}, 128, "generationConfig.maxOutputTokens"),
        ({"generation_config": {"max_output_tokens": 64}}, 64, "generation_config.max_output_tokens"),
        ({"max_tokens": True}, None, None),
        ({"max_tokens": 0}, None, None),
        ({"max_tokens": "400"}, None, None),
        ({"generationConfig": {"maxOutputTokens": -1}}, None, None),
        ({}, None, None),
    ],
)
def test_request_cap_spellings(body, cap, field):
    ver = v()
    ver.request(body)
    assert (ver.cap, ver.cap_field) == (cap, field)


def test_request_cap_alone_decides_nothing():
    ver = v()
    ver.request({"max_tokens": 400})
    assert ver.decide().outcome == "unknown"


def test_request_cap_switched_off():
    ver = v("request_cap")
    ver.request({"max_tokens": 400})
    ver.usage(400)
    assert ver.cap is None
    assert ver.decide().outcome == "unknown"


def test_request_ignores_non_objects():
    ver = v()
    ver.request(None)
    ver.request([{"max_tokens": 1}])
    assert ver.cap is None


# --- usage ---------------------------------------------------------------------------------
def test_usage_alone_without_cap_decides_nothing():
    ver = v()
    ver.usage(999999)
    assert ver.decide().outcome == "unknown"


@pytest.mark.parametrize("tokens, outcome", [(399, "complete"), (400, "max_tokens"), (401, "max_tokens")])
def test_usage_against_cap_text_only(tokens, outcome):
    ver = v()
    ver.request({"max_tokens": 400})
    ver.observe_text("Once upon a time")
    ver.usage(tokens)
    d = ver.decide()
    assert d.outcome == outcome
    assert sources(d) == ["usage"]
    assert str(tokens) in d.receipt() and "max_tokens 400" in d.receipt()


def test_usage_switched_off():
    ver = v("usage")
    ver.request({"max_tokens": 400})
    ver.usage(400)
    assert ver.decide().outcome == "unknown"


def test_usage_ignores_bad_values():
    ver = v()
    for bad in (None, "400", True, -3, 4.5):
        ver.usage(bad)
    assert ver.output_tokens is None


def test_zero_client_usage_is_no_evidence():
    ver = v()
    ver.request({"max_tokens": 400})
    ver.usage(0)  # CPA writes zeros when Devin sent no usage
    assert ver.output_tokens_best == (None, None)
    assert ver.decide().outcome == "unknown"


# --- the usage == cap rule ---------------------------------------------------------------------
def test_usage_at_cap_with_last_call_whole_is_complete():
    ver = v()
    ver.request({"max_tokens": 400})
    ver.observe_text("Writing it")
    ver.observe_args(VALID)
    ver.tool_args(VALID)
    ver.usage(400)
    d = ver.decide()
    assert d.outcome == "complete" and not d.truncated
    assert {e.source: e.says for e in d.evidence} == {"tool_args": "complete", "usage": "complete"}
    assert "nothing cut" in d.receipt()


SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
          "required": ["path", "content"]}  # fmt: skip


@pytest.mark.parametrize(
    "body",
    [
        {"tools": [{"type": "function", "function": {"name": "write_file", "parameters": SCHEMA}}]},  # chat
        {"tools": [{"type": "function", "name": "write_file", "parameters": SCHEMA}]},  # Responses
        {"tools": [{"name": "write_file", "input_schema": SCHEMA}]},  # Messages
        {"tools": [{"functionDeclarations": [{"name": "write_file", "parameters": SCHEMA}]}]},  # Gemini
        {"tools": [{"function_declarations": [{"name": "write_file", "parametersJsonSchema": SCHEMA}]}]},
    ],
)
def test_required_properties_of_every_apis_tools(body):
    assert required_properties(body) == {"write_file": ("path", "content")}


def test_required_properties_of_odd_declarations():
    assert required_properties({"tools": "x"}) == {}
    assert required_properties({"tools": [None, {"name": 3}, {"name": "a", "parameters": {"required": "path"}},
                                          {"name": "b", "parameters": {"required": [1, "x"]}}]}) == {"b": ("x",)}  # fmt: skip


def test_usage_at_cap_with_a_call_that_lacks_a_required_property_is_max_tokens():
    """Gemini MAX_TOKENS through CPA (v7.2.89, v7.2.140): output 400 of 400, the last call
    ``{"path": "essay.md"}`` while write_file requires path and content: it parses, yet the
    budget cut it; the gateway said completed / tool_use."""
    ver = v()
    ver.request({"max_output_tokens": 400, "tools": [{"type": "function", "name": "write_file", "parameters": SCHEMA}]})
    ver.observe_args('{"path": "essay.md"}')
    ver.tool_args('{"path": "essay.md"}', "write_file")
    ver.usage(400)
    d = ver.decide()
    assert d.outcome == "max_tokens"
    assert {e.source: e.says for e in d.evidence} == {"usage": "max_tokens", "tool_args": "unknown"}
    assert "lack content, required by write_file's schema" in d.receipt()


def test_a_call_that_lacks_a_required_property_below_the_cap_is_no_truncation():
    ver = v()
    ver.request({"max_output_tokens": 400, "tools": [{"type": "function", "name": "write_file", "parameters": SCHEMA}]})
    ver.tool_args('{"path": "essay.md"}', "write_file")
    ver.usage(120)
    assert ver.decide().outcome == "complete"


def test_a_whole_call_of_its_schema_at_the_cap_stays_complete():
    for name, args in (("write_file", VALID), ("undeclared", '{"path": "a"}'), (None, '{"path": "a"}')):
        ver = v()
        ver.request({"max_output_tokens": 400, "tools": [{"type": "function", "name": "write_file",
                                                          "parameters": SCHEMA}]})  # fmt: skip
        ver.tool_args(args, name)
        ver.usage(400)
        assert ver.decide().outcome == "complete", name


def test_the_schemas_are_not_read_with_tool_args_off():
    ver = v("tool_args")
    ver.request({"max_tokens": 400, "tools": [{"name": "write_file", "input_schema": SCHEMA}]})
    assert ver.required == {}


def test_usage_at_cap_with_text_after_a_whole_call_is_max_tokens():
    ver = v()
    ver.request({"max_tokens": 400})
    ver.observe_args(VALID)
    ver.tool_args(VALID)
    ver.observe_text("Done. Now I will also")
    ver.usage(400)
    d = ver.decide()
    assert d.outcome == "max_tokens"
    assert d.evidence[0].source == "usage"


def test_usage_at_cap_text_only_is_max_tokens():
    ver = v()
    ver.request({"max_completion_tokens": 16})
    ver.observe_text("a" * 50)
    ver.usage(16)
    assert ver.decide().outcome == "max_tokens"


def test_usage_at_cap_without_any_output_observed_is_max_tokens():
    ver = v()
    ver.request({"max_tokens": 5})
    ver.usage(5)
    assert ver.decide().outcome == "max_tokens"


# --- tool_args -------------------------------------------------------------------------------
def test_tool_args_cut_alone_is_max_tokens():
    ver = v()
    ver.tool_args(CUT)
    d = ver.decide()
    assert d.outcome == "max_tokens" and sources(d) == ["tool_args"]
    assert f"({len(CUT)} chars)" in d.receipt()
    assert "a.md" not in d.receipt()  # never content


def test_tool_args_whole_alone_is_complete():
    ver = v()
    ver.observe_args(VALID)
    ver.tool_args(VALID)
    assert ver.decide().outcome == "complete"


def test_tool_args_empty_string_is_cut():
    ver = v()
    ver.tool_args("")
    assert ver.decide().outcome == "max_tokens"


def test_tool_args_cut_but_text_followed_is_not_a_truncation():
    ver = v()
    ver.observe_args(CUT)
    ver.tool_args(CUT)
    ver.observe_text("Sorry, let me retry.")
    d = ver.decide()
    assert d.outcome == "complete"
    assert "text followed" in d.receipt()


def test_last_tool_call_wins():
    ver = v()
    ver.tool_args(CUT)
    ver.tool_args(VALID)
    assert ver.decide().outcome == "complete"
    ver2 = v()
    ver2.tool_args(VALID)
    ver2.tool_args(CUT)
    assert ver2.decide().outcome == "max_tokens"


def test_tool_args_switched_off():
    ver = v("tool_args")
    ver.tool_args(CUT)
    assert ver.decide().outcome == "unknown"


def test_cut_args_beat_usage_below_cap():
    ver = v()
    ver.request({"max_tokens": 4000})
    ver.observe_args(CUT)
    ver.tool_args(CUT)
    ver.usage(390)
    d = ver.decide()
    assert d.outcome == "max_tokens"
    assert [(e.source, e.says) for e in d.evidence] == [("tool_args", "max_tokens"), ("usage", "complete")]


def test_cut_args_and_usage_at_cap_both_listed():
    ver = v()
    ver.request({"max_tokens": 400})
    ver.observe_args(CUT)
    ver.tool_args(CUT)
    ver.usage(400)
    d = ver.decide()
    assert d.outcome == "max_tokens" and sources(d) == ["tool_args", "usage"]


# --- native ----------------------------------------------------------------------------------
@pytest.mark.parametrize("says", ["max_tokens", "content_filter", "complete", "unknown"])
def test_native_alone_wins_and_is_marked(says):
    ver = v()
    ver.native(says, "finish_reason 'x'")
    d = ver.decide()
    assert d.outcome == says and d.native and sources(d) == ["native"]


def test_native_beats_upstream_and_heuristics():
    ver = v()
    ver.request({"max_tokens": 400})
    ver.usage(400)
    ver.tool_args(CUT)
    ver.upstream("complete", "StopReason 10")
    ver.native("content_filter", "finish_reason 'content_filter'")
    d = ver.decide()
    assert d.outcome == "content_filter" and d.native


@pytest.mark.parametrize(
    ("native", "upstream", "outcome", "is_native"),
    [
        # LiteLLM: OpenAI's incomplete content_filter reaches /v1/messages as max_tokens
        ("max_tokens", "content_filter", "content_filter", False),
        ("content_filter", "max_tokens", "max_tokens", False),
        ("max_tokens", "failed", "failed", False),  # the provider failed: never an unfinished turn
        ("max_tokens", "max_tokens", "max_tokens", True),  # they agree: the gateway's own word stays
        ("max_tokens", "complete", "max_tokens", True),  # a normal end proves nothing against it
        ("max_tokens", "unknown", "max_tokens", True),
        ("unknown", "content_filter", "unknown", True),
    ],
)
def test_a_gateways_unfinished_word_yields_to_the_providers_other_one(native, upstream, outcome, is_native):
    ver = v()
    ver.native(native, "stop_reason 'max_tokens'")
    ver.upstream(upstream, "Responses status incomplete/content_filter")
    d = ver.decide()
    assert (d.outcome, d.native) == (outcome, is_native)
    if not is_native:
        assert sources(d) == ["upstream", "native"]


@pytest.mark.parametrize(
    ("says", "meaning", "words"),
    [
        # each API's own word for what the provider's stop meant (wire/stops.py)
        ("max_tokens", None, ("length", "max_tokens", "MAX_TOKENS", "max_output_tokens")),
        ("max_tokens", "pause", ("length", "pause_turn", "MAX_TOKENS", "max_output_tokens")),
        ("max_tokens", "context", ("length", "model_context_window_exceeded", "MAX_TOKENS", "max_output_tokens")),
        ("content_filter", None, ("content_filter", "refusal", "SAFETY", "content_filter")),
        ("content_filter", "refusal", ("content_filter", "refusal", "SAFETY", "content_filter")),
        # an OpenAI refusal (said in content, then a normal end): chat and Responses keep their end
        ("content_filter", "declined", (None, "refusal", "SAFETY", None)),
        # a meaning that does not go with the outcome is not used
        ("max_tokens", "refusal", ("length", "max_tokens", "MAX_TOKENS", "max_output_tokens")),
        ("complete", None, (None, None, None, None)),
        ("failed", None, (None, None, None, None)),
    ],
)
def test_each_api_says_the_providers_meaning_in_its_own_word(says, meaning, words):
    ver = v()
    ver.upstream(says, "x", meaning=meaning)
    d = ver.decide()
    assert tuple(d.word(api) for api in ("chat", "messages", "gemini", "responses")) == words


def test_the_heuristics_word_is_the_outcomes_default():
    ver = v()
    ver.request({"max_tokens": 10})
    ver.usage(10)
    d = ver.decide()
    assert (d.outcome, d.word("messages"), d.word("chat")) == ("max_tokens", "max_tokens", "length")


def test_native_switched_off():
    ver = v("native")
    ver.native("max_tokens", "finish_reason 'length'")
    assert ver.decide().outcome == "unknown"


# --- upstream --------------------------------------------------------------------------------
@pytest.mark.parametrize("says", ["max_tokens", "content_filter", "complete"])
def test_upstream_alone(says):
    ver = v()
    ver.upstream(says, "StopReason n")
    d = ver.decide()
    assert d.outcome == says and not d.native and sources(d) == ["upstream"]


def test_upstream_complete_beats_client_heuristics():
    ver = v()
    ver.request({"max_tokens": 400})
    ver.usage(400)
    ver.tool_args(CUT)
    ver.upstream("complete", "StopReason 10 FUNCTION_CALL")
    assert ver.decide().outcome == "complete"


def test_upstream_max_tokens_beats_usage_below_cap():
    ver = v()
    ver.request({"max_tokens": 400})
    ver.usage(100)
    ver.observe_args(VALID)
    ver.tool_args(VALID)
    ver.upstream("max_tokens", "StopReason 3 MAX_TOKENS")
    d = ver.decide()
    assert d.outcome == "max_tokens" and d.evidence[0].detail == "StopReason 3 MAX_TOKENS"


def test_upstream_unknown_falls_back_to_heuristics_and_is_listed():
    ver = v()
    ver.upstream("unknown", "StopReason 0")
    ver.tool_args(CUT)
    d = ver.decide()
    assert d.outcome == "max_tokens"
    assert "upstream" in sources(d) and "tool_args" in sources(d)


def test_upstream_switched_off():
    ver = v("upstream")
    ver.upstream("max_tokens", "StopReason 3", output_tokens=400)
    assert ver.upstream_output_tokens is None
    assert ver.decide().outcome == "unknown"


def test_upstream_usage_fills_missing_client_usage():
    ver = v()
    ver.request({"max_tokens": 400})
    ver.usage(0)
    ver.upstream_usage(400)
    assert ver.output_tokens_best == (400, "upstream")
    d = ver.decide()
    assert d.outcome == "max_tokens" and sources(d) == ["usage.upstream"]


def test_client_usage_wins_over_upstream_usage():
    ver = v()
    ver.usage(120)
    ver.upstream_usage(400)
    assert ver.output_tokens_best == (120, "client")


def test_upstream_may_carry_usage():
    ver = v()
    ver.upstream("unknown", "StopReason 0", output_tokens=77)
    assert ver.output_tokens_best == (77, "upstream")


def test_upstream_counts_are_kept_whole():
    ver = v()
    counts = UpstreamUsage(12850, 400, 11640, 13250, "swe-2", "field7")
    ver.upstream_usage(counts)
    assert ver.upstream_counts is counts
    assert ver.output_tokens_best == (400, "upstream")
    assert counts.detail() == "upstream usage input 12850 (cached 11640) output 400 total 13250, model swe-2 (field7)"
    off = v("upstream")
    off.upstream_usage(counts)
    assert off.upstream_counts is None and off.upstream_output_tokens is None


RESPONSES_FIELDS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "input_tokens_details.cached_tokens": "cached_tokens",
}
COUNTS = UpstreamUsage(12850, 400, 11640, 13250, "swe-2", "field7")


def fill(usage):
    return COUNTS.fill(usage, RESPONSES_FIELDS, "total_tokens", ("input_tokens", "output_tokens")), usage


def test_fill_missing_and_zero_counts():
    assert fill({}) == (
        ["input_tokens", "output_tokens", "input_tokens_details.cached_tokens", "total_tokens"],
        {
            "input_tokens": 12850,
            "output_tokens": 400,
            "input_tokens_details": {"cached_tokens": 11640},
            "total_tokens": 13250,
        },
    )
    zeros = {
        "input_tokens": 0,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 0,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 0,
    }
    filled, usage = fill(zeros)
    assert filled == ["input_tokens", "output_tokens", "input_tokens_details.cached_tokens", "total_tokens"]
    assert usage == {
        "input_tokens": 12850,
        "input_tokens_details": {"cached_tokens": 11640},
        "output_tokens": 400,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 13250,
    }  # key order kept


def test_fill_never_overwrites_a_non_zero_count():
    usage = {"input_tokens": 5, "output_tokens": 7, "total_tokens": 12, "input_tokens_details": {"cached_tokens": 1}}
    assert fill(usage) == (
        [],
        {"input_tokens": 5, "output_tokens": 7, "total_tokens": 12, "input_tokens_details": {"cached_tokens": 1}},
    )


def test_fill_total_derived_from_filled_zeros_is_recomputed():
    # output 0 was filled: a total that was input + 0 is recomputed, a different one is kept
    assert fill({"input_tokens": 100, "output_tokens": 0, "total_tokens": 100})[1] == {
        "input_tokens": 100,
        "output_tokens": 400,
        "total_tokens": 500,
        "input_tokens_details": {"cached_tokens": 11640},
    }
    assert fill({"input_tokens": 100, "output_tokens": 0, "total_tokens": 999})[1]["total_tokens"] == 999


def test_fill_leaves_a_non_object_in_place_and_zero_for_zero():
    filled, usage = fill({"input_tokens_details": "n/a", "input_tokens": 1, "output_tokens": 1, "total_tokens": 2})
    assert filled == [] and usage["input_tokens_details"] == "n/a"
    none = UpstreamUsage()  # an upstream 0 adds nothing
    assert none.fill({"a": 0}, {"a": "input_tokens"}) == []
    assert none.fill({}, {"a": "input_tokens"}, "t", ("a",)) == []


# --- resolver, digest --------------------------------------------------------------------------
def test_resolver_runs_once_at_decide_and_can_report_upstream():
    calls = []

    def resolve(ver: Verdict) -> None:
        calls.append(ver.digest())
        ver.upstream("max_tokens", "StopReason 3")

    ver = v(resolver=resolve)
    ver.observe_text("hi")
    assert calls == []
    assert ver.decide().outcome == "max_tokens"
    assert ver.decide().outcome == "max_tokens"
    assert len(calls) == 1 and calls[0][1] == 2


def test_digest_tracks_text_and_args_separately_in_order():
    a, b = v(), v()
    a.observe_text("ab")
    a.observe_text("c")
    b.observe_text("abc")
    assert a.digest() == b.digest()
    b.observe_args("{}")
    assert a.digest()[:2] == b.digest()[:2] and a.digest()[2:] != b.digest()[2:]
    assert b.last_output == "args"
    b.observe_text("")  # empty deltas change nothing
    assert b.last_output == "args"


def test_a_digest_of_pieces_is_blake2b_of_their_bytes():
    """Both legs' digests (Verdict, the Devin tap) hash in batches: the hash and size are
    those of the whole bytes, whatever the pieces, across and at the batch size."""
    import hashlib
    import random

    from streamfix.wire.verdict import HASH_BATCH, Digest

    rng = random.Random(7)
    for total in (0, 1, HASH_BATCH - 1, HASH_BATCH, HASH_BATCH + 1, 5 * HASH_BATCH + 17):
        data = bytes(rng.randrange(256) for _ in range(total))
        d = Digest()
        i = 0
        while i < total:
            n = rng.choice([1, 3, 100, HASH_BATCH, 3 * HASH_BATCH])
            d.add(data[i : i + n])
            i += n
        assert d.size == total
        assert d.hexdigest() == hashlib.blake2b(data).hexdigest()
        assert d.hexdigest() == hashlib.blake2b(data).hexdigest()  # asked again: the same
        d.add(b"x")
        assert d.hexdigest() == hashlib.blake2b(data + b"x").hexdigest()
