"""Connect-RPC streaming envelopes: an incremental decoder and an encoder.

A Connect streaming body (``application/connect+proto``) is a sequence of envelopes::

    [flags: u8][length: u32 big-endian][payload: length bytes]

``flags`` bit 0x01 = payload is gzip-compressed, bit 0x02 = end-of-stream: the payload is
a JSON trailer (``{}`` on success, ``{"error": {"code", "message"}, "metadata": ...}`` on
failure) and nothing may follow it. CPA's Devin executor accepts exactly 0x00, 0x01, 0x02
and 0x03 and so does :class:`ConnectDecoder`; anything else is a protocol error. A body
that ends without an end-of-stream envelope is a truncated stream.

:class:`ConnectDecoder` is sans-IO: ``feed(chunk)`` returns the envelopes that chunk
completed (chunk boundaries may fall anywhere, also inside the 5-byte header), ``close()``
says how the body ended (:class:`StreamEnd`). It never raises on bad input: a protocol
error is recorded in :attr:`ConnectDecoder.error`, the decoder stops decoding, and
:meth:`close` reports it. Callers that forward the body (the upstream tap) keep forwarding
the original bytes whatever the decoder thinks.

Bounds (defaults as CPA's ``devin_wire.go``): an envelope longer than ``max_frame``
(16 MiB) is an error before any of its payload is buffered; a gzip payload that inflates to
more than ``max_decompressed`` (64 MiB) is an error, checked while inflating.

Cost: every input byte is copied once into the buffer and once into its payload; consumed
envelopes are dropped from the buffer once per ``feed``, so n bytes in any chunking cost
O(n). Memory: at most one incomplete envelope plus the chunk being fed.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = [
    "FLAG_COMPRESSED",
    "FLAG_END_STREAM",
    "MAX_DECOMPRESSED",
    "MAX_FRAME",
    "ConnectDecoder",
    "Frame",
    "StreamEnd",
    "Trailer",
    "decode_body",
    "encode_end_stream",
    "encode_frame",
    "parse_trailer",
]

FLAG_COMPRESSED = 0x01
FLAG_END_STREAM = 0x02
_KNOWN_FLAGS = (0x00, 0x01, 0x02, 0x03)

MAX_FRAME = 16 << 20
"""Largest envelope payload accepted on the wire (CPA: 16 MiB)."""
MAX_DECOMPRESSED = 64 << 20
"""Largest payload a gzip envelope may inflate to (CPA: 64 MiB)."""

_HEADER = struct.Struct(">BI")


@dataclass(frozen=True, slots=True)
class Trailer:
    """The end-of-stream envelope's JSON, as far as anyone acts on it."""

    error_code: str | None = None
    """Connect error code (``resource_exhausted``, ``internal``, ...) or None on success."""
    error_message: str | None = None
    metadata: dict[str, Any] | None = None
    malformed: bool = False
    """The payload was not a JSON object; Connect clients treat that as an error."""

    @property
    def ok(self) -> bool:
        return self.error_code is None and not self.malformed


@dataclass(frozen=True, slots=True)
class Frame:
    """One envelope. ``payload`` is already gunzipped for flag 0x01/0x03."""

    flags: int
    payload: bytes
    wire_length: int
    """The length field on the wire (the compressed size for gzip envelopes)."""
    offset: int
    """Byte offset of the envelope's first header byte in the body."""

    @property
    def compressed(self) -> bool:
        return bool(self.flags & FLAG_COMPRESSED)

    @property
    def end_stream(self) -> bool:
        return bool(self.flags & FLAG_END_STREAM)

    def trailer(self) -> Trailer:
        """The end-of-stream payload parsed (only meaningful when :attr:`end_stream`)."""
        return parse_trailer(self.payload)


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """How a Connect body ended, from :meth:`ConnectDecoder.close`."""

    trailer: Trailer | None
    """The end-of-stream trailer, or None if the body had none."""
    error: str | None
    """A protocol error (bad flags, oversized envelope, bad gzip, bytes after the
    end-of-stream envelope) or ``truncated: ...`` when the body just stopped."""
    frames: int
    """Envelopes decoded (including the end-of-stream one)."""
    pending: int = 0
    """Bytes of an incomplete envelope the body ended in (0 when it ended on a boundary)."""

    @property
    def truncated(self) -> bool:
        """The body ended without an end-of-stream envelope (and with no other error)."""
        return self.trailer is None and self.error is not None and self.error.startswith("truncated")

    @property
    def ok(self) -> bool:
        """A clean end: an end-of-stream envelope whose trailer carries no error."""
        return self.error is None and self.trailer is not None and self.trailer.ok


def parse_trailer(payload: bytes) -> Trailer:
    """Parse an end-of-stream JSON payload; never raises."""
    try:
        obj = orjson.loads(payload) if payload.strip() else {}
    except orjson.JSONDecodeError:
        return Trailer(error_code="unknown", malformed=True)
    if not isinstance(obj, dict):
        return Trailer(error_code="unknown", malformed=True)
    md = obj.get("metadata")
    metadata = md if isinstance(md, dict) else None
    err = obj.get("error")
    if err is None:
        return Trailer(metadata=metadata)
    if not isinstance(err, dict):
        return Trailer(error_code="unknown", metadata=metadata, malformed=True)
    code = err.get("code")
    msg = err.get("message")
    return Trailer(
        error_code=code if isinstance(code, str) and code else "unknown",
        error_message=msg if isinstance(msg, str) else None,
        metadata=metadata,
    )


class ConnectDecoder:
    """Bytes in, complete :class:`Frame` objects out; see the module docstring."""

    __slots__ = ("_buf", "_eos", "_pos", "error", "frames", "max_decompressed", "max_frame", "trailer")

    def __init__(self, max_frame: int = MAX_FRAME, max_decompressed: int = MAX_DECOMPRESSED) -> None:
        if max_frame <= 0 or max_decompressed <= 0:
            raise ValueError("bounds must be positive")
        self.max_frame = max_frame
        self.max_decompressed = max_decompressed
        self._buf = bytearray()
        self._pos = 0
        """Body offset of ``_buf[0]``."""
        self.error: str | None = None
        self.trailer: Trailer | None = None
        self.frames = 0
        self._eos = False

    @property
    def ended(self) -> bool:
        """The end-of-stream envelope has been decoded."""
        return self._eos

    def feed(self, chunk: bytes) -> list[Frame]:
        if not chunk or self.error is not None:
            return []
        buf = self._buf
        if self._eos:
            self._fail(f"{len(chunk)} bytes after the end-of-stream envelope")
            return []
        buf += chunk
        out: list[Frame] = []
        start = 0
        n = len(buf)
        while n - start >= 5:
            flags, length = _HEADER.unpack_from(buf, start)
            if flags not in _KNOWN_FLAGS:
                self._fail(f"unknown envelope flags 0x{flags:02x} at offset {self._pos + start}")
                break
            if length > self.max_frame:
                self._fail(f"envelope of {length} bytes exceeds the {self.max_frame}-byte limit")
                break
            if n - start - 5 < length:
                break
            payload = bytes(buf[start + 5 : start + 5 + length])
            if flags & FLAG_COMPRESSED:
                try:
                    payload = self._gunzip(payload)
                except ValueError as e:
                    self._fail(str(e))
                    break
            frame = Frame(flags, payload, length, self._pos + start)
            start += 5 + length
            self.frames += 1
            out.append(frame)
            if flags & FLAG_END_STREAM:
                self._eos = True
                self.trailer = parse_trailer(payload)
                if start < n:
                    self._fail(f"{n - start} bytes after the end-of-stream envelope")
                break
        if start:
            del buf[:start]
            self._pos += start
        return out

    def _gunzip(self, data: bytes) -> bytes:
        """Inflate one envelope (several concatenated gzip members allowed, as Go's
        gzip reader does), stopping as soon as the output passes the bound."""
        limit = self.max_decompressed
        parts: list[bytes] = []
        size = 0
        while True:
            d = zlib.decompressobj(wbits=31)
            try:
                out = d.decompress(data, limit - size + 1)
            except zlib.error as e:
                raise ValueError(f"bad gzip envelope: {e}") from None
            size += len(out)
            if size > limit:
                raise ValueError(f"gzip envelope inflates past the {limit}-byte limit")
            parts.append(out)
            if not d.eof:
                raise ValueError("bad gzip envelope: truncated gzip stream")
            data = d.unused_data
            if not data:
                return b"".join(parts)

    def _fail(self, why: str) -> None:
        self.error = why
        self._buf = bytearray()

    def close(self) -> StreamEnd:
        """The body is over: report the trailer, or why there is none."""
        error = self.error
        if error is None and not self._eos:
            pending = len(self._buf)
            error = "truncated: body ended without an end-of-stream envelope" + (
                f" ({pending} bytes of an incomplete envelope)" if pending else ""
            )
        pending = len(self._buf)
        self._buf = bytearray()
        return StreamEnd(self.trailer, error, self.frames, pending)


def decode_body(body: bytes, **bounds: int) -> tuple[list[Frame], StreamEnd]:
    """A whole buffered body: all envelopes and how it ended."""
    d = ConnectDecoder(**bounds)
    frames = d.feed(body)
    return frames, d.close()


def encode_frame(payload: bytes, *, compress: bool = False, end_stream: bool = False) -> bytes:
    """One envelope. With ``compress`` the payload is gzipped (mtime 0, reproducible)."""
    flags = 0
    if compress:
        c = zlib.compressobj(wbits=31)
        payload = c.compress(payload) + c.flush()
        flags |= FLAG_COMPRESSED
    if end_stream:
        flags |= FLAG_END_STREAM
    if len(payload) > 0xFFFFFFFF:
        raise ValueError("payload too large for a Connect envelope")
    return _HEADER.pack(flags, len(payload)) + payload


def encode_end_stream(
    error_code: str | None = None,
    error_message: str | None = None,
    metadata: dict[str, Any] | None = None,
    *,
    compress: bool = False,
) -> bytes:
    """The end-of-stream envelope: ``{}``, or ``{"error": {...}}`` when ``error_code``."""
    obj: dict[str, Any] = {}
    if error_code is not None:
        err: dict[str, Any] = {"code": error_code}
        if error_message is not None:
            err["message"] = error_message
        obj["error"] = err
    if metadata:
        obj["metadata"] = metadata
    return encode_frame(orjson.dumps(obj), compress=compress, end_stream=True)
