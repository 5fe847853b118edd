"""What a repair costs, measured against what streaming costs anyway.

    python -m streamfix.bench            # `just bench`; about two minutes on 2 cores
    python -m streamfix.bench --quick    # fewer repeats, for a smoke run

Two measurements, each as a ratio against a floor taken in the same run (so the figures
do not depend on how fast or how loaded the machine is), repeated and reported as medians:

(a) In process: the repairer (``StreamRepair`` around the API's repairer, one event per
    chunk as CPA writes them) against the least any event-level repair must do: split the
    stream into events with :class:`wire.sse.SseParser` and ``orjson.loads`` each event's
    data once.
(b) In mitmdump: the proxy process's CPU (utime+stime from ``/proc/<pid>/stat``) with
    ``addons/repair.py`` against mitmdump with a ``stream = True`` passthrough
    (``streamfix/bench_addon.py``), on the same upstream stream served by the replay
    upstream, one event per upstream write (back to back and 1 ms apart) and batched
    (16 KiB writes).
(c) The same at a model's pace, 20 ms apart: every stream at once through each proxy.
(d) Memory: each mitmdump's RSS around one 100,000-event Responses stream (before, after
    the deltas at 75 % of the bytes, peak, after).

The streams are long synthetic turns as unfixed CPA emits them (cpa-wire.md sections
2, 3 and 6; Devin on Responses, chat and messages, and the Claude path on Responses): reasoning and text deltas, several write_file calls with thousands of argument
deltas (all calls closed at the end, Go-escaped ``\\u003c``), usage on the terminal.
The builders are public: the end-to-end tests use them for their large bodies.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.sse import SseParser
from streamfix.wire.stream import StreamRepair
from streamfix.wire.verdict import Verdict

ROOT = Path(__file__).resolve().parent.parent
MODEL = "devin/swe-2"
INTERACTION_ID = "interaction_3f9c1a2b-4d5"
CALLS = (1200, 300, 200, 100)
"""Argument deltas per write_file call of the default streams (CPA users report 3500-4700
deltas for one large call; four calls make the item bookkeeping work)."""

RESPONSES_REQUEST: dict[str, Any] = {
    "model": MODEL,
    "stream": True,
    "input": [{"role": "user", "content": "Build the landing pages."}],
    "tools": [
        {
            "type": "function",
            "name": "write_file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        }
    ],
}
CHAT_REQUEST: dict[str, Any] = {
    "model": MODEL,
    "stream": True,
    "messages": [{"role": "user", "content": "Build the landing pages."}],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "write_file",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                    "required": ["path", "content"],
                },
            },
        }
    ],
}

_WORDS = (  # noqa: SIM905  (prose reads better than a list of words)
    "the page needs a hero section with a call to action and three feature cards plus "
    "a footer that links to pricing docs and the blog so I will write index.html first "
    "then styles.css and keep every asset relative to the site root"
).split()


# --- synthetic CPA streams ----------------------------------------------------------
def _deltas(rng: random.Random, n: int) -> list[str]:
    """n token-sized text deltas (1-4 words each). The first has no leading space, as a
    model's text begins (in each of the 28 recordings with text, e.g.
    ``recordings/responses-devin-toolcall``: ``"Creating the file"``, then ``" now."``);
    with one, any later delta that began with the same word was a prefix of the text,
    which rule replay holds until the next delta."""
    words = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 4))) for _ in range(n)]
    return [w if i == 0 else " " + w for i, w in enumerate(words)]


def _html(rng: random.Random, k: int, size: int) -> str:
    lines = [f'<!doctype html>\n<html lang="en">\n<head><title>Page {k} & co</title></head>\n<body>']
    n = 0
    while n < size:
        line = f'  <p class="c{rng.randint(0, 9)}">' + " ".join(rng.choice(_WORDS) for _ in range(8)) + "</p>"
        lines.append(line)
        n += len(line) + 1
    return "\n".join(lines + ["</body>\n</html>\n"])


def _split(s: str, n: int) -> list[str]:
    """``s`` cut into n pieces of similar length (never empty)."""
    n = max(1, min(n, len(s)))
    step, extra = divmod(len(s), n)
    out, i = [], 0
    for j in range(n):
        w = step + (1 if j < extra else 0)
        out.append(s[i : i + w])
        i += w
    return out


def _go(data: bytes) -> bytes:
    """Go's encoding/json (sjson) escapes <, > and & inside strings; they only occur there."""
    return data.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")


def _calls(rng: random.Random, calls: Sequence[int]) -> list[tuple[str, str, list[str]]]:
    """(call id, full arguments, argument deltas) per call; ~20 argument bytes per delta."""
    out = []
    for k, n in enumerate(calls):
        args = json.dumps({"path": f"site/page_{k}.html", "content": _html(rng, k, 20 * n)}, separators=(",", ":"))
        out.append((f"write_file_{k}#{rng.getrandbits(32):08x}", args, _split(args, n)))
    return out


def devin_responses_stream(
    calls: Sequence[int] = CALLS, reasoning: int = 300, text: int = 400, seed: int = 1, keepalive_every: int = 1000
) -> bytes:
    """A Devin turn on unfixed CPA's ``/v1/responses``: reasoning, text, then ``calls``
    function calls, all of them closed only at the end; no status on function_call items,
    no ``response.in_progress``, reasoning deltas without item_id/summary_index, one
    summary_text per delta, ``output_index`` = step index, the body's extra trailing LF."""
    rng = random.Random(seed)
    out: list[bytes] = []
    seq = 0

    def emit(type_: str, **fields: Any) -> None:
        nonlocal seq
        seq += 1
        obj = {"type": type_, **fields, "sequence_number": seq}
        out.append(b"event: " + type_.encode() + b"\ndata: " + _go(orjson.dumps(obj)) + b"\n\n")
        if keepalive_every and seq % keepalive_every == 0:
            out.append(b": keep-alive\n\n")

    emit(
        "response.created",
        response={"id": INTERACTION_ID, "object": "response", "status": "in_progress", "model": MODEL, "output": []},
    )
    rdeltas = _deltas(rng, reasoning)
    emit(
        "response.output_item.added",
        output_index=0,
        item={"id": "item_0", "type": "reasoning", "status": "in_progress", "encrypted_content": "", "summary": []},
    )
    for d in rdeltas:
        emit("response.reasoning_summary_text.delta", output_index=0, delta=d)
    reasoning_item = {
        "id": "item_0",
        "type": "reasoning",
        "encrypted_content": "",
        "summary": [{"type": "summary_text", "text": d} for d in rdeltas],
    }
    emit("response.output_item.done", output_index=0, item=reasoning_item)

    tdeltas = _deltas(rng, text)
    full = "".join(tdeltas)
    emit(
        "response.output_item.added",
        output_index=1,
        item={"id": "item_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []},
    )
    emit(
        "response.content_part.added",
        output_index=1,
        content_index=0,
        item_id="item_1",
        part={"type": "output_text", "text": ""},
    )
    for d in tdeltas:
        emit("response.output_text.delta", output_index=1, content_index=0, item_id="item_1", delta=d)
    emit("response.output_text.done", output_index=1, content_index=0, item_id="item_1", text=full, logprobs=[])
    emit(
        "response.content_part.done",
        output_index=1,
        content_index=0,
        item_id="item_1",
        part={"type": "output_text", "text": full},
    )
    message_item = {
        "id": "item_1",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": full}],
    }
    emit("response.output_item.done", output_index=1, item=message_item)

    call_items = []
    for k, (cid, args, pieces) in enumerate(_calls(rng, calls)):
        emit(
            "response.output_item.added",
            output_index=2 + k,
            item={"id": cid, "type": "function_call", "call_id": cid, "name": "write_file", "arguments": ""},
        )
        for p in pieces:
            emit("response.function_call_arguments.delta", output_index=2 + k, item_id=cid, delta=p)
        call_items.append({"id": cid, "type": "function_call", "call_id": cid, "name": "write_file", "arguments": args})
    for k, item in enumerate(call_items):
        emit(
            "response.function_call_arguments.done", output_index=2 + k, item_id=item["id"], arguments=item["arguments"]
        )
        emit("response.output_item.done", output_index=2 + k, item=item)

    out_tokens = (len(full) + sum(len(i["arguments"]) for i in call_items)) // 4
    emit(
        "response.completed",
        response={
            "id": INTERACTION_ID,
            "object": "response",
            "status": "completed",
            "model": MODEL,
            "output": [reasoning_item, message_item, *call_items],
            "usage": {
                "input_tokens": 12850,
                "output_tokens": out_tokens,
                "total_tokens": 12850 + out_tokens,
                "input_tokens_details": {"cached_tokens": 11640},
            },
        },
    )
    out.append(b"\n")
    return b"".join(out)


def devin_chat_stream(
    calls: Sequence[int] = CALLS, reasoning: int = 300, text: int = 400, seed: int = 1, keepalive_every: int = 1000
) -> bytes:
    """The same turn on unfixed CPA's ``/v1/chat/completions``: ``tool_calls[].index`` =
    step index (2, 3, ...), interaction id as chunk id, usage on the finish chunk, [DONE]."""
    rng = random.Random(seed)
    out: list[bytes] = []
    base = {"id": INTERACTION_ID, "object": "chat.completion.chunk", "created": 1789012345, "model": MODEL}

    def chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, Any] | None = None) -> None:
        obj: dict[str, Any] = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if usage is not None:
            obj["usage"] = usage
        out.append(b"data: " + _go(orjson.dumps(obj)) + b"\n\n")
        if keepalive_every and len(out) % keepalive_every == 0:
            out.append(b": keep-alive\n\n")

    chunk({"role": "assistant"})
    for d in _deltas(rng, reasoning):
        chunk({"reasoning_content": d})
    tdeltas = _deltas(rng, text)
    for d in tdeltas:
        chunk({"content": d})
    n_args = 0
    for k, (cid, args, pieces) in enumerate(_calls(rng, calls)):
        chunk(
            {
                "tool_calls": [
                    {"index": 2 + k, "id": cid, "type": "function", "function": {"name": "write_file", "arguments": ""}}
                ]
            }
        )
        for p in pieces:
            chunk({"tool_calls": [{"index": 2 + k, "function": {"arguments": p}}]})
        n_args += len(args)
    out_tokens = (len("".join(tdeltas)) + n_args) // 4
    chunk(
        {},
        "tool_calls",
        {
            "prompt_tokens": 12850,
            "completion_tokens": out_tokens,
            "total_tokens": 12850 + out_tokens,
            "prompt_tokens_details": {"cached_tokens": 11640},
        },
    )
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def claude_responses_stream(text: int = 600, calls: Sequence[int] = CALLS, seed: int = 2) -> bytes:
    """A Claude/Kiro turn on unfixed CPA's ``/v1/responses`` (v7.1.64..v7.2.89): a message
    whose text streams first and is closed only at the end, after the function calls
    (each closed in place), so every call's ``output_item.added`` arrives while the message
    is open; ``event:`` lines, ``sequence_number`` after ``type``."""
    rng = random.Random(seed)
    out: list[bytes] = []
    seq = 0
    rid = "msg_01HqA9ZkT3vF8w2bXyR7cD4e"
    mid = f"msg_{rid}_0"

    def emit(type_: str, **fields: Any) -> None:
        nonlocal seq
        seq += 1
        obj = {"type": type_, "sequence_number": seq, **fields}
        out.append(b"event: " + type_.encode() + b"\ndata: " + _go(orjson.dumps(obj)) + b"\n\n")

    resp = {
        "id": rid,
        "object": "response",
        "created_at": 1789012400,
        "status": "in_progress",
        "model": "claude-sonnet-4-5",
    }
    emit("response.created", response={**resp, "output": []})
    emit("response.in_progress", response=resp)
    emit(
        "response.output_item.added",
        output_index=0,
        item={"id": mid, "type": "message", "status": "in_progress", "content": [], "role": "assistant"},
    )
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    emit("response.content_part.added", item_id=mid, output_index=0, content_index=0, part=part)
    tdeltas = _deltas(rng, text)
    for d in tdeltas:
        emit("response.output_text.delta", item_id=mid, output_index=0, content_index=0, delta=d, logprobs=[])
    full = "".join(tdeltas)
    items = []
    for k, (cid, args, pieces) in enumerate(_calls(rng, calls)):
        fid = f"fc_{cid}"
        item = {
            "id": fid,
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": cid,
            "name": "write_file",
        }
        emit("response.output_item.added", output_index=1 + k, item=item)
        for piece in pieces:
            emit("response.function_call_arguments.delta", item_id=fid, output_index=1 + k, delta=piece)
        emit("response.function_call_arguments.done", item_id=fid, output_index=1 + k, arguments=args)
        done = {**item, "status": "completed", "arguments": args}
        emit("response.output_item.done", output_index=1 + k, item=done)
        items.append(done)
    emit("response.output_text.done", item_id=mid, output_index=0, content_index=0, text=full, logprobs=[])
    emit("response.content_part.done", item_id=mid, output_index=0, content_index=0, part={**part, "text": full})
    message = {
        "id": mid,
        "type": "message",
        "status": "completed",
        "content": [{**part, "text": full}],
        "role": "assistant",
    }
    emit("response.output_item.done", output_index=0, item=message)
    n_out = (len(full) + sum(len(i["arguments"]) for i in items)) // 4
    emit(
        "response.completed",
        response={
            **resp,
            "status": "completed",
            "output": [message, *items],
            "usage": {"input_tokens": 9120, "output_tokens": n_out, "total_tokens": 9120 + n_out},
        },
    )
    return b"".join(out)


def devin_messages_stream(calls: Sequence[int] = CALLS, reasoning: int = 300, text: int = 400, seed: int = 3) -> bytes:
    """The Devin turn on unfixed CPA's ``/v1/messages``: CPA's "three newlines" framing, a
    thinking block, a text block, tool_use blocks with input_json_delta, message_delta
    with ``stop_reason: tool_use`` and usage, message_stop."""
    rng = random.Random(seed)
    out: list[bytes] = []

    def emit(obj: dict[str, Any]) -> None:
        out.append(b"event: " + obj["type"].encode() + b"\ndata: " + _go(orjson.dumps(obj)) + b"\n\n\n")

    emit(
        {
            "type": "message_start",
            "message": {
                "id": INTERACTION_ID,
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": MODEL,
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 12850, "output_tokens": 0},
            },
        }
    )
    emit({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}})
    for d in _deltas(rng, reasoning):
        emit({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": d}})
    emit({"type": "content_block_stop", "index": 0})
    emit({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}})
    tdeltas = _deltas(rng, text)
    for d in tdeltas:
        emit({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": d}})
    emit({"type": "content_block_stop", "index": 1})
    n_args = 0
    for k, (cid, args, pieces) in enumerate(_calls(rng, calls)):
        emit(
            {
                "type": "content_block_start",
                "index": 2 + k,
                "content_block": {"type": "tool_use", "id": cid, "name": "write_file", "input": {}},
            }
        )
        for piece in pieces:
            emit(
                {
                    "type": "content_block_delta",
                    "index": 2 + k,
                    "delta": {"type": "input_json_delta", "partial_json": piece},
                }
            )
        emit({"type": "content_block_stop", "index": 2 + k})
        n_args += len(args)
    n_out = (len("".join(tdeltas)) + n_args) // 4
    emit(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"input_tokens": 12850, "output_tokens": n_out},
        }
    )
    emit({"type": "message_stop"})
    return b"".join(out)


MESSAGES_REQUEST: dict[str, Any] = {
    "model": MODEL,
    "stream": True,
    "max_tokens": 32000,
    "messages": [{"role": "user", "content": "Build the landing pages."}],
    "tools": [{"name": "write_file", "input_schema": RESPONSES_REQUEST["tools"][0]["parameters"]}],
}
CLAUDE_RESPONSES_REQUEST: dict[str, Any] = {**RESPONSES_REQUEST, "model": "claude-sonnet-4-5"}


def long_responses_stream(events: int = 100_000) -> bytes:
    """``events`` text deltas into one message (Devin path, closed only by the terminal):
    the memory figure's stream (the open item's text is all that may grow)."""
    return devin_responses_stream(calls=(), reasoning=0, text=events, keepalive_every=0)


STREAMS: dict[str, tuple[str, str, dict[str, Any], Callable[[], bytes]]] = {
    # name -> (api, path, request body, builder)
    "responses": ("responses", "/v1/responses", RESPONSES_REQUEST, devin_responses_stream),
    "responses-claude": ("responses", "/v1/responses", CLAUDE_RESPONSES_REQUEST, claude_responses_stream),
    "chat": ("chat", "/v1/chat/completions", CHAT_REQUEST, devin_chat_stream),
    "messages": ("messages", "/v1/messages", MESSAGES_REQUEST, devin_messages_stream),
}


def turn_stream() -> bytes:
    """A short Devin turn on unfixed CPA's ``/v1/responses`` (166 events: reasoning, text,
    two calls; the capacity benchmark's): what a flow costs beyond its events shows here."""
    return devin_responses_stream(calls=(60, 30), reasoning=20, text=40, keepalive_every=0)


SHORT_STREAMS: dict[str, tuple[str, str, dict[str, Any], Callable[[], bytes]]] = {
    "turn": ("responses", "/v1/responses", RESPONSES_REQUEST, turn_stream),
}
"""Streams only the instruction benchmark runs, when named (``--streams turn``)."""


def events_of(body: bytes) -> list[bytes]:
    """The body cut into its events' raw bytes (one write each, as CPA sends them)."""
    p = SseParser()
    return [e.raw for e in p.feed(body) + p.close()]


def repair_in_process(
    api: str, request: dict[str, Any], chunks: Sequence[bytes], rules: Rules | None = None
) -> tuple[bytes, StreamRepair]:
    """What the addon does to one streamed flow, without mitmproxy (same defaults)."""
    from streamfix.wire.apis import stream_repairer

    verdict = Verdict()
    verdict.request(request)
    model = request.get("model")
    fctx = FlowContext(model=model if isinstance(model, str) else None, request=request)
    s = StreamRepair(stream_repairer(api, rules or Rules(), fctx, verdict))
    out = [s.feed(c) for c in chunks]
    out.append(s.close())
    return b"".join(out), s


def floor_in_process(chunks: Sequence[bytes]) -> int:
    """The floor: split into events and parse each event's JSON once."""
    p = SseParser()
    loads = orjson.loads
    n = 0
    for c in chunks:
        for ev in p.feed(c):
            d = ev.data
            if d is not None and d != b"[DONE]":
                loads(d)
            n += 1
    return n + len(p.close())


# --- (a) in process -----------------------------------------------------------------
def bench_in_process(repeats: int) -> list[dict[str, Any]]:
    rows = []
    for name, (api, _path, request, build) in STREAMS.items():
        chunks = events_of(build())
        _, s = repair_in_process(api, request, chunks)  # warm-up, and a sanity check
        floor_t, rep_t = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            floor_in_process(chunks)
            floor_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            repair_in_process(api, request, chunks)
            rep_t.append(time.perf_counter() - t)
        f, r = statistics.median(floor_t), statistics.median(rep_t)
        rows.append(
            {
                "stream": name,
                "events": len(chunks),
                "bytes": sum(map(len, chunks)),
                "floor_evs": len(chunks) / f,
                "repair_evs": len(chunks) / r,
                "ratio": r / f,
                "changed": s.repairer.changed,
                "error": repr(s.error) if s.error else None,
                "floor_us": f / len(chunks) * 1e6,
                "repair_us": r / len(chunks) * 1e6,
            }
        )
    return rows


# --- (b) mitmdump CPU ---------------------------------------------------------------
MIN_SAMPLE_CPU = 0.25
"""Seconds of mitmdump CPU per sample: utime+stime count 10 ms ticks, so +-4 %."""
MAX_PER_SAMPLE = 40


def _cpu_ns(pid: int) -> int:
    """Nanoseconds on CPU, all threads (schedstat): precise, only used to size samples."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def _cpu_split(pid: int) -> tuple[float, float]:
    """A process's CPU seconds so far, (user, system), every thread's."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick  # utime, stime


def _cpu_seconds(pid: int) -> float:
    return sum(_cpu_split(pid))


class _Proc:
    """A child process logging to a file; ``wait_for`` polls the log, bounded."""

    def __init__(self, cmd: list[str], log: Path, env: dict[str, str] | None = None, root: Path = ROOT) -> None:
        self.log = log
        self.fp = log.open("wb")
        path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
        self.p = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self.fp,
            stderr=subprocess.STDOUT,
            cwd=root,
            env={**os.environ, "PYTHONPATH": path, **(env or {})},
        )

    def wait_for(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.log.read_text("utf-8", "replace"))
            if m:
                return m
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{pattern!r} not seen; log:\n{self.log.read_text('utf-8', 'replace')[-2000:]}")

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.fp.close()


def _tool(name: str) -> str:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else name


def start_proxy(
    upstream: str,
    addon: Path,
    tmpd: Path,
    label: str,
    procs: list[_Proc],
    *args: str,
    prefix: Sequence[str] = (),
    env: dict[str, str] | None = None,
    root: Path = ROOT,
    timeout: float = 30.0,
    regular: bool = False,
) -> tuple[_Proc, int]:
    """mitmdump in reverse mode in front of ``upstream`` (``regular``: a regular proxy, as
    CPA's ``proxy-url`` uses it) with one addon script (and ``args``), logging to
    ``tmpd/mitm-<label>.log`` (added to ``procs`` for the caller to stop): (process, port).
    ``prefix`` runs it under another program (valgrind), ``env`` adds variables, ``root``
    is the checkout it imports."""
    p = _Proc(
        [
            *prefix,
            _tool("mitmdump"),
            "--mode",
            "regular@127.0.0.1:0" if regular else f"reverse:{upstream}@127.0.0.1:0",
            "--set",
            f"confdir={tmpd / 'conf'}",
            "--set",
            "flow_detail=0",
            "-s",
            str(addon),
            *args,
        ],
        tmpd / f"mitm-{label}.log",
        env,
        root,
    )
    procs.append(p)
    port = int(p.wait_for(r"listening at 127\.0\.0\.1:(\d+)", timeout).group(1))
    if "error in script" in p.log.read_text():
        raise RuntimeError(f"{addon} failed to load:\n{p.log.read_text()}")
    return p, port


def _write_recordings(root: Path) -> dict[str, tuple[str, bytes, int]]:
    """Bench recordings for the replay upstream: name -> (path, body, events)."""
    out = {}
    for name, (api, path, request, build) in {**STREAMS, **SHORT_STREAMS}.items():
        body = build()
        for mode, chunk in (("event", "event"), ("batched", "bytes:16384")):
            rec = root / f"bench-{name}-{mode}"
            rec.mkdir(parents=True)
            (rec / "response.body").write_bytes(body)
            (rec / "recording.json").write_text(
                json.dumps(
                    {
                        "description": f"streamfix.bench: synthetic Devin turn on {path}, {mode} writes",
                        "api": api,
                        "kind": "buggy",
                        "source": "streamfix.bench (synthetic)",
                        "request": {
                            "method": "POST",
                            "path": path,
                            "headers": {"content-type": "application/json"},
                            "body": request,
                        },
                        "response": {"status": 200, "headers": {"content-type": "text/event-stream"}},
                        "pacing": {"delay_ms": 0, "chunk": chunk},
                    },
                    indent=1,
                )
            )
            out[rec.name] = (path, body, len(events_of(body)))
    body = long_responses_stream()
    rec = root / "bench-long-responses"
    rec.mkdir(parents=True)
    (rec / "response.body").write_bytes(body)
    (rec / "recording.json").write_text(
        json.dumps(
            {
                "description": "streamfix.bench: 100,000 text deltas into one message, for the memory figure",
                "api": "responses",
                "kind": "buggy",
                "source": "streamfix.bench (synthetic)",
                "request": {
                    "method": "POST",
                    "path": "/v1/responses",
                    "headers": {"content-type": "application/json"},
                    "body": RESPONSES_REQUEST,
                },
                "response": {"status": 200, "headers": {"content-type": "text/event-stream"}},
                "pacing": {"delay_ms": 0, "chunk": "bytes:4096"},
            }
        )
    )
    out[rec.name] = ("/v1/responses", body, len(events_of(body)))
    return out


def _fetch(client: Any, url: str, body: bytes, headers: dict[str, str]) -> tuple[bytes, int]:
    """The whole streamed body and how many reads it took the client."""
    with client.stream("POST", url, content=body, headers=headers) as r:
        r.raise_for_status()
        parts = list(r.iter_raw())
    return b"".join(parts), len(parts)


MODES = (
    # label, recording suffix, upstream pause between writes (ms)
    ("1 event/write", "event", 0.0),
    ("16 KiB writes", "batched", 0.0),
    ("1 event/write, 1 ms apart", "event", 1.0),
)
"""How the upstream delivers the stream. Back to back, mitmdump still gets about one event
per read but its loop never idles; paced like a model (1 ms here, 5-50 ms in real life),
every event also pays a wake-up, which is what an LLM stream costs in practice."""


def _masked(body: bytes) -> bytes:
    """created_at is the flow's start second: equal bodies may differ there only."""
    return re.sub(rb'"created_at":\d+', b'"created_at":0', body)


SLOW_PACE_MS = 20.0
"""The model-paced run at a realistic pace: every stream at once (one 2.5k-event stream
alone would take 50 s), both proxies side by side, one round."""


def _rss_kb(pid: int, field: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _slow_paced(proxies: dict[str, Any], recs: dict[str, Any]) -> dict[str, Any]:
    """Every bench stream, one event per write 20 ms apart, all at once through each proxy
    (both proxies at the same time): mitmdump CPU per event, summed over the streams."""
    import concurrent.futures

    import httpx

    jobs = []
    for label, (proc, base) in proxies.items():
        for name, (_api, path, request, _build) in STREAMS.items():
            jobs.append((label, base + path, json.dumps(request).encode(), f"bench-{name}-event"))
    cpu0 = {label: _cpu_split(proc.p.pid) for label, (proc, _) in proxies.items()}

    def one(job: tuple[str, str, bytes, str]) -> tuple[str, int]:
        label, url, body, rec = job
        headers = {
            "content-type": "application/json",
            "accept-encoding": "identity",
            "x-streamfix-recording": rec,
            "x-streamfix-delay-ms": str(SLOW_PACE_MS),
        }
        with httpx.Client(timeout=600) as client:
            got, _ = _fetch(client, url, body, headers)
        return label, len(got)

    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        list(pool.map(one, jobs))
    events = sum(recs[f"bench-{name}-event"][2] for name in STREAMS)
    out: dict[str, Any] = {"streams": len(STREAMS), "events": events}
    for label, (proc, _) in proxies.items():
        # user and system time apart: the paced excess is in user time (caches, not syscalls)
        user, sys_ = (b - a for a, b in zip(cpu0[label], _cpu_split(proc.p.pid)))
        out[f"{label}_us"] = (user + sys_) / events * 1e6
        out[f"{label}_user_us"], out[f"{label}_sys_us"] = user / events * 1e6, sys_ / events * 1e6
    out["ratio"] = out["repair_us"] / out["passthrough_us"] if out["passthrough_us"] else float("nan")
    return out


def _memory(proxies: dict[str, Any], recs: dict[str, Any]) -> list[dict[str, Any]]:
    """RSS of each mitmdump around one 100,000-event Responses stream: VmRSS before (after
    warm-up), peak (VmHWM) and after."""
    import httpx

    _, body, n_events = recs["bench-long-responses"]
    reqbody = json.dumps(RESPONSES_REQUEST).encode()
    rows = []
    with httpx.Client(timeout=600) as client:
        for label, (proc, base) in proxies.items():
            headers = {"content-type": "application/json", "accept-encoding": "identity", "x-streamfix-delay-ms": "0"}
            # warm-up: the small stream once, so imports and caches are in the baseline
            _fetch(
                client, base + "/v1/responses", reqbody, {**headers, "x-streamfix-recording": "bench-responses-batched"}
            )
            before = _rss_kb(proc.p.pid)
            # VmHWM is the peak since start: reset it (Linux >= 4.0), else it may be the warm-up's
            try:
                with open(f"/proc/{proc.p.pid}/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                pass
            parts: list[bytes] = []
            got_n, at90 = 0, 0
            h = {**headers, "x-streamfix-recording": "bench-long-responses"}
            with client.stream("POST", base + "/v1/responses", content=reqbody, headers=h) as r:
                for part in r.iter_raw():
                    parts.append(part)
                    got_n += len(part)
                    if not at90 and got_n >= 0.75 * len(body):  # the deltas, before the closing events
                        at90 = _rss_kb(proc.p.pid)
            got = b"".join(parts)
            rows.append(
                {
                    "proxy": label,
                    "events": n_events,
                    "mb": len(body) / 1e6,
                    "before_mb": before / 1024,
                    "at90_mb": at90 / 1024,
                    "peak_mb": _rss_kb(proc.p.pid, "VmHWM") / 1024,
                    "after_mb": _rss_kb(proc.p.pid) / 1024,
                    "bytes_ok": len(got) >= len(body) if label == "repair" else got == body,
                }
            )
    return rows


def _start_replay(tmpd: Path, procs: list[_Proc]) -> str:
    """The replay upstream serving ``tmpd/recordings`` (added to ``procs``): its URL."""
    replay = _Proc(
        [sys.executable, "-m", "streamfix.replay", "--port", "0", "--recordings", str(tmpd / "recordings")],
        tmpd / "replay.log",
    )
    procs.append(replay)
    return replay.wait_for(r"listening on (http://\S+)").group(1)


def bench_mitmdump(repeats: int, paced: bool = True, memory_only: bool = False) -> list[dict[str, Any]]:
    import httpx

    rows = []
    EXTRA.clear()
    with tempfile.TemporaryDirectory(prefix="streamfix-bench-") as tmp:
        tmpd = Path(tmp)
        recs = _write_recordings(tmpd / "recordings")
        procs: list[_Proc] = []
        try:
            upstream = _start_replay(tmpd, procs)
            proxies = {}
            for label, addon in (
                ("repair", ROOT / "addons" / "repair.py"),
                ("passthrough", ROOT / "streamfix" / "bench_addon.py"),
            ):
                p, port = start_proxy(upstream, addon, tmpd, label, procs)
                proxies[label] = (p, f"http://127.0.0.1:{port}")
            with httpx.Client(timeout=120) as client:
                for name, (api, path, request, _build) in () if memory_only else STREAMS.items():
                    reqbody = json.dumps(request).encode()
                    expect = _masked(repair_in_process(api, request, events_of(recs[f"bench-{name}-event"][1]))[0])
                    for mode, suffix, pause_ms in MODES:
                        if pause_ms and not paced:
                            continue
                        rec = f"bench-{name}-{suffix}"
                        _, original, n_events = recs[rec]
                        headers = {
                            "content-type": "application/json",
                            "accept-encoding": "identity",
                            "x-streamfix-recording": rec,
                            "x-streamfix-delay-ms": str(pause_ms),
                        }
                        cpu: dict[str, list[float]] = {"repair": [], "passthrough": []}
                        reads: list[int] = []
                        ok = True
                        per_sample = {"repair": 1, "passthrough": 1}
                        for i in range(repeats + 1):  # round 0 warms both up and is not counted
                            order = ("repair", "passthrough") if i % 2 else ("passthrough", "repair")
                            for label in order:
                                proc, base = proxies[label]
                                c0, n0 = _cpu_seconds(proc.p.pid), _cpu_ns(proc.p.pid)
                                for _ in range(per_sample[label]):
                                    got, n_reads = _fetch(client, base + path, reqbody, headers)
                                    ok &= (_masked(got) == expect) if label == "repair" else (got == original)
                                    if label == "passthrough":
                                        reads.append(n_reads)
                                if i:
                                    cpu[label].append((_cpu_seconds(proc.p.pid) - c0) / per_sample[label])
                                else:  # enough requests per sample for >= MIN_SAMPLE_CPU of 10 ms ticks
                                    one = max(_cpu_ns(proc.p.pid) - n0, 1) / 1e9
                                    per_sample[label] = max(1, min(MAX_PER_SAMPLE, math.ceil(MIN_SAMPLE_CPU / one)))
                        rep, base_cpu = statistics.median(cpu["repair"]), statistics.median(cpu["passthrough"])
                        rows.append(
                            {
                                "stream": name,
                                "mode": mode,
                                "events": n_events,
                                "events_per_read": n_events / statistics.median(reads),
                                "repair_ms": rep * 1e3,
                                "passthrough_ms": base_cpu * 1e3,
                                "repair_us": rep / n_events * 1e6,
                                "passthrough_us": base_cpu / n_events * 1e6,
                                "ratio": rep / base_cpu if base_cpu else float("nan"),
                                "extra_us": (rep - base_cpu) / n_events * 1e6,
                                "bodies_ok": ok,
                            }
                        )
            EXTRA["memory"] = _memory(proxies, recs)
            if paced and not memory_only:
                EXTRA["slow"] = _slow_paced(proxies, recs)
        finally:
            for p in reversed(procs):
                p.stop()
    return rows


def bench_floors(repeats: int) -> list[dict[str, Any]]:
    """mitmdump CPU per event, one event per write back to back, for each floor of
    ``bench_addon.py`` and for the repair addon, one mitmdump each, in rotating order:
    where between ``stream = True`` and the repair the cost arises."""
    import httpx

    from .bench_addon import FLOORS  # each one step more than the last (its docstring)

    rows = []
    with tempfile.TemporaryDirectory(prefix="streamfix-floors-") as tmp:
        tmpd = Path(tmp)
        recs = _write_recordings(tmpd / "recordings")
        procs: list[_Proc] = []
        try:
            upstream = _start_replay(tmpd, procs)
            proxies: dict[str, tuple[_Proc, str]] = {}
            for floor in FLOORS:
                addon = ROOT / "streamfix" / "bench_addon.py"
                p, port = start_proxy(upstream, addon, tmpd, floor, procs, "--set", f"streamfix_bench_floor={floor}")
                proxies[floor] = (p, f"http://127.0.0.1:{port}")
            p, port = start_proxy(upstream, ROOT / "addons" / "repair.py", tmpd, "repair", procs)
            proxies["repair"] = (p, f"http://127.0.0.1:{port}")
            labels = list(proxies)
            with httpx.Client(timeout=120) as client:
                for name, (_api, path, request, _build) in STREAMS.items():
                    rec = f"bench-{name}-event"
                    _, original, n_events = recs[rec]
                    reqbody = json.dumps(request).encode()
                    headers = {
                        "content-type": "application/json",
                        "accept-encoding": "identity",
                        "x-streamfix-recording": rec,
                        "x-streamfix-delay-ms": "0",
                    }
                    cpu: dict[str, list[float]] = {label: [] for label in labels}
                    per_sample = dict.fromkeys(labels, 1)
                    ok = True
                    for i in range(repeats + 1):  # round 0 warms up and calibrates
                        k = i % len(labels)
                        for label in labels[k:] + labels[:k]:  # each proxy first in turn
                            proc, base = proxies[label]
                            c0, n0 = _cpu_seconds(proc.p.pid), _cpu_ns(proc.p.pid)
                            for _ in range(per_sample[label]):
                                got, _reads = _fetch(client, base + path, reqbody, headers)
                                if label != "repair":
                                    ok &= got == original
                            if i:
                                cpu[label].append((_cpu_seconds(proc.p.pid) - c0) / per_sample[label])
                            else:
                                one = max(_cpu_ns(proc.p.pid) - n0, 1) / 1e9
                                per_sample[label] = max(1, min(MAX_PER_SAMPLE, math.ceil(MIN_SAMPLE_CPU / one)))
                    us = {label: statistics.median(v) / n_events * 1e6 for label, v in cpu.items()}
                    rows.append({"stream": name, "events": n_events, "us": us, "bodies_ok": ok})
        finally:
            for p in reversed(procs):
                p.stop()
    return rows


def report_floors(rows: list[dict[str, Any]], repeats: int) -> str:
    m = machine()
    out = [
        f"machine: {m['nproc']} CPUs, {m['cpu']}; Python {m['python']}; mitmproxy {m['mitmproxy']}; {m['platform']}",
        f"medians of {repeats} runs; one event per upstream write, back to back",
        "",
        "mitmdump CPU per event (utime+stime), µs, and as a ratio to stream = True",
        "| stream | events | stream=True | identity callable | + SSE parse | + one JSON parse | repair addon | bodies |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        us = r["us"]
        base = us["stream"]
        cells = [f"{us[label]:.1f} ({us[label] / base:.2f})" for label in us]
        out.append(
            f"| {r['stream']} | {r['events']} | " + " | ".join(cells) + f" | {'ok' if r['bodies_ok'] else 'DIFF'} |"
        )
    return "\n".join(out)


EXTRA: dict[str, Any] = {}
"""bench_mitmdump's other figures: ``memory`` (rows), ``slow`` (the 20 ms run)."""


# --- report -------------------------------------------------------------------------
def machine() -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import mitmproxy.version

    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
        "mitmproxy": mitmproxy.version.VERSION,
        "platform": platform.platform(),
    }


def report(inproc: list[dict[str, Any]], mitm: list[dict[str, Any]], r_in: int, r_mitm: int) -> str:
    m = machine()
    lines = [
        f"machine: {m['nproc']} CPUs, {m['cpu']}; Python {m['python']}; mitmproxy {m['mitmproxy']}; {m['platform']}",
        f"medians of {r_in} runs in process, {r_mitm} runs per mitmdump figure",
        "",
        "(a) in process: repairer vs floor (SSE split + one orjson parse per event), one event per chunk",
        "| stream | events | floor ev/s | repairer ev/s | repairer/floor | floor µs/ev | repairer µs/ev | events changed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in inproc:
        err = f" (FAILED OPEN: {r['error']})" if r["error"] else ""
        lines.append(
            f"| {r['stream']} | {r['events']} | {r['floor_evs']:,.0f} | {r['repair_evs']:,.0f} | "
            f"{r['ratio']:.2f} | {r['floor_us']:.1f} | {r['repair_us']:.1f} | {r['changed']}{err} |"
        )
    if mitm:
        lines += [
            "",
            "(b) mitmdump CPU (utime+stime) per event: repair addon vs stream=True passthrough, same upstream stream",
            "| stream | upstream writes | events | events/read | passthrough µs/ev | repair µs/ev | repair/passthrough | extra µs/ev | bodies |",
            "|---|---|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in mitm:
            lines.append(
                f"| {r['stream']} | {r['mode']} | {r['events']} | {r['events_per_read']:.1f} | {r['passthrough_us']:.1f} | "
                f"{r['repair_us']:.1f} | {r['ratio']:.2f} | {r['extra_us']:+.1f} | {'ok' if r['bodies_ok'] else 'MISMATCH'} |"
            )
    slow = EXTRA.get("slow")
    if slow:
        lines += [
            "",
            f"(c) mitmdump CPU, model-paced {SLOW_PACE_MS:.0f} ms apart: all {slow['streams']} streams at once through each proxy",
            "| events | passthrough µs/ev (user + sys) | repair µs/ev (user + sys) | repair/passthrough |",
            "|---:|---:|---:|---:|",
            (
                f"| {slow['events']} | {slow['passthrough_us']:.1f} ({slow['passthrough_user_us']:.1f} + "
                f"{slow['passthrough_sys_us']:.1f}) | {slow['repair_us']:.1f} ({slow['repair_user_us']:.1f} + "
                f"{slow['repair_sys_us']:.1f}) | {slow['ratio']:.2f} |"
            ),
        ]
    mem = EXTRA.get("memory")
    if mem:
        lines += [
            "",
            f"(d) mitmdump RSS around one {mem[0]['events']:,}-event Responses stream ({mem[0]['mb']:.0f} MB, 4 KiB writes)",
            "| proxy | RSS before MB | after the deltas (75 % of the bytes) | peak MB | after MB | peak - before MB | bytes |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for r in mem:
            lines.append(
                f"| {r['proxy']} | {r['before_mb']:.1f} | {r['at90_mb'] - r['before_mb']:+.1f} | {r['peak_mb']:.1f} | {r['after_mb']:.1f} | "
                f"{r['peak_mb'] - r['before_mb']:+.1f} | {'ok' if r['bytes_ok'] else 'MISMATCH'} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m streamfix.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=None, help="runs per figure (default 9 in process, 5 in mitmdump)")
    ap.add_argument("--quick", action="store_true", help="3 runs each, for a smoke run")
    ap.add_argument("--in-process-only", action="store_true", help="skip the mitmdump measurement")
    ap.add_argument("--no-paced", action="store_true", help="skip the paced mitmdump runs (the slowest part)")
    ap.add_argument("--memory-only", action="store_true", help="only the RSS figure (d)")
    ap.add_argument(
        "--capacity",
        action="store_true",
        help="latency, capacity and RSS under many concurrent streams instead (python -m streamfix.capacity)",
    )
    ap.add_argument(
        "--instructions",
        action="store_true",
        help="instructions per upstream event inside mitmdump under valgrind's callgrind "
        "(python -m streamfix.instructions; the primary figures)",
    )
    ap.add_argument(
        "--floors",
        action="store_true",
        help="only the floors between stream=True and the repair addon in mitmdump (streamfix/bench_addon.py)",
    )
    a, rest = ap.parse_known_args(argv)
    if a.capacity:
        from . import capacity

        return capacity.main(rest + (["--quick"] if a.quick else []))
    if a.instructions:
        from . import instructions

        return instructions.main(rest + (["--floors"] if a.floors else []) + (["--quick"] if a.quick else []))
    if rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    rin = a.repeats or (3 if a.quick else 9)
    rmitm = a.repeats or (3 if a.quick else 5)
    t0 = time.monotonic()
    if a.floors:
        print(report_floors(bench_floors(rmitm), rmitm))
        print(f"\n(bench took {time.monotonic() - t0:.0f} s)")
        return 0
    inproc = [] if a.memory_only else bench_in_process(rin)
    mitm = [] if a.in_process_only else bench_mitmdump(rmitm, paced=not a.no_paced, memory_only=a.memory_only)
    print(report(inproc, mitm, rin, rmitm))
    print(f"\n(bench took {time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
