"""mitmweb / mitmproxy content view "Connect frames": one block per Connect envelope.

    mitmweb ... -s addons/views.py

mitmproxy's built-in views do not fit Connect streams: ``application/connect+proto``
falls to "Hex Dump", and the gRPC view stops at the end-of-stream envelope (flag 0x02,
JSON). This view splits the body into envelopes (gunzipping 0x01/0x03), decodes Devin's
GetChatMessage request and response payloads with ``wire/devin.proto`` (field names,
StopReason by name, unknown fields listed by number), and prints the trailer JSON. Other
Connect payloads go to mitmproxy's schema-less protobuf view. The session token in the
request's client metadata is never shown.

Streamed flows have no body unless someone stores it; ``addons/upstream.py`` puts the
Devin response body back on the flow at its end.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
from google.protobuf import unknown_fields
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message
from mitmproxy import contentviews, http
from mitmproxy.contentviews import Contentview, Metadata

_ROOT = Path(__file__).resolve().parent.parent
if (_ROOT / "streamfix" / "__init__.py").is_file() and str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))  # -s from a checkout that is not pip-installed (installed: nothing to add)

from streamfix.wire import devin_pb2 as pb
from streamfix.wire.connect import ConnectDecoder
from streamfix.wire.devin import CHAT_PATH

_SECRET = {("streamfix.devin.ClientMetadata", "api_key")}
_WIRE_TYPES = {0: "varint", 1: "fixed64", 2: "bytes", 3: "group", 5: "fixed32"}


def _scalar(fd: FieldDescriptor, value) -> str:
    if fd.type == FieldDescriptor.TYPE_ENUM:
        ev = fd.enum_type.values_by_number.get(value)
        if ev is None:
            return f"{value} (unknown)"
        name = ev.name
        prefix = "STOP_REASON_" if fd.enum_type.name == "StopReason" else "CHAT_MESSAGE_SOURCE_"
        return f"{name.removeprefix(prefix)} ({value})"
    if isinstance(value, bytes):
        try:
            return orjson.dumps(value.decode("utf-8")).decode()
        except UnicodeDecodeError:
            return f"0x{value.hex()}  # not UTF-8"
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def render_message(msg: Message, indent: str = "") -> list[str]:
    """YAML-ish lines: set fields by name, nested messages indented, unknown fields last."""
    lines: list[str] = []
    full = msg.DESCRIPTOR.full_name
    for fd, value in msg.ListFields():
        key = f"{indent}{fd.name}"
        if (full, fd.name) in _SECRET:
            lines.append(f"{key}: <redacted, {len(value)} chars>")
            continue
        repeated = fd.is_repeated
        items = list(value) if repeated else [value]
        if fd.type == FieldDescriptor.TYPE_MESSAGE:
            lines.append(f"{key}:")
            for item in items:
                if not repeated:
                    lines += render_message(item, indent + "  ")
                    continue
                sub = render_message(item, indent + "    ") or [f"{indent}    {{}}"]
                lines.append(f"{indent}  - {sub[0][len(indent) + 4 :]}")
                lines += sub[1:]
        elif repeated:
            lines.append(f"{key}: [{', '.join(_scalar(fd, v) for v in items)}]")
        else:
            lines.append(f"{key}: {_scalar(fd, value)}")
    for uf in unknown_fields.UnknownFieldSet(msg):
        data = uf.data
        shown = f"0x{data.hex()}" if isinstance(data, bytes) else str(data)
        if isinstance(data, bytes) and len(data) > 64:
            shown = f"0x{data[:64].hex()}... ({len(data)} bytes)"
        lines.append(
            f"{indent}# unknown field {uf.field_number} ({_WIRE_TYPES.get(uf.wire_type, uf.wire_type)}): {shown}"
        )
    return lines


def _message_type(metadata: Metadata) -> type[Message] | None:
    flow = metadata.flow
    if not isinstance(flow, http.HTTPFlow) or flow.request.path.split("?", 1)[0] != CHAT_PATH:
        return None
    if isinstance(metadata.http_message, http.Request):
        return pb.GetChatMessageRequest
    return pb.GetChatMessageResponse


class ConnectFramesContentview(Contentview):
    """Connect streaming envelopes, Devin's GetChatMessage decoded with its schema."""

    name = "Connect frames"
    syntax_highlight = "yaml"

    def prettify(self, data: bytes, metadata: Metadata) -> str:
        decoder = ConnectDecoder()
        frames = decoder.feed(data)
        end = decoder.close()
        mtype = _message_type(metadata)
        out: list[str] = []
        for i, f in enumerate(frames):
            kind = "end-of-stream" if f.end_stream else "message"
            gz = f", gzip {f.wire_length} -> {len(f.payload)} bytes" if f.compressed else ""
            out.append(f"# frame {i}: {kind} flags=0x{f.flags:02x} len={f.wire_length}{gz}")
            if f.end_stream:
                try:
                    obj = orjson.loads(f.payload) if f.payload.strip() else {}
                    out.append("trailer: " + orjson.dumps(obj).decode())
                except orjson.JSONDecodeError:
                    out.append(f"trailer (not JSON): {f.payload[:200]!r}")
                t = f.trailer()
                if not t.ok:
                    out.append(f"# stream failed: {t.error_code}" + (f": {t.error_message}" if t.error_message else ""))
                continue
            out += self._payload(f.payload, mtype, metadata)
        request_body = isinstance(metadata.http_message, http.Request) and end.truncated and not end.pending
        if end.error is not None and not request_body:  # a request has no end-of-stream envelope
            out.append(f"# {end.error}")
        return "\n".join(out) + "\n"

    def _payload(self, payload: bytes, mtype: type[Message] | None, metadata: Metadata) -> list[str]:
        if mtype is not None:
            try:
                return render_message(mtype.FromString(payload)) or ["(empty message)"]
            except DecodeError as e:
                return [f"# not a {mtype.DESCRIPTOR.name}: {e}", f"0x{payload.hex()}"]
        try:
            text = contentviews.registry["protobuf"].prettify(payload, metadata).rstrip()
            return [text or "(empty message)"]
        except Exception:  # noqa: BLE001 - a payload that does not decode is shown as hex
            return [f"0x{payload.hex()}"]

    def render_priority(self, data: bytes, metadata: Metadata) -> float:
        ct = (metadata.content_type or "").lower()
        return 2 if ct.startswith("application/connect+proto") else -1


contentviews.add(ConnectFramesContentview)
