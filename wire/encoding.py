"""Incremental Content-Encoding decoders, so a compressed stream can still be repaired.

mitmproxy hands a stream callable the raw (still compressed) bytes. The addon drops the
``Content-Encoding`` header and sends identity; these decoders turn each compressed chunk
into the plain bytes available so far, and :meth:`Decoder.flush` returns the rest at EOF.
Memory is bounded by the decompressor's window, not by the body.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable


class Decoder:
    __slots__ = ("_decompress", "_flush", "name")

    def __init__(self, name: str, decompress: Callable[[bytes], bytes], flush: Callable[[], bytes]):
        self.name = name
        self._decompress = decompress
        self._flush = flush

    def decode(self, chunk: bytes) -> bytes:
        return self._decompress(chunk)

    def flush(self) -> bytes:
        return self._flush()


def decoder_for(content_encoding: str) -> Decoder | None:
    """A decoder for the header's value, None for identity; ValueError if unsupported."""
    enc = content_encoding.strip().lower()
    if enc in ("", "identity"):
        return None
    if enc in ("gzip", "x-gzip"):
        z = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        return Decoder(enc, z.decompress, z.flush)
    if enc == "deflate":
        return _deflate()
    if enc == "br":
        import brotli

        b = brotli.Decompressor()
        return Decoder(enc, b.process, lambda: b"")
    if enc == "zstd":
        try:
            from compression import zstd  # type: ignore[import-not-found]  # Python 3.14
        except ImportError:
            from backports import zstd  # type: ignore[no-redef]
        d = zstd.ZstdDecompressor()
        return Decoder(enc, d.decompress, lambda: b"")
    raise ValueError(f"unsupported content-encoding {content_encoding!r}")


def _deflate() -> Decoder:
    """HTTP 'deflate' is zlib-wrapped by the spec and raw deflate in practice: sniff."""
    state: dict[str, zlib._Decompress | None] = {"z": None}
    head = bytearray()

    def decompress(chunk: bytes) -> bytes:
        z = state["z"]
        if z is None:
            head.extend(chunk)
            if len(head) < 2:
                return b""
            zlib_wrapped = (head[0] & 0x0F) == 8 and ((head[0] << 8) | head[1]) % 31 == 0
            z = state["z"] = zlib.decompressobj(zlib.MAX_WBITS if zlib_wrapped else -zlib.MAX_WBITS)
            chunk = bytes(head)
        return z.decompress(chunk)

    def flush() -> bytes:
        z = state["z"]
        if z is None:
            return zlib.decompress(bytes(head), -zlib.MAX_WBITS) if head else b""
        return z.flush()

    return Decoder("deflate", decompress, flush)
