"""Devin's GetChatMessage RPC, read on the gateway's upstream leg (sans-IO).

Response side: :class:`DevinTap` is fed the upstream response body chunk by chunk. It never
changes a byte (the caller forwards every chunk as it came); it only reads, through
:class:`wire.connect.ConnectDecoder` and the schema in ``wire/devin.proto``, what the
gateway later throws away or garbles: the turn's StopReason, the usage, the trailer error.
It also hashes the generated text and tool-call arguments exactly as
:meth:`wire.verdict.Verdict.digest` hashes what the client sees, so the client flow this
upstream flow served can be found (:mod:`wire.correlate`).

Request side: :func:`read_request` extracts the output budget (field 8.2) and the prompts;
:func:`patch_max_tokens` rewrites 8.2 and the envelope length, to enforce a client's
``max_output_tokens`` the gateway dropped.

Cost: one protobuf parse per frame; text and arguments are hashed as they pass, not kept
(unless ``keep_text``), so memory is bounded by one frame plus the tool-call list.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from google.protobuf.message import DecodeError

from . import devin_pb2 as pb
from .connect import (
    MAX_DECOMPRESSED,
    MAX_FRAME,
    ConnectDecoder,
    Frame,
    StreamEnd,
    Trailer,
    decode_body,
    encode_frame,
)
from .verdict import Digest, UpstreamUsage

__all__ = [
    "CHAT_PATH",
    "DEFAULT_HOSTS",
    "DevinTap",
    "RequestInfo",
    "TapResult",
    "ToolCall",
    "Usage",
    "outcome_of",
    "patch_max_tokens",
    "read_request",
    "stop_reason_name",
]

CHAT_PATH = "/exa.api_server_pb.ApiServerService/GetChatMessage"
DEFAULT_HOSTS = ("server.codeium.com",)

Outcome = Literal["complete", "max_tokens", "content_filter", "failed"]

_OUTCOMES: dict[int, Outcome] = {
    pb.STOP_REASON_INCOMPLETE: "max_tokens",
    pb.STOP_REASON_MAX_TOKENS: "max_tokens",
    pb.STOP_REASON_CONTENT_FILTER: "content_filter",
    pb.STOP_REASON_STOP_PATTERN: "complete",
    pb.STOP_REASON_FUNCTION_CALL: "complete",
}


def stop_reason_name(value: int) -> str:
    """``3 -> "MAX_TOKENS"``; an unknown value gives ``"UNKNOWN_<n>"``."""
    try:
        return pb.StopReason.Name(value).removeprefix("STOP_REASON_")
    except ValueError:
        return f"UNKNOWN_{value}"


def outcome_of(stop_reason: int) -> Outcome | None:
    """The verdict outcome a StopReason proves, or None when it proves nothing.

    1 INCOMPLETE and 3 MAX_TOKENS -> ``max_tokens`` (what CPA PR #5852 maps to
    ``length``); 11 CONTENT_FILTER -> ``content_filter``; 2 STOP_PATTERN and
    10 FUNCTION_CALL -> ``complete``. Others (0 none seen, 4, 5, 9, 12, 13) -> None, and
    the client-leg heuristics decide.
    """
    return _OUTCOMES.get(stop_reason)


@dataclass(frozen=True, slots=True)
class Usage:
    """Devin's usage, in CPA's terms: ``input = prompt + cache_read``, ``output``, ``cached``.

    From field 7 (``source="field7"``), or, when field 7 is missing or all zero, from the
    "Token Usage" display group of field 28 (``source="field28"``), as CPA falls back.
    ``model`` is field 7.9 (the model Devin really used), also when the counts came from
    field 28.
    """

    prompt_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    model: str = ""
    source: Literal["field7", "field28"] = "field7"

    @property
    def input_tokens(self) -> int:
        return self.prompt_tokens + self.cache_read_tokens

    @property
    def cached_tokens(self) -> int:
        return self.cache_read_tokens

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def empty(self) -> bool:
        return not (self.prompt_tokens or self.output_tokens or self.cache_read_tokens)

    def counts(self) -> UpstreamUsage:
        """What the client leg's usage fill needs (:class:`wire.verdict.UpstreamUsage`)."""
        return UpstreamUsage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cached_tokens=self.cached_tokens,
            total_tokens=self.total_tokens,
            model=self.model,
            source=self.source,
        )


@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    args_len: int = 0
    """Bytes of arguments seen for this call (the arguments themselves are only hashed)."""


@dataclass(frozen=True, slots=True)
class TapResult:
    """What one upstream response said, once it ended (see :meth:`DevinTap.result`)."""

    stop_reason: int
    """The last non-zero StopReason of the stream (0: none seen)."""
    usage: Usage | None
    trailer: Trailer | None
    error: str | None
    """Protocol error or ``truncated: ...``; None for a well-formed stream."""
    digest: tuple[str, int, str, int]
    frames: int
    bad_frames: int
    tool_calls: tuple[ToolCall, ...]
    thinking_len: int

    @property
    def stop_reason_name(self) -> str:
        return stop_reason_name(self.stop_reason)

    @property
    def failed(self) -> bool:
        """Devin said the call failed: an end-of-stream envelope whose trailer carries an
        error (or is not a JSON object, which Connect clients treat as one), or a body
        that ended without that envelope (``truncated: ...``), whatever StopReason came
        before. A protocol error of another kind (bad flags, an envelope over the size
        bound, bad gzip) or the tap's own failure proves nothing of the call."""
        if self.trailer is not None:
            return not self.trailer.ok
        return self.error is not None and self.error.startswith("truncated")

    @property
    def outcome(self) -> Outcome | None:
        """The verdict outcome: ``failed`` (see :attr:`failed`); None when the StopReason
        proves nothing, the stream has not ended, or it could not be read to its end."""
        if self.failed:
            return "failed"
        if self.error is not None or self.trailer is None:
            return None
        return outcome_of(self.stop_reason)

    def counts(self) -> UpstreamUsage | None:
        """The usage for the verdict (:meth:`wire.verdict.Verdict.upstream_usage`)."""
        return self.usage.counts() if self.usage is not None else None

    def detail(self) -> str:
        """For a receipt: ``Devin StopReason 3 MAX_TOKENS`` (no content, ever)."""
        s = f"Devin StopReason {self.stop_reason} {self.stop_reason_name}"
        if self.trailer is not None and not self.trailer.ok:
            s += f", trailer error {self.trailer.error_code}"
        elif self.error is not None:
            s += f", {self.error.split(':', 1)[0]}"
        return s


class DevinTap:
    """Reads a GetChatMessage response stream; see the module docstring.

    ``feed(chunk)`` for every upstream read, ``close()`` at the end of the body. Both
    swallow every error (recorded in :attr:`error` / ``bad_frames``): a tap never breaks
    the stream it watches. :attr:`ended` turns True the moment the end-of-stream envelope
    has been read, which is before the gateway can finish its client's response.
    """

    def __init__(
        self,
        max_frame: int = MAX_FRAME,
        max_decompressed: int = MAX_DECOMPRESSED,
        keep_text: bool = False,
    ) -> None:
        self.decoder = ConnectDecoder(max_frame, max_decompressed)
        self.stop_reason = 0
        self.usage7: Usage | None = None
        """The last field 7 seen."""
        self.usage28: Usage | None = None
        """The first "Token Usage" group of field 28 seen (CPA's fallback)."""
        self.tool_calls: list[ToolCall] = []
        self.thinking_len = 0
        self.bad_frames = 0
        self.error: str | None = None
        self.end: StreamEnd | None = None
        self.keep_text = keep_text
        self.text = bytearray() if keep_text else None
        self.args = bytearray() if keep_text else None
        self.thinking = bytearray() if keep_text else None
        self._text = Digest()
        self._args = Digest()

    @property
    def ended(self) -> bool:
        return self.decoder.ended

    @property
    def trailer(self) -> Trailer | None:
        return self.decoder.trailer

    def feed(self, chunk: bytes) -> None:
        try:
            for frame in self.decoder.feed(chunk):
                if not frame.end_stream:
                    self._frame(frame)
        except Exception as e:  # noqa: BLE001 - never let the tap break the stream it reads
            self.error = self.error or f"tap failed: {type(e).__name__}"
        if self.decoder.error is not None and self.error is None:
            self.error = self.decoder.error

    def _frame(self, frame: Frame) -> None:
        try:
            m = pb.GetChatMessageResponse.FromString(frame.payload)
        except DecodeError:
            self.bad_frames += 1
            return
        if m.stop_reason:
            self.stop_reason = m.stop_reason
        if m.thinking:
            self.thinking_len += len(m.thinking)
            if self.thinking is not None:
                self.thinking += m.thinking
        if m.text:
            self._text.add(m.text)
            if self.text is not None:
                self.text += m.text
        for tc in m.tool_calls:
            calls = self.tool_calls
            tid = tc.id.decode("utf-8", "replace")
            if not calls or (tid and calls[-1].id and tid != calls[-1].id):
                calls.append(ToolCall(tid, tc.name.decode("utf-8", "replace")))
            elif tid or tc.name:  # a late id/name for the open call (CPA: "update")
                calls[-1].id = calls[-1].id or tid
                calls[-1].name = calls[-1].name or tc.name.decode("utf-8", "replace")
            a = tc.arguments_json
            if a:
                self.tool_calls[-1].args_len += len(a)
                self._args.add(a)
                if self.args is not None:
                    self.args += a
        if m.HasField("usage"):
            u = m.usage
            model = u.model.decode("utf-8", "replace")
            self.usage7 = Usage(u.prompt_tokens, u.output_tokens, u.cache_write_tokens, u.cache_read_tokens, model)
        if self.usage28 is None and m.dimension_groups:
            self.usage28 = _dimension_usage(m)

    @property
    def usage(self) -> Usage | None:
        """Field 7; when it is missing or all zero, the field-28 group (keeping 7.9's
        model); None when neither was seen."""
        u7, u28 = self.usage7, self.usage28
        if u28 is not None and (u7 is None or u7.empty):
            return u28 if u7 is None or not u7.model else replace(u28, model=u7.model)
        return u7

    def digest(self) -> tuple[str, int, str, int]:
        """Same shape and hash as :meth:`wire.verdict.Verdict.digest`: blake2b over the
        text deltas (field 3) and over all tool calls' argument fragments (6.3)."""
        return (self._text.hexdigest(), self._text.size, self._args.hexdigest(), self._args.size)

    def close(self) -> TapResult:
        """End of body (idempotent): how it ended, plus everything collected."""
        if self.end is None:
            self.end = self.decoder.close()
            if self.error is None:
                self.error = self.end.error
        return self.result()

    def result(self) -> TapResult:
        """The facts so far; final once :attr:`ended` or after :meth:`close`."""
        return TapResult(
            stop_reason=self.stop_reason,
            usage=self.usage,
            trailer=self.decoder.trailer,
            error=self.error,
            digest=self.digest(),
            frames=self.decoder.frames,
            bad_frames=self.bad_frames,
            tool_calls=tuple(self.tool_calls),
            thinking_len=self.thinking_len,
        )


def _dimension_usage(m: pb.GetChatMessageResponse) -> Usage | None:
    """CPA's fallback usage: the "Token Usage" display group (field 28)."""
    for g in m.dimension_groups:
        if g.title != b"Token Usage":
            continue
        vals = {mt.key: max(int(mt.value.value), 0) for mt in g.metrics}
        inp = vals.get(b"input_tokens", 0)  # total input, cached part included
        cached = vals.get(b"cached_input_tokens", 0)
        return Usage(max(inp - cached, 0), vals.get(b"output_tokens", 0), 0, cached, source="field28")
    return None


# --- request side ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestInfo:
    max_tokens: int | None
    """Field 8.2, None when the request has no completion configuration."""
    prompts: tuple[tuple[int, str], ...] = field(default=())
    """(source, content) per prompt message (1 user, 2 assistant, 4 tool), in order."""
    model: str = ""
    """Field 21, the chat model uid."""

    def user_texts(self) -> list[str]:
        return [text for source, text in self.prompts if source == pb.CHAT_MESSAGE_SOURCE_USER]


def _single_envelope(body: bytes) -> bytes | None:
    """The payload of a request body that is exactly one data envelope, else None."""
    frames, end = decode_body(body)
    if len(frames) != 1 or frames[0].end_stream or not end.truncated or end.pending:
        return None
    return frames[0].payload


def _parse_request(body: bytes) -> pb.GetChatMessageRequest | None:
    """The GetChatMessageRequest in a one-envelope body, or None."""
    payload = _single_envelope(body)
    if payload is None:
        return None
    try:
        return pb.GetChatMessageRequest.FromString(payload)
    except DecodeError:
        return None


def read_request(body: bytes) -> RequestInfo | None:
    """Parse a GetChatMessageRequest body (one envelope); None if it is not one."""
    req = _parse_request(body)
    if req is None:
        return None
    return RequestInfo(
        max_tokens=req.configuration.max_tokens if req.HasField("configuration") else None,
        prompts=tuple((p.source, p.prompt) for p in req.prompts),
        model=req.chat_model_uid,
    )


def patch_max_tokens(body: bytes, cap: int) -> tuple[bytes, int | None] | None:
    """Lower field 8.2 to ``cap``; returns ``(new body, old value)`` or None to leave
    the body alone (not a single GetChatMessageRequest envelope, or already <= cap).

    The budget is only ever lowered: a client's cap never raises what the gateway asked.
    The envelope is re-encoded with its new length, uncompressed as CPA sends it; fields
    this schema does not know are kept by protobuf and re-serialized.
    """
    if cap <= 0:
        return None
    req = _parse_request(body)
    if req is None:
        return None
    old = req.configuration.max_tokens if req.HasField("configuration") else None
    if old is not None and 0 < old <= cap:
        return None
    req.configuration.max_tokens = cap
    return encode_frame(req.SerializeToString()), old
