"""Fuzz targets over the upstream leg's provider decoders (wire/upstream_decoders.py), with
atheris (libFuzzer) and, through tests/wire/test_upstream_decoders.py, hypothesis.

    python tests/support/fuzz_upstream.py [-max_total_time=600] [corpus dir]

The first byte of an input picks a provider and a framing (SSE or JSON); the rest is either
garbage as it is, or a documented sample of that provider (tests/wire/test_upstream_decoders.py's
``SAMPLES``) mutated by the input (bytes overwritten, cut short, doubled) and cut into
chunks (and a read built for wire/fastread.py's one-delta read, its C twin held to its
definition: :func:`target_fastread`). What must hold, failing open: ``feed`` and ``close`` never raise, the decoder
never claims a finish the bytes do not hold (a result is always well formed), and any
chunking of the same bytes gives the same result as one chunk. The decoder never sees the
bytes it is not given back: the caller forwards them unchanged (the addon's stream
returns each chunk as the same object; tests/wire/test_upstream_decoders.py checks that).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for p in (HERE.parents[1], HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

if __name__ == "__main__":  # coverage for libFuzzer: the decoders only
    import atheris

    with atheris.instrument_imports(
        include=["streamfix.wire.upstream_decoders", "streamfix.wire.upstream_call", "streamfix.wire.fastread"]
    ):
        import streamfix.wire.upstream_decoders  # noqa: F401

from streamfix.wire.upstream_call import CallResult
from streamfix.wire.upstream_decoders import decoder_for

MAX_BODY = 1 << 16
"""A mutated body grows no further than this (bytes)."""
PROVIDERS = ("gemini", "interactions", "anthropic", "openai_chat", "responses")
CTYPES = ("text/event-stream", "application/json")


def _samples() -> dict[tuple[str, str], list[bytes]]:
    from upstream_samples import SAMPLES

    out: dict[tuple[str, str], list[bytes]] = {}
    for (provider, framing, _name), body in SAMPLES.items():
        out.setdefault((provider, framing), []).append(body)
    return out


_POOL = _samples()


def decode(provider: str, ctype: str, pieces: list[bytes], cut: bool = False) -> CallResult:
    d = decoder_for(provider, ctype)
    assert d is not None
    for p in pieces:
        d.feed(p)
    r = d.close(cut=cut)
    assert d.close(cut=cut) == r, "close() is idempotent"
    return r


def _body(data: bytes) -> tuple[str, str, bytes, list[int]]:
    """(provider, content type, body, cut points) drawn from ``data``."""
    head = data[0] if data else 0
    provider = PROVIDERS[head % len(PROVIDERS)]
    framing = "sse" if (head // len(PROVIDERS)) % 2 == 0 else "json"
    ctype = CTYPES[0] if framing == "sse" else CTYPES[1]
    rest = data[1:]
    pool = _POOL.get((provider, framing), [])
    if pool and rest[:1] and rest[0] & 1:
        body = bytearray(pool[rest[0] % len(pool)])
        ops = rest[1:]
        for i in range(0, len(ops) - 2, 3):  # (position, byte, how) triples
            pos = (ops[i] * 256 + ops[i + 1]) % (len(body) + 1)
            how = ops[i + 2] % 4
            if how == 0 and pos < len(body):
                body[pos] = ops[i + 1]
            elif how == 1:
                del body[pos:]
            elif how == 2:
                body[pos:pos] = bytes([ops[i]])
            elif len(body) < MAX_BODY:  # a repeated tail doubles the body: bounded, or 23 ops take 2 GB
                body += body[pos:]
        cuts = [b for b in rest[1:9]]
        return provider, ctype, bytes(body), cuts
    return provider, ctype, rest, list(rest[:8])


LAYOUTS = (
    (b'data: {"type":"response.output_text.delta","sequence_number":', (b',"delta":"',), b'"}\n\n'),
    (b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"', (), b'"}}]}\n\n'),
    (b'data: {"a":', (b',"b":', b',"s":"'), b'","z":[]}\n\n'),
)
"""Delta layouts for :func:`target_fastread` (first piece, pieces after the integer holes, last)."""


def target_fastread(data: bytes) -> None:
    """wire/fastread.py's read and its C twin (the compiled core) on a read built from
    ``data``: a layout, its digits and a string's raw bytes from the rest, the read cut or
    grown; the twin answers the definition's bytes or leaves the read to it, never raises."""
    from streamfix.wire import fastread

    if not data:
        return
    first, mids, last = LAYOUTS[data[0] % len(LAYOUTS)]
    rest = data[1:]
    parts = [first]
    for mid in mids:
        k = rest.find(b",")
        digits, rest = (rest[:k], rest[k + 1 :]) if k >= 0 else (b"7", rest)
        parts += [digits, mid]
    read = b"".join(parts) + rest + last
    for chunk in (read, read[: len(read) // 2], read + read[:7]):
        want = fastread.read(chunk, first, mids, last)
        assert fastread.event_string(chunk, first, mids, last) == want
        if fastread.native():
            from streamfix.wire import _fastread  # type: ignore[attr-defined]

            got = _fastread.event_string(chunk, first, mids, last)
            assert got is False or got == want, (chunk, got, want)


def target_decoder(data: bytes) -> None:
    target_fastread(data)
    provider, ctype, body, cuts = _body(data)
    whole = decode(provider, ctype, [body])
    points = sorted({c * len(body) // 256 for c in cuts})
    pieces = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    assert decode(provider, ctype, pieces) == whole, "any chunking gives the same result"
    assert whole.ended in ("finish", "no_finish", "cut")
    assert (whole.finish is None) == (whole.says is None) or whole.finish is not None
    assert whole.outcome in ("complete", "max_tokens", "content_filter", "failed", "unknown")
    whole.detail()  # never raises


def main() -> None:
    import atheris

    atheris.Setup(sys.argv, target_decoder)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
