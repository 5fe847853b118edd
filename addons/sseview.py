"""mitmweb content views for SSE flows: "SSE events" and "streamfix diff".

    mitmweb -s addons/repair.py -s addons/sseview.py --set streamfix_keep_bodies=true

"SSE events" shows one block per event, its name and its JSON data on one line.
"streamfix diff" shows what streamfix changed in a flow (per SSE event, or per JSON
line): the original body is kept in ``flow.metadata["streamfix.original"]`` when
``streamfix_keep_bodies`` is on, and the flow's body is the repaired one.
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

import orjson
from mitmproxy import contentviews
from mitmproxy.contentviews import Contentview, Metadata

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from wire.sse import SseParser  # noqa: E402

ORIGINAL = "streamfix.original"


def event_lines(body: bytes) -> list[str]:
    """One line per event: ``name: data`` (JSON re-dumped compactly), comments as ``: text``."""
    p = SseParser()
    out = []
    for e in p.feed(body) + p.close():
        data = e.data
        if data is None:
            text = "".join(f":{v.decode('utf-8', 'replace')}" for k, v in e.fields if k == b"")
            if text:
                out.append(text)
            continue
        try:
            shown = orjson.dumps(orjson.loads(data)).decode()
        except orjson.JSONDecodeError:
            shown = data.decode("utf-8", "replace")
        out.append(f"{e.event}: {shown}" if e.event else shown)
    return out


def _json_lines(body: bytes) -> list[str]:
    """A JSON body, indented, one line per value (so a diff points at the field)."""
    try:
        return orjson.dumps(orjson.loads(body), option=orjson.OPT_INDENT_2).decode().splitlines()
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace").splitlines()


def _is_sse(metadata: Metadata) -> bool:
    return (metadata.content_type or "").startswith("text/event-stream")


class SseEvents(Contentview):
    name = "SSE events"
    syntax_highlight = "yaml"

    def prettify(self, data: bytes, metadata: Metadata) -> str:
        return "".join(f"# {i}\n{line}\n" for i, line in enumerate(event_lines(data)))

    def render_priority(self, data: bytes, metadata: Metadata) -> float:
        return 2 if _is_sse(metadata) else -1


class StreamfixDiff(Contentview):
    name = "streamfix diff"
    syntax_highlight = "none"

    def prettify(self, data: bytes, metadata: Metadata) -> str:
        f = metadata.flow
        original = f.metadata.get(ORIGINAL) if f is not None else None
        if original is None:
            raise ValueError("no original body kept (run with --set streamfix_keep_bodies=true)")
        lines = event_lines if _is_sse(metadata) else _json_lines
        diff = list(difflib.unified_diff(lines(original), lines(data), "original", "repaired", lineterm=""))
        return "\n".join(diff) + "\n" if diff else "(no change)\n"

    def render_priority(self, data: bytes, metadata: Metadata) -> float:
        f = metadata.flow
        return 2.5 if f is not None and ORIGINAL in f.metadata and metadata.http_message is getattr(f, "response", None) else -1


contentviews.add(SseEvents)
contentviews.add(StreamfixDiff)
