"""Stream invariants: what a correct stream of each API looks like, checked from outside.

Independent of the repairers (written from the specs and clients.md §5, not from the
repair code), so tests can use it as an oracle: every repaired recording must pass,
every buggy one must fail. ``check(api, body)`` returns a list of violations (empty when
the stream is correct); each names the event (by position) and the rule.
"""

from __future__ import annotations

from typing import Any

import orjson

from .sse import SseParser

TERMINALS = {"response.completed", "response.incomplete", "response.failed"}


def json_events(body: bytes) -> list[dict[str, Any]]:
    """The JSON objects of an SSE body's data fields, in order (``[DONE]``, comments and
    non-JSON data skipped)."""
    p = SseParser()
    out = []
    for e in p.feed(body) + p.close():
        if e.data is None or e.data == b"[DONE]":
            continue
        try:
            obj = orjson.loads(e.data)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check(api: str, body: bytes) -> list[str]:
    fn = {"responses": check_responses, "chat": check_chat, "messages": check_messages}.get(api)
    return fn(json_events(body)) if fn else []


def check_responses(events: list[dict[str, Any]]) -> list[str]:
    bad: list[str] = []
    last_seq: int | None = None
    ids: list[str] = []  # announced item ids, in output_index order
    open_idx: int | None = None
    closed: set[int] = set()
    resp_id: str | None = None
    terminals = 0
    for n, ev in enumerate(events):
        t = ev.get("type", "")
        where = f"event {n} ({t})"
        seq = ev.get("sequence_number")
        if seq is not None:
            if last_seq is not None and not seq > last_seq:
                bad.append(f"{where}: sequence_number {seq} not above {last_seq}")
            last_seq = seq
        if terminals:
            bad.append(f"{where}: event after the terminal event")
        if t.startswith("response.") and isinstance(ev.get("response"), dict):
            rid = ev["response"].get("id")
            if resp_id is None:
                resp_id = rid
            elif rid != resp_id:
                bad.append(f"{where}: response.id {rid!r} differs from {resp_id!r}")
        if t in ("response.created", "response.in_progress"):
            r = ev.get("response", {})
            for k in ("id", "created_at", "model"):
                if r.get(k) is None:
                    bad.append(f"{where}: response.{k} missing")
        idx = ev.get("output_index")
        if t == "response.output_item.added":
            if open_idx is not None:
                bad.append(f"{where}: item {open_idx} still open when item {idx} is added")
            if idx != len(ids):
                bad.append(f"{where}: output_index {idx}, expected {len(ids)} (dense, in order)")
            item = ev.get("item", {})
            ids.append(item.get("id") or item.get("call_id"))
            open_idx = idx
            if item.get("type") == "function_call" and item.get("status") != "in_progress":
                bad.append(f"{where}: function_call added without status in_progress")
        elif t == "response.output_item.done":
            item = ev.get("item", {})
            if idx != open_idx:
                bad.append(f"{where}: done for item {idx}, but the open item is {open_idx}")
            if item.get("type") == "function_call" and item.get("status") not in ("completed", "incomplete"):
                bad.append(f"{where}: function_call done without status")
            if idx is not None:
                closed.add(idx)
            open_idx = None
        elif idx is not None and t.startswith("response.") and t not in TERMINALS:
            if idx != open_idx:
                bad.append(f"{where}: event for item {idx} while item {open_idx} is open")
            if t == "response.reasoning_summary_text.delta":
                for k in ("item_id", "summary_index"):
                    if k not in ev:
                        bad.append(f"{where}: {k} missing")
        if t in TERMINALS:
            terminals += 1
            if t == "response.failed":
                continue
            if open_idx is not None:
                bad.append(f"{where}: item {open_idx} still open at the terminal event")
            r = ev.get("response", {})
            out_ids = [o.get("id") or o.get("call_id") for o in r.get("output") or []]
            if out_ids != ids:
                bad.append(f"{where}: output ids {out_ids} differ from announced {ids}")
            for o in r.get("output") or []:
                if o.get("type") == "function_call" and o.get("status") not in ("completed", "incomplete"):
                    bad.append(f"{where}: function_call in output without status")
            u = r.get("usage")
            if not isinstance(u, dict) or not all(_is_int(u.get(k)) for k in ("input_tokens", "output_tokens", "total_tokens")):
                bad.append(f"{where}: usage lacks integer input/output/total tokens: {u!r}")
            if t == "response.incomplete" and not (r.get("incomplete_details") or {}).get("reason"):
                bad.append(f"{where}: response.incomplete without incomplete_details.reason")
    if events and not terminals:
        bad.append("no terminal event")
    return bad


def check_chat(events: list[dict[str, Any]]) -> list[str]:
    bad: list[str] = []
    seen: dict[int, list[int]] = {}  # choice -> tool call indexes in first-appearance order
    named: dict[tuple[int, int], str] = {}
    finished: set[int] = set()
    for n, ev in enumerate(events):
        if "error" in ev:
            continue
        for ch in ev.get("choices") or []:
            ci = ch.get("index", 0)
            where = f"chunk {n} choice {ci}"
            for tc in (ch.get("delta") or {}).get("tool_calls") or []:
                i = tc.get("index")
                order = seen.setdefault(ci, [])
                if i not in order:
                    if i != len(order):
                        bad.append(f"{where}: tool_calls index {i}, expected {len(order)}")
                    order.append(i)
                    if not (tc.get("function") or {}).get("name"):
                        bad.append(f"{where}: first delta of tool call {i} has no function.name")
                name = (tc.get("function") or {}).get("name")
                if name:
                    if (ci, i) in named and named[(ci, i)] == name:
                        bad.append(f"{where}: tool call {i} announces its name twice")
                    named[(ci, i)] = name
            if ch.get("finish_reason") is not None:
                if ci in finished:
                    bad.append(f"{where}: second finish_reason")
                finished.add(ci)
    return bad


def check_messages(events: list[dict[str, Any]]) -> list[str]:
    bad: list[str] = []
    open_block: int | None = None
    next_block = 0
    state = "start"
    for n, ev in enumerate(events):
        t = ev.get("type")
        where = f"event {n} ({t})"
        if t == "error":
            return bad
        if state == "start" and t != "message_start" and t != "ping":
            bad.append(f"{where}: before message_start")
        if t == "message_start":
            state = "blocks"
        elif t == "content_block_start":
            if open_block is not None:
                bad.append(f"{where}: block {open_block} still open")
            if ev.get("index") != next_block:
                bad.append(f"{where}: index {ev.get('index')}, expected {next_block}")
            open_block, next_block = ev.get("index"), next_block + 1
        elif t == "content_block_delta":
            if ev.get("index") != open_block:
                bad.append(f"{where}: delta for block {ev.get('index')} while {open_block} is open")
        elif t == "content_block_stop":
            if ev.get("index") != open_block:
                bad.append(f"{where}: stop for block {ev.get('index')} while {open_block} is open")
            open_block = None
        elif t == "message_delta":
            if open_block is not None:
                bad.append(f"{where}: block {open_block} still open")
            if (ev.get("delta") or {}).get("stop_reason") is None:
                bad.append(f"{where}: no stop_reason")
            state = "delta"
        elif t == "message_stop":
            if state != "delta":
                bad.append(f"{where}: message_stop without message_delta")
            state = "done"
    if events and state != "done":
        bad.append("no message_stop")
    return bad
