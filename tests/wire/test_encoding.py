"""wire/encoding.py: incremental Content-Encoding decoders."""

import gzip
import zlib

import brotli
import pytest
from streamfix.wire.encoding import decoder_for

PLAIN = b"".join(b'data: {"i":%d,"pad":"%s"}\n\n' % (i, b"x" * (i % 50)) for i in range(300))


def chunks(data, n):
    return [data[i : i + n] for i in range(0, len(data), n)]


def raw_deflate(data):
    c = zlib.compressobj(wbits=-15)
    return c.compress(data) + c.flush()


@pytest.mark.parametrize(
    "name,encoded",
    [
        ("gzip", gzip.compress(PLAIN)),
        ("deflate", zlib.compress(PLAIN)),
        ("deflate", raw_deflate(PLAIN)),
        ("br", brotli.compress(PLAIN)),
    ],
)
@pytest.mark.parametrize("size", [1, 7, 4096])
def test_decodes_in_any_chunking(name, encoded, size):
    d = decoder_for(name)
    out = b"".join(d.decode(c) for c in chunks(encoded, size)) + d.flush()
    assert out == PLAIN


def test_zstd():
    try:
        from compression import zstd
    except ImportError:
        from backports import zstd
    d = decoder_for("zstd")
    enc = zstd.compress(PLAIN)
    assert b"".join(d.decode(c) for c in chunks(enc, 13)) + d.flush() == PLAIN


def test_identity_and_unknown():
    assert decoder_for("") is None and decoder_for("identity") is None
    with pytest.raises(ValueError, match="unsupported"):
        decoder_for("compress")
