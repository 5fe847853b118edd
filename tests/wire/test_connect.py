"""wire/connect.py: Connect envelope decoding under any chunking, bounds, trailers."""

from __future__ import annotations

import gzip
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from samples import SAMPLE
from streamfix.wire.connect import (
    ConnectDecoder,
    decode_body,
    encode_end_stream,
    encode_frame,
    parse_trailer,
)

# the sample's F4 gzip variant (flag 0x01, 40 gzip bytes)
SAMPLE_GZIP_F4 = bytes.fromhex(
    "01000000281f8b080000000000020393120a2fca2cc9cc4b57c8cc4b49add0cb28c9cd01003bc46bea14000000"
)


def feed_all(dec: ConnectDecoder, chunks: list[bytes]):
    out = []
    for c in chunks:
        out += dec.feed(c)
    return out, dec.close()


def test_sample_body_decodes_to_documented_envelopes():
    frames, end = decode_body(SAMPLE)
    assert len(SAMPLE) == 489
    assert [f.wire_length for f in frames] == [33, 19, 24, 20, 7, 65, 62, 81, 5, 18, 93, 2]
    assert [f.flags for f in frames] == [0] * 11 + [2]
    assert frames[3].payload == b"\x1a\x12Writing index.html"
    assert frames[-1].end_stream and frames[-1].payload == b"{}"
    assert end.ok and not end.truncated and end.error is None and end.frames == 12
    assert frames[1].offset == 5 + 33


def test_sample_gzip_envelope_is_inflated():
    frames, end = decode_body(SAMPLE_GZIP_F4)
    assert len(frames) == 1
    f = frames[0]
    assert f.compressed and f.wire_length == 40
    assert f.payload == b"\x1a\x12Writing index.html"
    assert end.truncated  # no end-of-stream envelope after it


def test_byte_at_a_time_equals_one_chunk():
    one, end1 = decode_body(SAMPLE)
    many, end2 = feed_all(ConnectDecoder(), [SAMPLE[i : i + 1] for i in range(len(SAMPLE))])
    assert many == one and end1 == end2


frame_specs = st.lists(
    st.tuples(st.binary(max_size=300), st.booleans()),  # payload, gzip?
    max_size=12,
)


@st.composite
def bodies_and_cuts(draw):
    specs = draw(frame_specs)
    trailer = draw(st.sampled_from([b"{}", b'{"error":{"code":"internal","message":"boom"}}']))
    gz_trailer = draw(st.booleans())
    body = b"".join(encode_frame(p, compress=z) for p, z in specs)
    body += encode_frame(trailer, compress=gz_trailer, end_stream=True)
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=30)))
    return specs, trailer, body, cuts


@settings(max_examples=300, deadline=None)
@given(bodies_and_cuts())
def test_any_chunking_gives_the_same_frames(case):
    specs, trailer, body, cuts = case
    chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)])]
    frames, end = feed_all(ConnectDecoder(), chunks)
    assert [f.payload for f in frames] == [p for p, _ in specs] + [trailer]
    assert [f.compressed for f in frames[:-1]] == [z for _, z in specs]
    assert frames[-1].end_stream
    assert end.error is None and end.frames == len(specs) + 1
    assert end.trailer == parse_trailer(trailer)
    # offsets point at each envelope's header in the body
    for f in frames:
        assert body[f.offset] == f.flags
        assert struct.unpack(">I", body[f.offset + 1 : f.offset + 5])[0] == f.wire_length


@settings(max_examples=100, deadline=None)
@given(frame_specs, st.data())
def test_a_body_cut_anywhere_is_truncated_not_an_error(specs, data):
    body = b"".join(encode_frame(p, compress=z) for p, z in specs)
    cut = data.draw(st.integers(0, len(body)))
    frames, end = decode_body(body[:cut])
    assert end.truncated and end.trailer is None
    assert end.error.startswith("truncated")
    assert len(frames) <= len(specs)
    assert end.pending == cut - sum(5 + f.wire_length for f in frames)


def test_header_split_inside_the_five_bytes():
    body = encode_frame(b"abc") + encode_end_stream()
    dec = ConnectDecoder()
    assert dec.feed(body[:2]) == []
    assert dec.feed(body[2:4]) == []
    frames = dec.feed(body[4:])
    assert [f.payload for f in frames] == [b"abc", b"{}"]
    assert dec.ended and dec.close().ok


def test_unknown_flags_is_an_error_and_decoding_stops():
    body = encode_frame(b"ok") + b"\x04\x00\x00\x00\x01x" + encode_frame(b"later")
    frames, end = decode_body(body)
    assert [f.payload for f in frames] == [b"ok"]
    assert "unknown envelope flags 0x04" in end.error
    assert not end.truncated and not end.ok


def test_oversized_envelope_is_rejected_from_its_header():
    dec = ConnectDecoder(max_frame=1000)
    assert dec.feed(b"\x00\x00\x00\x03\xe9") == []  # 1001 bytes announced, none sent
    assert "exceeds the 1000-byte limit" in dec.error
    assert dec.feed(b"x" * 2000) == []  # inert after the error
    assert dec.close().error == dec.error


def test_default_bounds_are_cpas():
    dec = ConnectDecoder()
    assert dec.max_frame == 16 << 20 and dec.max_decompressed == 64 << 20
    dec.feed(struct.pack(">BI", 0, (16 << 20) + 1))
    assert "exceeds" in dec.error
    with pytest.raises(ValueError):
        ConnectDecoder(max_frame=0)


def test_decompressed_size_is_bounded():
    bomb = encode_frame(b"\0" * 100_000, compress=True)
    assert len(bomb) < 1000
    frames, end = decode_body(bomb, max_decompressed=10_000)
    assert frames == [] and "inflates past the 10000-byte limit" in end.error
    frames, end = decode_body(bomb, max_decompressed=100_000)
    assert frames[0].payload == b"\0" * 100_000


def test_bad_and_truncated_gzip_are_errors():
    _, end = decode_body(b"\x01\x00\x00\x00\x03abc")
    assert end.error.startswith("bad gzip envelope")
    gz = gzip.compress(b"hello world" * 10)
    _, end = decode_body(struct.pack(">BI", 1, len(gz) - 4) + gz[:-4])
    assert "truncated gzip stream" in end.error


def test_concatenated_gzip_members_are_one_payload():
    gz = gzip.compress(b"ab") + gzip.compress(b"cd")
    frames, _ = decode_body(struct.pack(">BI", 1, len(gz)) + gz)
    assert frames[0].payload == b"abcd"


def test_bytes_after_end_of_stream_are_an_error():
    frames, end = decode_body(encode_end_stream() + encode_frame(b"late"))
    assert len(frames) == 1 and end.trailer.ok
    assert "after the end-of-stream envelope" in end.error and not end.ok
    dec = ConnectDecoder()
    dec.feed(encode_end_stream())
    assert dec.feed(b"x") == [] and "1 bytes after" in dec.error


def test_error_trailer_is_reported():
    body = encode_frame(b"x") + encode_end_stream("resource_exhausted", "high demand")
    frames, end = decode_body(body)
    assert end.trailer.error_code == "resource_exhausted"
    assert end.trailer.error_message == "high demand"
    assert not end.trailer.ok and not end.ok and end.error is None
    assert frames[-1].trailer() == end.trailer


def test_gzipped_trailer_flag_0x03():
    env = encode_end_stream("internal", "boom", compress=True)
    assert env[0] == 0x03
    frames, end = decode_body(env)
    assert frames[0].end_stream and frames[0].compressed
    assert end.trailer.error_code == "internal"


@pytest.mark.parametrize(
    "payload, code, malformed",
    [
        (b"{}", None, False),
        (b"", None, False),
        (b'{"metadata":{"x":["1"]}}', None, False),
        (b'{"error":{"code":"unavailable"}}', "unavailable", False),
        (b'{"error":{}}', "unknown", False),
        (b'{"error":"nope"}', "unknown", True),
        (b"not json", "unknown", True),
        (b"[]", "unknown", True),
    ],
)
def test_parse_trailer(payload, code, malformed):
    t = parse_trailer(payload)
    assert t.error_code == code and t.malformed == malformed
    assert t.ok == (code is None)


def test_encoder_shapes():
    assert encode_frame(b"hi") == b"\x00\x00\x00\x00\x02hi"
    assert encode_end_stream() == b"\x02\x00\x00\x00\x02{}"
    e = encode_end_stream("internal", "m", {"k": ["v"]})
    assert e[5:] == b'{"error":{"code":"internal","message":"m"},"metadata":{"k":["v"]}}'
    z = encode_frame(b"payload", compress=True)
    assert z[0] == 1 and gzip.decompress(z[5:]) == b"payload"
    assert struct.unpack(">I", z[1:5])[0] == len(z) - 5
