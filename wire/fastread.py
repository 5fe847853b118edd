"""One delta event read whole, off its raw bytes: the UTF-8 of its one string (sans-IO).

The upstream decoders' usual read is one delta event in a learned layout (wire/skim.py)
whose one string hole is its last, integer holes before it: the ``first`` piece, per
integer hole its canonical digits (``0``, or 1 to 18 digits without a leading zero) and
the piece after them (``mids``), the string, the ``last`` piece, and the read ends there.
:func:`event_string` reads such a read: the string's UTF-8 as orjson (the full path's
decoder) decodes it, or None when the read is not that event or its string does not
decode (the caller then reads the read its whole way, which fails on such a string as
the full path does).

The compiled core also builds ``_fastread.c``: the same read in C, one pass over the
bytes (no slice, no parse, no str made), for the usual case only: an event it matches
whose string holds no raw quote or control byte, only JSON's escapes (a surrogate escape
only in a valid pair), and valid UTF-8. Anything else, it leaves to :func:`read`, the
definition (this module's Python, compiled with mypyc), whose answer is then the answer:
the C twin never decides a read that the definition would decide otherwise, and never
refuses one (tests/wire/test_fastread.py holds the two to the same results). The pure
build has no C twin: :func:`read` reads every read.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

try:  # the C twin, built with the compiled core only (wire/_core.py)
    from ._fastread import event_string as _c_event_string  # type: ignore[import-not-found,unused-ignore]
except ImportError:
    _c_event_string = None

_C: Final[Any] = _c_event_string
"""The C twin's function, or None (the pure build, or a build without it)."""
_loads: Final = orjson.loads
_ASCII: Final = bytes((c + 1) if c < 32 or c == 34 or c == 92 else 0 if c >= 128 else c for c in range(256))
"""A span this table leaves as it was is ASCII without a control byte, quote or
backslash: its bytes are its UTF-8 as they are."""
_SPECIAL: Final = bytes((c + 1) if c < 32 or c == 34 or c == 92 else c for c in range(256))
"""A span this table leaves as it was holds no control byte, quote or backslash (its
bytes are its UTF-8 if they are valid UTF-8)."""

__all__ = ["event_string", "native", "read"]


def native() -> bool:
    """The C twin is loaded (the compiled core with it)."""
    return _C is not None


def event_string(chunk: bytes, first: bytes, mids: tuple[bytes, ...], last: bytes) -> bytes | None:
    """The UTF-8 of the string of the one event ``chunk`` is, in the layout ``first``,
    ``mids``, ``last`` (the module docstring); None when it is not, or the string fails
    to decode. The C twin answers first where it is loaded; :func:`read` where it does
    not decide."""
    if _C is not None:
        got = _C(chunk, first, mids, last)
        if got is not False:  # False: not decided there
            return got  # type: ignore[no-any-return]
    return read(chunk, first, mids, last)


def read(chunk: bytes, first: bytes, mids: tuple[bytes, ...], last: bytes) -> bytes | None:
    """:func:`event_string`'s definition: the layout's steps (``wire.skim.Layout.match``'s,
    for this shape), then the string as the upstream decoders' ``_string`` reads it (its
    bytes when they hold no control byte, quote or backslash and are valid UTF-8, else
    orjson's decoding of it with its quotes, which must be one string)."""
    if not chunk.startswith(first):
        return None
    n = len(chunk)
    i = len(first)
    for mid in mids:
        j = i
        while j < n and 48 <= chunk[j] <= 57:
            j += 1
        if j == i or j - i > 18 or (chunk[i] == 48 and j - i > 1):
            return None
        e = j + len(mid)
        if chunk[j:e] != mid:
            return None
        i = e
    stop = n - len(last)
    if stop < i or not chunk.endswith(last):
        return None
    span = chunk[i:stop]
    if span.translate(_ASCII) == span:
        return span
    try:
        if 92 not in span and span.translate(_SPECIAL) == span:
            span.decode("utf-8")  # strict: what orjson rejects as UTF-8 raises
            return span
        value = _loads(chunk[i - 1 : stop + 1])
    except ValueError:
        return None
    if type(value) is not str:  # e.g. '"a", "b"' cut as one string: not the layout after all
        return None
    try:
        return value.encode()
    except UnicodeEncodeError:  # (orjson never makes a lone surrogate)
        return value.encode("utf-8", "surrogatepass")
