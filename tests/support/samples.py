"""Devin sample frames and requests shared by the Connect, Devin, upstream-leg and view tests."""

from __future__ import annotations

import base64

from streamfix.wire import devin_pb2 as pb
from streamfix.wire.connect import encode_frame
from streamfix.wire.verdict import Verdict

# a Devin Connect-RPC response body (489 bytes, 11 data envelopes + trailer {})
SAMPLE = base64.b64decode(
    "AAAAACEKDGJvdC03YzFkNWU5YRIGCPnSiNUGigEIbXNnLTRiMmEAAAAAE0oRTmVlZCBhbiBIVE1MIHBhZ2UAAAAA"
    "GEoWIGZvciB0aGUgbGFuZGluZyBzaXRlLgAAAAAUGhJXcml0aW5nIGluZGV4Lmh0bWwAAAAABxoFIG5vdy4AAAAA"
    "QTI/Cg93cml0ZV9maWxlXzAjYTESCndyaXRlX2ZpbGUaIHsicGF0aCI6ImluZGV4Lmh0bWwiLCJjb250ZW50Ijoi"
    "AAAAAD4yPBo6PCFkb2N0eXBlIGh0bWw+XG48aHRtbCBsYW5nPVwiZW5cIj5cbjxoZWFkPlxuICA8dGl0bGU+QWNt"
    "ZQAAAABRMk8aTSBSb2NrZXRzPC90aXRsZT5cbjwvaGVhZD5cbjxib2R5PlxuICA8c2VjdGlvbiBjbGFzcz1cImhl"
    "cm9cIj5cbiAgICA8aDE+TGF1bmNoAAAAAAUgkAMoAwAAAAASOhAQugkYkAMo+FpKBXN3ZS0yAAAAAF3iAVoKC1Rv"
    "a2VuIFVzYWdlEhUqDGlucHV0X3Rva2VucyIFFQDISEYSFioNb3V0cHV0X3Rva2VucyIFFQAAyEMSHCoTY2FjaGVk"
    "X2lucHV0X3Rva2VucyIFFQDgNUYCAAAAAnt9"
)


def client_digest(texts: list[str], args: list[str]) -> tuple:
    """What a client-leg repairer feeding a Verdict ends up with."""
    v = Verdict()
    for t in texts:
        v.observe_text(t)
    for a in args:
        v.observe_args(a)
    return v.digest()


def make_request(max_tokens: int | None = 128000, extra: bytes = b"") -> bytes:
    P = pb.ChatMessagePrompt
    req = pb.GetChatMessageRequest(
        metadata=pb.ClientMetadata(ide_name="chisel", ide_version="3000.10.21", api_key="secret"),
        system_prompt="You are Devin.",
        prompts=[
            P(message_id="m1", source=pb.CHAT_MESSAGE_SOURCE_USER, prompt="write a landing page"),
            P(message_id="m2", source=pb.CHAT_MESSAGE_SOURCE_ASSISTANT, prompt="ok",
              tool_calls=[pb.ChatToolCall(id=b"c1", name=b"write_file", arguments_json=b"{}")]),
            P(message_id="m3", source=pb.CHAT_MESSAGE_SOURCE_TOOL, prompt="done", tool_call_id="c1"),
            P(message_id="m4", source=pb.CHAT_MESSAGE_SOURCE_USER, prompt="now the CSS"),
        ],
        request_type=5,
        planner_mode=1,
        chat_model_uid="swe-2",
    )  # fmt: skip
    if max_tokens is not None:
        req.configuration.CopyFrom(
            pb.CompletionConfiguration(num_completions=1, max_tokens=max_tokens, max_newlines=400,
                                       temperature=1.0, top_k=40, top_p=0.95)
        )  # fmt: skip
    return encode_frame(req.SerializeToString() + extra)
