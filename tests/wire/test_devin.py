"""wire/devin.proto + wire/devin.py: schema, the response tap, the request patch."""

from __future__ import annotations

import pytest
from google.protobuf import unknown_fields
from hypothesis import given, settings
from hypothesis import strategies as st
from samples import SAMPLE, client_digest, make_request
from streamfix.wire import devin_pb2 as pb
from streamfix.wire.connect import decode_body, encode_end_stream, encode_frame
from streamfix.wire.devin import (
    DevinTap,
    Usage,
    outcome_of,
    patch_max_tokens,
    read_request,
    stop_reason_name,
)

# --- schema -------------------------------------------------------------------------


def test_stop_reason_enum_values():
    assert {stop_reason_name(v): v for v in pb.StopReason.values()} == {
        "UNSPECIFIED": 0, "INCOMPLETE": 1, "STOP_PATTERN": 2, "MAX_TOKENS": 3,
        "MIN_LOG_PROB": 4, "MAX_NEWLINES": 5, "PARTIAL": 9, "FUNCTION_CALL": 10,
        "CONTENT_FILTER": 11, "NON_INSERTION": 12, "ERROR": 13,
    }  # fmt: skip
    assert stop_reason_name(7) == "UNKNOWN_7"


def sample_messages() -> list[pb.GetChatMessageResponse]:
    frames, end = decode_body(SAMPLE)
    assert end.ok
    return [pb.GetChatMessageResponse.FromString(f.payload) for f in frames[:-1]]


def test_sample_frames_decode_to_documented_values():
    """The sample body's frames F1..F11, field by field (decoded by hand)."""
    f = sample_messages()
    assert f[0].output_id == b"bot-7c1d5e9a" and f[0].message_id == b"msg-4b2a"
    assert f[0].timestamp.seconds == 1789012345 and f[0].HasField("timestamp")
    assert f[1].thinking == b"Need an HTML page" and f[2].thinking == b" for the landing site."
    assert f[3].text == b"Writing index.html" and f[4].text == b" now."
    (tc,) = f[5].tool_calls
    assert tc.id == b"write_file_0#a1" and tc.name == b"write_file"
    assert tc.arguments_json == b'{"path":"index.html","content":"'
    (tc,) = f[6].tool_calls
    assert tc.id == b"" and tc.arguments_json.startswith(b"<!doctype html>")
    assert f[7].tool_calls[0].arguments_json.endswith(b"<h1>Launch")
    assert f[8].stop_reason == pb.STOP_REASON_MAX_TOKENS and f[8].delta_tokens == 400
    u = f[9].usage
    assert (u.prompt_tokens, u.output_tokens, u.cache_read_tokens, u.model) == (1210, 400, 11640, b"swe-2")
    (g,) = f[10].dimension_groups
    assert g.title == b"Token Usage"
    assert {m.key: m.value.value for m in g.metrics} == {
        b"input_tokens": 12850.0, b"output_tokens": 400.0, b"cached_input_tokens": 11640.0,
    }  # fmt: skip
    for m in f:  # the schema covers every field the sample uses
        assert not list(unknown_fields.UnknownFieldSet(m))
    # re-encoding gives the sample's bytes back, except F11, whose metrics put field 5
    # before field 4 (protobuf writes fields in number order; the same message)
    frames, _ = decode_body(SAMPLE)
    for m, fr in zip(f[:10], frames[:10]):
        assert m.SerializeToString() == fr.payload
    assert pb.GetChatMessageResponse.FromString(f[10].SerializeToString()) == f[10]


def test_unknown_fields_do_not_break_parsing():
    extra = (
        b"\x1a\x02hi"  # 3: text
        + b"\xa0\x06\x07"  # 100: varint 7 (unknown)
        + b"\xaa\x06\x03abc"  # 101: bytes (unknown)
        + b"\xb5\x06\x01\x02\x03\x04"  # 102: fixed32 (unknown)
        + b"\xb9\x06"
        + bytes(8)  # 103: fixed64 (unknown)
        + b"\x28\x0a"  # 5: FUNCTION_CALL
        + b"\x32\x06\x1a\x02{}\x40\x01"  # 6: tool call with an unknown field 8
    )
    m = pb.GetChatMessageResponse.FromString(extra)
    assert m.text == b"hi" and m.stop_reason == pb.STOP_REASON_FUNCTION_CALL
    assert m.tool_calls[0].arguments_json == b"{}"
    assert sorted(f.field_number for f in unknown_fields.UnknownFieldSet(m)) == [100, 101, 102, 103]
    again = pb.GetChatMessageResponse.FromString(m.SerializeToString())
    assert again == m  # unknown fields survive a round trip


def test_field_2_as_varint_still_parses():
    """CPA accepts field 2 as a varint too; the schema declares a message, so protobuf
    keeps a varint 2 as an unknown field and parses the rest of the frame."""
    m = pb.GetChatMessageResponse.FromString(b"\x10\xb9\x60" + b"\x28\x03" + b"\x1a\x01x")
    assert m.stop_reason == 3 and m.text == b"x"
    assert not m.HasField("timestamp")
    assert [(f.field_number, f.wire_type, f.data) for f in unknown_fields.UnknownFieldSet(m)] == [(2, 0, 12345)]


def test_invalid_utf8_in_response_text_fields_parses():
    # bytes, not string: a split UTF-8 character or an odd id must not cost the frame
    m = pb.GetChatMessageResponse.FromString(b"\x1a\x01\xe2" + b"\x0a\x01\xff" + b"\x28\x03")
    assert m.text == b"\xe2" and m.stop_reason == 3


# --- the tap ------------------------------------------------------------------------


SAMPLE_TEXT = ["Writing index.html", " now."]
SAMPLE_ARGS = [
    '{"path":"index.html","content":"',
    '<!doctype html>\\n<html lang=\\"en\\">\\n<head>\\n  <title>Acme',
    ' Rockets</title>\\n</head>\\n<body>\\n  <section class=\\"hero\\">\\n    <h1>Launch',
]


def test_tap_on_the_sample():
    tap = DevinTap(keep_text=True)
    tap.feed(SAMPLE)
    assert tap.ended
    r = tap.close()
    assert r.stop_reason == 3 and r.stop_reason_name == "MAX_TOKENS"
    assert r.outcome == "max_tokens" and r.detail() == "Devin StopReason 3 MAX_TOKENS"
    assert r.usage == Usage(prompt_tokens=1210, output_tokens=400, cache_read_tokens=11640, model="swe-2")
    assert (r.usage.input_tokens, r.usage.cached_tokens) == (12850, 11640)
    assert r.trailer.ok and r.error is None and r.frames == 12 and r.bad_frames == 0
    assert [(c.id, c.name) for c in r.tool_calls] == [("write_file_0#a1", "write_file")]
    assert r.tool_calls[0].args_len == sum(len(a.encode()) for a in SAMPLE_ARGS)
    assert r.thinking_len == len("Need an HTML page for the landing site.")
    assert bytes(tap.text) == b"Writing index.html now."
    assert r.digest == client_digest(SAMPLE_TEXT, SAMPLE_ARGS)
    # the client's deltas may be cut differently: only the concatenation counts
    assert r.digest == client_digest(["Writing", " index.html now."], ["".join(SAMPLE_ARGS)])
    assert r.digest != client_digest(SAMPLE_TEXT, SAMPLE_ARGS[:2])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, len(SAMPLE)), max_size=40))
def test_tap_result_is_independent_of_chunking(cuts):
    cuts = sorted(cuts)
    one = DevinTap()
    one.feed(SAMPLE)
    many = DevinTap()
    for a, b in zip([0, *cuts], [*cuts, len(SAMPLE)]):
        many.feed(SAMPLE[a:b])
    assert many.close() == one.close()


def resp(**kw) -> bytes:
    return encode_frame(pb.GetChatMessageResponse(**kw).SerializeToString())


def test_last_nonzero_stop_reason_wins_and_zero_does_not_reset():
    tap = DevinTap()
    tap.feed(resp(stop_reason=2) + resp(text=b"a") + resp(stop_reason=3) + resp(text=b"b", stop_reason=0))
    tap.feed(encode_end_stream())
    assert tap.close().stop_reason == 3


@pytest.mark.parametrize(
    "value, outcome",
    [(0, None), (1, "max_tokens"), (2, "complete"), (3, "max_tokens"), (4, None), (5, None),
     (9, None), (10, "complete"), (11, "content_filter"), (12, None), (13, None), (42, None)],
)  # fmt: skip
def test_outcome_mapping(value, outcome):
    assert outcome_of(value) == outcome
    tap = DevinTap()
    tap.feed(resp(stop_reason=value) + encode_end_stream())
    assert tap.close().outcome == outcome


def test_error_trailer_is_a_failed_call_whatever_the_stop_reason():
    """Devin's own failure (a trailer error after StopReason 3) is ``failed``: the client
    hears a failure, not the truncation the StopReason alone would say."""
    tap = DevinTap()
    tap.feed(resp(text=b"x", stop_reason=3) + encode_end_stream("resource_exhausted", "quota"))
    assert tap.ended
    r = tap.close()
    assert r.trailer.error_code == "resource_exhausted" and r.failed and r.outcome == "failed"
    assert r.detail() == "Devin StopReason 3 MAX_TOKENS, trailer error resource_exhausted"


def test_a_trailer_that_is_not_a_json_object_is_a_failed_call():
    tap = DevinTap()
    tap.feed(resp(text=b"x", stop_reason=2) + encode_frame(b"[1]", end_stream=True))
    r = tap.close()
    assert r.trailer is not None and r.trailer.malformed and r.outcome == "failed"


def test_truncated_stream_is_a_failed_call():
    tap = DevinTap()
    tap.feed(resp(text=b"x", stop_reason=2) + resp(text=b"y")[:3])
    assert not tap.ended
    assert tap.result().outcome is None  # not ended yet: nothing proven
    r = tap.close()
    assert r.outcome == "failed" and r.error.startswith("truncated")
    assert r.detail() == "Devin StopReason 2 STOP_PATTERN, truncated"
    assert tap.close() == r  # idempotent


def test_a_body_that_stops_between_frames_is_a_failed_call():
    tap = DevinTap()
    tap.feed(resp(text=b"x", stop_reason=10))
    r = tap.close()
    assert r.trailer is None and r.error.startswith("truncated") and r.outcome == "failed"


@pytest.mark.parametrize("body", [b"\x40\x00\x00\x00\x01x", b"\x00\xff\xff\xff\xff" + b"x" * 8],
                         ids=["bad-flags", "oversized"])  # fmt: skip
def test_a_protocol_error_proves_nothing_of_the_call(body):
    """Bytes the tap cannot read (unknown flags, an envelope over the bound) are not
    Devin saying it failed: the outcome stays unknown and the client leg decides."""
    tap = DevinTap()
    tap.feed(resp(text=b"x", stop_reason=2) + body + encode_end_stream())
    r = tap.close()
    assert r.error is not None and not r.error.startswith("truncated")
    assert not r.failed and r.outcome is None


def test_bad_frame_is_counted_and_skipped():
    tap = DevinTap()
    tap.feed(resp(text=b"a") + encode_frame(b"\xff\xff\xff") + resp(stop_reason=10) + encode_end_stream())
    r = tap.close()
    assert r.bad_frames == 1 and r.stop_reason == 10 and r.outcome == "complete"


def test_tap_never_raises_on_garbage():
    tap = DevinTap()
    tap.feed(b"\x07garbage")
    tap.feed(b"more")
    r = tap.close()
    assert "unknown envelope flags 0x07" in r.error and r.outcome is None


def test_gzip_frames_are_read():
    body = encode_frame(pb.GetChatMessageResponse(text=b"zip").SerializeToString(), compress=True)
    body += encode_frame(pb.GetChatMessageResponse(stop_reason=2).SerializeToString(), compress=True)
    tap = DevinTap()
    tap.feed(body + encode_end_stream(compress=True))
    r = tap.close()
    assert r.stop_reason == 2 and r.digest == client_digest(["zip"], [])


def test_utf8_split_across_frames_hashes_like_the_client_text():
    text = "héllo → wörld"
    raw = text.encode()
    tap = DevinTap()
    tap.feed(resp(text=raw[:2]) + resp(text=raw[2:9]) + resp(text=raw[9:], stop_reason=2) + encode_end_stream())
    assert tap.close().digest == client_digest([text], [])


def test_several_tool_calls_and_late_ids():
    tc = pb.ChatToolCall
    tap = DevinTap()
    tap.feed(
        resp(tool_calls=[tc(id=b"a", name=b"f", arguments_json=b'{"x":')])
        + resp(tool_calls=[tc(arguments_json=b"1}")])
        + resp(tool_calls=[tc(arguments_json=b'{"y"')])  # continues call a (no slot index)
        + resp(tool_calls=[tc(id=b"b", name=b"g", arguments_json=b":2}")])
        + resp(tool_calls=[tc(id=b"b", name=b"g")])  # re-sent header: same call
        + resp(stop_reason=10)
        + encode_end_stream()
    )
    r = tap.close()
    assert [(c.id, c.name, c.args_len) for c in r.tool_calls] == [("a", "f", 11), ("b", "g", 3)]
    assert r.digest == client_digest([], ['{"x":1}{"y"', ":2}"])


def test_dimension_groups_are_the_fallback_usage():
    DM, DV = pb.DimensionMetric, pb.DimensionValue
    group = pb.DimensionGroup(
        title=b"Token Usage",
        metrics=[DM(key=b"input_tokens", value=DV(value=100)), DM(key=b"output_tokens", value=DV(value=7)),
                 DM(key=b"cached_input_tokens", value=DV(value=60))],
    )  # fmt: skip
    tap = DevinTap()
    tap.feed(resp(dimension_groups=[group]) + encode_end_stream())
    u = tap.close().usage
    assert (u.input_tokens, u.output_tokens, u.cached_tokens) == (100, 7, 60)
    # field 7, when present, wins
    tap = DevinTap()
    tap.feed(resp(usage=pb.ModelUsage(prompt_tokens=5, output_tokens=3)) + resp(dimension_groups=[group]))
    assert tap.close().usage == Usage(5, 3, 0, 0)


def test_field_28_replaces_a_zero_field_7_and_keeps_its_model():
    # CPA falls back to the "Token Usage" group when field 7 is missing *or zero*; the
    # model (7.9) still comes from field 7, in either frame order
    DM, DV = pb.DimensionMetric, pb.DimensionValue
    other = pb.DimensionGroup(title=b"Latency", metrics=[DM(key=b"input_tokens", value=DV(value=999))])
    group = pb.DimensionGroup(
        title=b"Token Usage",
        metrics=[DM(key=b"input_tokens", value=DV(value=1500)), DM(key=b"output_tokens", value=DV(value=42)),
                 DM(key=b"cached_input_tokens", value=DV(value=1000))],
    )  # fmt: skip
    zero7 = resp(usage=pb.ModelUsage(model=b"claude-sonnet-4"))
    for body in (zero7 + resp(dimension_groups=[other, group]), resp(dimension_groups=[other, group]) + zero7):
        tap = DevinTap()
        tap.feed(body + encode_end_stream())
        u = tap.close().usage
        assert u.source == "field28" and u.model == "claude-sonnet-4"
        assert (u.input_tokens, u.output_tokens, u.cached_tokens, u.total_tokens) == (1500, 42, 1000, 1542)
        c = u.counts()
        assert (c.input_tokens, c.output_tokens, c.cached_tokens, c.total_tokens) == (1500, 42, 1000, 1542)
        assert (c.model, c.source) == ("claude-sonnet-4", "field28")
    # a zero field 7 and no group: zeros, from field 7
    tap = DevinTap()
    tap.feed(zero7 + encode_end_stream())
    u = tap.close().usage
    assert u.empty and u.source == "field7" and u.model == "claude-sonnet-4"


def test_usage_counts_use_cpas_mapping():
    u = Usage(prompt_tokens=1210, output_tokens=400, cache_write_tokens=7, cache_read_tokens=11640, model="swe-2")
    c = u.counts()
    # input = prompt + cache read, cached = cache read, total = input + output (CPA's usage mapping)
    assert (c.input_tokens, c.output_tokens, c.cached_tokens, c.total_tokens) == (12850, 400, 11640, 13250)
    assert (c.model, c.source) == ("swe-2", "field7")


# --- the request --------------------------------------------------------------------


def test_read_request():
    info = read_request(make_request())
    assert info.max_tokens == 128000 and info.model == "swe-2"
    assert info.prompts[0] == (1, "write a landing page")
    assert info.user_texts() == ["write a landing page", "now the CSS"]
    assert read_request(make_request(None)).max_tokens is None


@pytest.mark.parametrize(
    "body",
    [b"", b"\x00\x00\x00", make_request() + encode_frame(b""), make_request()[:-1],
     encode_end_stream(), make_request() + b"\x00", encode_frame(b"\xff\xff")],
)  # fmt: skip
def test_read_request_rejects_non_requests(body):
    assert read_request(body) is None
    assert patch_max_tokens(body, 10) is None


def test_patch_lowers_max_tokens_and_fixes_the_envelope():
    unknown = b"\xf2\x06\x04keep"  # field 110, bytes: a field this schema does not know
    body = make_request(extra=unknown)
    new, old = patch_max_tokens(body, 400)
    assert old == 128000
    frames, end = decode_body(new)
    assert len(frames) == 1 and frames[0].flags == 0 and end.pending == 0
    assert frames[0].wire_length == len(new) - 5
    req = pb.GetChatMessageRequest.FromString(frames[0].payload)
    assert req.configuration.max_tokens == 400
    orig = pb.GetChatMessageRequest.FromString(decode_body(body)[0][0].payload)
    orig.configuration.max_tokens = 400
    assert req == orig  # nothing else changed, unknown field included
    assert unknown in frames[0].payload
    assert read_request(new).max_tokens == 400


def test_patch_only_ever_lowers():
    assert patch_max_tokens(make_request(400), 400) is None
    assert patch_max_tokens(make_request(300), 400) is None
    assert patch_max_tokens(make_request(), 0) is None
    new, old = patch_max_tokens(make_request(None), 50)  # no config at all: set it
    assert old is None and read_request(new).max_tokens == 50
    new, old = patch_max_tokens(make_request(0), 50)  # 0 = unset in proto3
    assert old == 0 and read_request(new).max_tokens == 50
