"""Secrets out of what is stored and shown (sans-IO): headers, query values, Devin's token.

What counts as a secret:

* request headers ``authorization``, ``proxy-authorization``, ``x-api-key``,
  ``x-goog-api-key``, ``cookie``, and the response header ``set-cookie``;
* query values ``key``, ``api_key``, ``apikey``, ``auth_token``, ``access_token``
  (Gemini clients send ``?key=``);
* inside Devin's GetChatMessageRequest body (one Connect envelope), ``metadata.api_key``
  (field 1.3, the session token: ``wire/devin.proto``). CPA also sends that token in the
  upstream request's ``Authorization: Basic <t>-<t>`` header, covered above.

A redacted value keeps what is useful and no secret: the scheme of an ``Authorization``
header and a short id of the secret, ``Bearer <redacted:3f2a9c1b0d4e>``. The id is
:func:`key_id`, the same one the turn log uses for a client key, so a saved flow can be
matched to its turn log line without either holding the key.

Redacting is idempotent (a placeholder is never redacted again) and leaves every other
byte of a header, a query or a body as it was.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable

from google.protobuf.message import DecodeError

from . import devin_pb2 as pb
from .connect import decode_body, encode_frame

__all__ = [
    "QUERY_KEYS",
    "REQUEST_HEADERS",
    "RESPONSE_HEADERS",
    "client_key",
    "is_redacted",
    "key_id",
    "key_label",
    "placeholder",
    "redact_devin_request",
    "redact_header",
    "redact_query",
]

REQUEST_HEADERS = ("authorization", "proxy-authorization", "x-api-key", "x-goog-api-key", "cookie")
RESPONSE_HEADERS = ("set-cookie",)
QUERY_KEYS = frozenset({"key", "api_key", "apikey", "auth_token", "access_token"})
_PLACEHOLDER = re.compile(r"<redacted(?::([0-9a-f]{12}))?>")
_SCHEMES = ("bearer", "basic", "token", "digest")


def key_id(secret: str) -> str:
    """A stable short id of a secret (12 hex digits of its SHA-256): enough to tell keys
    apart in a log, useless to recover a random API key."""
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()[:12]


def placeholder(secret: str) -> str:
    return f"<redacted:{key_id(secret)}>" if secret else "<redacted>"


def is_redacted(value: str) -> bool:
    """Is ``value`` (a header value, a query value) already a placeholder?"""
    return _PLACEHOLDER.search(value) is not None


def _split_scheme(value: str) -> tuple[str, str]:
    """``("Bearer ", "sk-...")`` for a credential with a known auth scheme, else ``("", value)``."""
    scheme, sep, rest = value.partition(" ")
    if sep and scheme.lower() in _SCHEMES:
        return scheme + " ", rest.strip()
    return "", value.strip()


def redact_header(name: str, value: str) -> str:
    """The stored form of one secret header's value (the scheme kept, the credential
    replaced by a placeholder). Already redacted values come back unchanged."""
    if is_redacted(value):
        return value
    if name.lower() in ("authorization", "proxy-authorization"):
        scheme, cred = _split_scheme(value)
        return scheme + placeholder(cred)
    return placeholder(value.strip())


def redact_query(path: str) -> str:
    """``path`` with the values of secret query parameters replaced (other bytes kept)."""
    base, sep, query = path.partition("?")
    if not sep or not query:
        return path
    query, hsep, fragment = query.partition("#")
    parts = query.split("&")
    changed = False
    for i, part in enumerate(parts):
        name, eq, value = part.partition("=")
        if eq and name.lower() in QUERY_KEYS and value and not is_redacted(_unquote(value)):
            parts[i] = f"{name}={placeholder(_unquote(value))}"
            changed = True
    if not changed:
        return path
    return base + "?" + "&".join(parts) + (hsep + fragment)


def _unquote(value: str) -> str:
    from urllib.parse import unquote_plus

    return unquote_plus(value)


def query_secret(path: str) -> str | None:
    """The first secret query value of ``path`` (the client's key when it rides in
    ``?key=``), or None."""
    _, sep, query = path.partition("?")
    for part in query.partition("#")[0].split("&") if sep else ():
        name, eq, value = part.partition("=")
        if eq and name.lower() in QUERY_KEYS and value:
            return _unquote(value)
    return None


def redact_devin_request(body: bytes) -> bytes | None:
    """A GetChatMessageRequest body (one uncompressed envelope) with ``metadata.api_key``
    replaced by a placeholder, re-encoded with its new length; None when there is
    nothing to redact (not such a body, no token, already redacted)."""
    frames, end = decode_body(body)
    if len(frames) != 1 or frames[0].end_stream or not end.truncated or end.pending:
        return None
    try:
        req = pb.GetChatMessageRequest.FromString(frames[0].payload)
    except DecodeError:
        return None
    if not req.HasField("metadata") or not req.metadata.api_key or is_redacted(req.metadata.api_key):
        return None
    req.metadata.api_key = placeholder(req.metadata.api_key)
    return encode_frame(req.SerializeToString())


def client_key(header: Callable[[str], str | None], path: str = "") -> str | None:
    """The credential a client authenticated with: the ``Authorization`` credential (its
    scheme dropped), else ``x-api-key``, ``x-goog-api-key``, a ``?key=`` query value; None
    without one. ``header(name)`` returns a request header's value or None."""
    for name in ("authorization", "x-api-key", "x-goog-api-key"):
        v = header(name)
        if v:
            return _split_scheme(v)[1] if name == "authorization" else v.strip()
    return query_secret(path)


def key_label(key: str | None, labels: Iterable[tuple[str, str]] = ()) -> str:
    """What the turn log writes for a client key: the label of the first ``(pattern, name)``
    that matches, else the key's :func:`key_id`; ``"-"`` without a key.

    A pattern is a key id (12 hex digits) or a key prefix ending in ``*`` (``sk-team-a*``).
    A key that is already a placeholder (a redacted flow read back) is matched by its id.
    """
    if not key:
        return "-"
    m = _PLACEHOLDER.fullmatch(_split_scheme(key)[1])
    kid = m.group(1) if m else key_id(key)
    for pattern, name in labels:
        if pattern.endswith("*"):
            if not m and key.startswith(pattern[:-1]):
                return name
        elif kid is not None and pattern.lower() == kid:
            return name
    return kid or "-"
