"""mitmweb content views for SSE flows: "SSE events", "SSE events indented", "streamfix diff".

    mitmweb -s addons/repair.py -s addons/sseview.py --set streamfix_keep_bodies=true

"SSE events" shows one block per event, its name and its JSON data on one line; "SSE
events indented" the same with the JSON indented, one field a line. "streamfix diff"
shows what streamfix changed in a flow: for an SSE body only the changed, inserted and
dropped events, each with the JSON fields that changed, one short line per field::

    ~ #10 response.completed -> response.incomplete
        ~ response.status: "completed" -> "incomplete"
        + response.incomplete_details = {"reason":"max_output_tokens"}

(a unified diff of the indented JSON for a JSON body). The original body is kept in
``flow.metadata["streamfix.original"]`` when ``streamfix_keep_bodies`` is on; the flow's
body is the repaired one. The automatic view choice picks the diff only when the flow
was changed; a clean flow opens on its events.
"""

from __future__ import annotations

import difflib
import sys
import textwrap
from collections.abc import Iterator
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

import orjson
from mitmproxy import contentviews
from mitmproxy.contentviews import Contentview, Metadata

_ROOT = Path(__file__).resolve().parent.parent
if (_ROOT / "streamfix" / "__init__.py").is_file() and str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))  # -s from a checkout that is not pip-installed (installed: nothing to add)

from streamfix.wire.sse import SseParser

ORIGINAL = "streamfix.original"
WIDTH = 100
"""Diff lines are cut to this many characters (a value is cut first, with ``...``)."""
_VALUE = 48
_CONTEXT = 1
"""Unchanged events shown before each change (by name only)."""
NO_ORIGINAL = (
    "streamfix diff: no original body was kept for this flow, so there is nothing to compare.\n"
    "Run with --set streamfix_keep_bodies=true (scripts/sidecar --web does) to keep it.\n"
)


class _Ev:
    """One SSE event as the views show it: name, parsed data (or the text), raw text."""

    __slots__ = ("name", "obj", "text")

    def __init__(self, name: str | None, obj: Any, text: str) -> None:
        self.name = name
        self.obj = obj
        self.text = text

    @property
    def kind(self) -> str:
        """What the event is: its JSON ``type``, else its ``event:`` name, else its text."""
        if isinstance(self.obj, dict) and isinstance(self.obj.get("type"), str):
            return self.obj["type"]
        if self.name:
            return self.name
        if isinstance(self.obj, dict) and isinstance(self.obj.get("object"), str):
            return self.obj["object"]  # chat.completion.chunk
        if self.obj is not None:
            return "data"
        return _cut(self.text, 40)


def events(body: bytes) -> list[_Ev]:
    """The body's events (comments as ``:text`` events without data)."""
    p = SseParser()
    out = []
    for e in p.feed(body) + p.close():
        data = e.data
        if data is None:
            text = "".join(f":{v.decode('utf-8', 'replace')}" for k, v in e.fields if k == b"")
            if text:
                out.append(_Ev(None, None, text))
            continue
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            obj = None
        text = orjson.dumps(obj).decode() if obj is not None else data.decode("utf-8", "replace")
        out.append(_Ev(e.event, obj, text))
    return out


def event_lines(body: bytes) -> list[str]:
    """One line per event: ``name: data`` (JSON re-dumped compactly), comments as ``: text``."""
    return [f"{e.name}: {e.text}" if e.name else e.text for e in events(body)]


def _json_lines(body: bytes) -> list[str]:
    """A JSON body, indented, one line per value (so a diff points at the field)."""
    try:
        return orjson.dumps(orjson.loads(body), option=orjson.OPT_INDENT_2).decode().splitlines()
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace").splitlines()


# --- the field diff -------------------------------------------------------------------


def _cut(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


def _show(v: Any) -> str:
    return _cut(orjson.dumps(v).decode(), _VALUE)


def _path(base: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{base}[{key}]"
    return f"{base}.{key}" if base else key


def field_changes(old: Any, new: Any, base: str = "") -> Iterator[str]:
    """``~ path: old -> new``, ``+ path = value``, ``- path = value`` for what differs."""
    if isinstance(old, dict) and isinstance(new, dict):
        for k, v in new.items():
            if k not in old:
                yield f"+ {_path(base, k)} = {_show(v)}"
            elif old[k] != v:
                yield from field_changes(old[k], v, _path(base, k))
        for k, v in old.items():
            if k not in new:
                yield f"- {_path(base, k)} = {_show(v)}"
        return
    if isinstance(old, list) and isinstance(new, list):
        for i in range(min(len(old), len(new))):
            if old[i] != new[i]:
                yield from field_changes(old[i], new[i], _path(base, i))
        for i in range(len(old), len(new)):
            yield f"+ {_path(base, i)} = {_show(new[i])}"
        for i in range(len(new), len(old)):
            yield f"- {_path(base, i)} = {_show(old[i])}"
        return
    yield f"~ {base or '(data)'}: {_show(old)} -> {_show(new)}"


def _key(e: _Ev) -> str:
    """What lines events up: the kind, with every terminal alike (a rename is a change)."""
    k = e.kind
    if k in ("response.completed", "response.incomplete", "response.failed"):
        return "response.<terminal>"
    return k


def _summary(e: _Ev) -> str:
    """A few identifying fields of an inserted or dropped event."""
    o = e.obj
    if not isinstance(o, dict):
        return ""
    bits = []
    for k in ("output_index", "item_id", "content_index", "index"):
        if k in o:
            bits.append(f"{k}={_show(o[k])}")
    item = o.get("item") if isinstance(o.get("item"), dict) else o.get("content_block")
    if isinstance(item, dict):
        for k in ("type", "id", "status"):
            if k in item:
                bits.append(f"{k}={_show(item[k])}")
    return f" ({', '.join(bits)})" if bits else ""


def stream_diff(original: bytes, repaired: bytes, width: int = WIDTH) -> str:
    """Only what changed between two SSE bodies, per event and per JSON field."""
    a, b = events(original), events(repaired)
    out: list[str] = []
    changed = inserted = dropped = 0
    pending: list[str] = []  # context: the unchanged events since the last change
    skipped = 0

    def context() -> None:
        nonlocal skipped, pending
        hidden = skipped - len(pending)
        if hidden > 0:
            out.append(f"  ... {hidden} unchanged event{'s' if hidden != 1 else ''}")
        out.extend(pending)
        pending, skipped = [], 0

    def block(head: str, lines: list[str]) -> None:
        context()
        if len(lines) == 1 and len(head) + 2 + len(lines[0]) <= width:
            out.append(f"{head}: {lines[0]}")
            return
        out.append(_cut(head, width))
        out.extend(_cut(f"    {line}", width) for line in lines)

    sm = SequenceMatcher(None, [_key(e) for e in a], [_key(e) for e in b], autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        # events line up by kind; a replaced run (other kinds) is dropped and inserted
        pairs = list(zip(range(i1, i2), range(j1, j2))) if op == "equal" else []
        for i, j in pairs:
            ea, eb = a[i], b[j]
            if ea.text == eb.text and ea.name == eb.name:
                skipped += 1
                pending = (pending + [f"  #{j} {_cut(eb.kind, width - 6)}"])[-_CONTEXT:]
                continue
            changed += 1
            head = f"~ #{j} {ea.kind}" + (f" -> {eb.kind}" if eb.kind != ea.kind else "")
            if ea.obj is not None and eb.obj is not None:
                lines = list(field_changes(ea.obj, eb.obj))
            else:
                lines = [f"~ {_show(ea.text)} -> {_show(eb.text)}"]
            if ea.name != eb.name:
                lines.insert(0, f"~ event: {ea.name} -> {eb.name}")
            block(head, lines or ["(same data, reformatted)"])
        n = len(pairs)
        for i in range(i1 + n, i2) if op in ("delete", "replace") else ():
            dropped += 1
            block(f"- dropped original #{i} {a[i].kind}{_summary(a[i])}", [])
        for j in range(j1 + n, j2) if op in ("insert", "replace") else ():
            inserted += 1
            block(f"+ #{j} {b[j].kind}{_summary(b[j])} (inserted)", [])
    if not (changed or inserted or dropped):
        return f"(no change: {len(b)} events passed through as they came)\n"
    head = f"streamfix: {changed} of {len(a)} events changed, {inserted} inserted, {dropped} dropped ({len(b)} sent)"
    if skipped:
        out.append(f"  ... {skipped} unchanged event{'s' if skipped != 1 else ''}")
    return "\n".join([head, *out]) + "\n"


def body_diff(original: bytes, repaired: bytes, sse: bool) -> str:
    """What streamfix changed in a body: :func:`stream_diff` for an event stream, a unified
    diff of the indented JSON otherwise (this view, and ``streamfix demo``)."""
    if sse:
        return stream_diff(original, repaired)
    diff = list(difflib.unified_diff(_json_lines(original), _json_lines(repaired), "original", "repaired", lineterm=""))
    return "\n".join(diff) + "\n" if diff else "(no change)\n"


# --- the views ---------------------------------------------------------------------------


def _is_sse(metadata: Metadata) -> bool:
    return (metadata.content_type or "").startswith("text/event-stream")


class SseEvents(Contentview):
    name = "SSE events"
    syntax_highlight = "yaml"

    def prettify(self, data: bytes, metadata: Metadata) -> str:
        return "".join(f"# {i}\n{line}\n" for i, line in enumerate(event_lines(data)))

    def render_priority(self, data: bytes, metadata: Metadata) -> float:
        return 2 if _is_sse(metadata) else -1


class SseEventsIndented(Contentview):
    name = "SSE events indented"
    syntax_highlight = "yaml"

    def prettify(self, data: bytes, metadata: Metadata) -> str:
        out = []
        for i, e in enumerate(events(data)):
            out.append(f"# {i} {e.kind}" if e.obj is not None else f"# {i}")
            if e.obj is not None:
                out.append(orjson.dumps(e.obj, option=orjson.OPT_INDENT_2).decode())
            else:
                out.append(e.text)
        return "\n".join(out) + "\n"

    def render_priority(self, data: bytes, metadata: Metadata) -> float:
        return -1  # picked by hand


class StreamfixDiff(Contentview):
    name = "streamfix diff"
    syntax_highlight = "none"

    def prettify(self, data: bytes, metadata: Metadata) -> str:
        f = metadata.flow
        original = f.metadata.get(ORIGINAL) if f is not None else None
        if original is None:
            return NO_ORIGINAL
        return _said(f) + body_diff(original, data, _is_sse(metadata))

    def render_priority(self, data: bytes, metadata: Metadata) -> float:
        f = metadata.flow
        if f is None or metadata.http_message is not getattr(f, "response", None):
            return -1
        original = f.metadata.get(ORIGINAL)
        return 2.5 if original is not None and original != data else -1


SAID_WIDTH = 72
"""The comment's lines above a diff are wrapped to this: mitmweb's flow panel beside the
list shows about 76 columns (tests/e2e/test_browser.py measures that nothing scrolls)."""


def _said(f) -> str:
    """The flow's comment (the receipt: verdict, why, notes; an early end) above its diff, so
    the view says why beside what changed."""
    text = (getattr(f, "comment", "") or "").strip()
    if not text:
        return ""
    lines = [w for line in text.splitlines() for w in textwrap.wrap(line, SAID_WIDTH, subsequent_indent="  ") or [""]]
    return "\n".join(lines) + "\n\n"


contentviews.add(SseEvents)
contentviews.add(SseEventsIndented)
contentviews.add(StreamfixDiff)
