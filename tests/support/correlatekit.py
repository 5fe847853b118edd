"""Devin conversations for the correlator's tests (tests/wire/test_correlate.py, and the
shared correlator of several workers, tests/e2e/test_sharedstate.py): Devin's frames of a
conversation, what a client leg sees of it, and the upstream request CPA builds."""

from __future__ import annotations

import random

from streamfix.wire import devin_pb2 as pb
from streamfix.wire.connect import encode_end_stream, encode_frame
from streamfix.wire.devin import DevinTap, read_request
from streamfix.wire.verdict import Verdict

STOP = {"max_tokens": 3, "content_filter": 11, "tool": 10, "stop": 2}
"""A conversation's kind -> Devin's StopReason value."""


def frame(**kw) -> bytes:
    return encode_frame(pb.GetChatMessageResponse(**kw).SerializeToString())


def conversation(i: int, kind: str) -> tuple[list[bytes], list[str], list[str]]:
    """Devin frames for conversation i, and the text/args deltas a client sees.

    All conversations share a long prefix; they differ only in the last text piece and
    the last argument fragment (late in the stream).
    """
    text = ["Sure, ", "I will write ", "the file ", f"now {i % 2}."]  # only 2 variants
    args = ['{"path":"index.html",', '"content":"<h1>', f"page {i}"]
    if kind != "max_tokens":
        args[-1] += '</h1>"}'
    frames = [frame(output_id=b"bot-1", thinking=b"Let me think.")]
    frames += [frame(text=t.encode()) for t in text]
    tc = pb.ChatToolCall
    frames.append(frame(tool_calls=[tc(id=b"write_file_0#a1", name=b"write_file", arguments_json=args[0].encode())]))
    frames += [frame(tool_calls=[tc(arguments_json=a.encode())]) for a in args[1:]]
    frames.append(frame(stop_reason=STOP[kind], delta_tokens=7))
    frames.append(
        frame(
            usage=pb.ModelUsage(
                prompt_tokens=100 + i, output_tokens=40 + i, cache_read_tokens=5, model=f"m{i}".encode()
            )
        )
    )
    frames.append(encode_end_stream())
    return frames, text, args


def client_verdict(text: list[str], args: list[str], rng: random.Random) -> Verdict:
    """A client-leg Verdict fed as a repairer would: deltas re-cut by the gateway."""
    v = Verdict()
    joined_t, joined_a = "".join(text), "".join(args)
    for s, feed in ((joined_t, v.observe_text), (joined_a, v.observe_args)):
        pos = 0
        while pos < len(s):
            n = rng.randint(1, 7)
            feed(s[pos : pos + n])
            pos += n
    return v


def upstream_request(user_texts: list[str], tool_texts: list[str] = (), max_tokens: int = 128000) -> bytes:
    """A GetChatMessageRequest as CPA builds it: one prompt per message, text copied."""
    P = pb.ChatMessagePrompt
    prompts = [P(source=pb.CHAT_MESSAGE_SOURCE_USER, prompt=t) for t in user_texts]
    prompts += [P(source=pb.CHAT_MESSAGE_SOURCE_TOOL, prompt=t) for t in tool_texts]
    req = pb.GetChatMessageRequest(
        system_prompt="sys", prompts=prompts, configuration=pb.CompletionConfiguration(max_tokens=max_tokens)
    )
    return encode_frame(req.SerializeToString())


def own_link_before_anothers_digest(corr) -> None:
    """Client a's call said "same text" (max_tokens), and a's client leg saw the same text;
    client b's call said other text (stop), but b's client leg saw "same text" too (the
    gateway garbled b's content, e.g. a non-streamed body). b asks first: it must take its
    own linked call, not a's, which its digest matches; then a gets its own."""
    for client, up, text, stop in (("c-a", "up-a", b"same text", 3), ("c-b", "up-b", b"b's own text", 2)):
        corr.note_client_request(
            client, "/v1/messages", {"messages": [{"role": "user", "content": f"prompt of {client}"}]}
        )
        p = corr.match_request(up, read_request(upstream_request([f"prompt of {client}"])))
        assert p is not None and p.flow_id == client and not p.last_match_ambiguous
        corr.upstream_started(up, p.flow_id)
        tap = DevinTap()
        tap.feed(frame(text=text, stop_reason=stop) + encode_end_stream())
        corr.upstream_finished(up, tap.result())
    got = {}
    for client in ("c-b", "c-a"):
        v = Verdict()
        v.observe_text("same text")
        v.resolver = r = corr.resolver(client)
        got[client] = (v.decide().outcome, r.record.flow_id, r.record.by_link)
    assert got == {"c-b": ("complete", "up-b", True), "c-a": ("max_tokens", "up-a", False)}
