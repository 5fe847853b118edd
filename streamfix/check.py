"""Check saved LLM streams against the stream contract (wire/contract.py), offline.

    python -m streamfix.check FILE...

Each FILE is one of:

- a mitmproxy flow file (``.flow``, e.g. from ``mitmdump -w`` or mitmweb's "Save"): every
  flow whose path is a known API (``/responses``, ``/chat/completions``, ``/messages``,
  ``:streamGenerateContent``/``:generateContent``) is checked, an event stream against the
  stream contract, a JSON (non-streamed) body against the same rules a whole body can
  break; the request's output cap and client are evidence (a truncation the response
  calls a normal end, Codex's own events);
- a HAR export (``.har``, from a browser or mitmweb): the same, for every entry;
- a saved JSON response body (a ``{...}`` file that is no HAR export): checked as one;
- anything else: one saved SSE response body; its API comes from ``--api`` or, failing
  that, from the events themselves (from its fields, for a JSON body).

Prints each stream's violations (rule, event number, short reason; never content). A
flow streamfix repaired holds two bodies when they were kept (``mitmdump -s
addons/repair.py -w FILE`` keeps them, as does ``streamfix_keep_bodies``): the one the
client got (the flow's body, checked by default) and the gateway's original (metadata
``streamfix.original``): ``--original`` checks the gateway's instead, for a bug report
against it, ``--both`` checks both, each labelled. A flow whose response was streamed
without keeping its body (mitmproxy's default) has no body to check: it is reported as
``no body saved``, with how to save one, not as a violation.

Exit status: 0 every stream correct; 1 violations found; 2 a file cannot be read or a
body's API cannot be told; 3 no violations, but some flow had no body saved (nothing
was checked for it). For a gateway's CI, or a bug report against one.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from streamfix.wire.apis import api_for_path
from streamfix.wire.contract import RULES, StreamChecker, check_json, guess_api, guess_json_api
from streamfix.wire.foreign import codex_client

from .cli import prog

SSE = "text/event-stream"
ORIGINAL = "streamfix.original"
"""Flow metadata: the body as the gateway sent it (addons/flowstream.py)."""
NO_BODY = 3
"""Exit status: nothing wrong found, but a flow had no body saved."""
HOW_TO_SAVE = (
    "save flows with `mitmdump -s addons/repair.py -w FILE` (keeps streamed bodies) or, in mitmweb, "
    "--set streamfix_keep_bodies=true (scripts/sidecar --web)"
)


@dataclass
class Stream:
    label: str
    api: str | None
    body: bytes | None
    """The body the client got; None: not saved (a streamed response whose body was not kept)."""
    original: bytes | None = None
    """The gateway's body when streamfix kept it (``streamfix.original``), else None."""
    repaired: bool = False
    """streamfix changed the flow (so without ``original`` its gateway body is lost)."""
    json: bool = False
    """A non-streamed (JSON) body, checked with :func:`wire.contract.check_json`."""
    request: dict | None = None
    """The client's request body, when the file has it (its output cap is evidence)."""
    client: str | None = None
    """``"codex"`` when Codex sent the request (its own events are then no violation)."""
    skipped: str | None = None
    """Why a flow of a known API is not checked (neither an event stream nor JSON)."""


class Unreadable(Exception):
    pass


def _flows(path: Path) -> Iterator[Stream]:
    from mitmproxy import http, io
    from mitmproxy.exceptions import FlowReadException

    try:
        with path.open("rb") as fp:
            for k, f in enumerate(io.FlowReader(fp).stream()):
                if not isinstance(f, http.HTTPFlow) or f.response is None:
                    continue
                api = api_for_path(f.request.path)
                if api is None:
                    continue
                ctype = f.response.headers.get("content-type", "").lower()
                label = f"{path}#{k} {f.request.method} {f.request.path.split('?', 1)[0]}"
                if not ctype.startswith(SSE) and "json" not in ctype:
                    yield Stream(label, api, None, skipped=f"content-type {ctype or 'none'!r}: neither an event "
                                 "stream nor JSON")  # fmt: skip
                    continue
                try:
                    # None: mitmproxy streamed the response and kept no body
                    body = f.response.get_content(strict=True)
                except ValueError as e:
                    raise Unreadable(f"flow {k}: cannot decode the response body ({e})") from e
                original = f.metadata.get(ORIGINAL)
                repaired = f.marked == ":wrench:"  # what streamfix marks a flow it changed with
                h = f.request.headers
                yield Stream(label, api, body, original if isinstance(original, bytes) else None, repaired,
                             json=not ctype.startswith(SSE), request=_json_object(f.request.get_content(strict=False)),
                             client="codex" if codex_client(h.get("originator"), h.get("user-agent")) else None)  # fmt: skip
    except FlowReadException as e:
        raise Unreadable(f"not a readable flow file ({e})") from e


def _json_object(raw: bytes | None) -> dict | None:
    try:
        obj = json.loads(raw or b"")
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _har(path: Path, har: dict) -> Iterator[Stream]:
    try:
        entries = har["log"]["entries"]
    except (KeyError, TypeError) as e:
        raise Unreadable(f"not a HAR file ({e})") from e
    for k, entry in enumerate(entries):
        req, resp = entry.get("request") or {}, entry.get("response") or {}
        url = req.get("url", "")
        p = "/" + url.split("://", 1)[-1].split("/", 1)[-1] if "://" in url else url
        api = api_for_path(p)
        content = resp.get("content") or {}
        mime = str(content.get("mimeType", "")).lower()
        if api is None or not (mime.startswith(SSE) or "json" in mime):
            continue
        text = content.get("text")
        if text is None:  # a streamed response exported without its body
            body = None
        else:
            body = base64.b64decode(text) if content.get("encoding") == "base64" else text.encode("utf-8")
        headers = {str(h.get("name", "")).lower(): str(h.get("value", "")) for h in req.get("headers") or []}
        post = (req.get("postData") or {}).get("text")
        yield Stream(f"{path}#{k} {req.get('method', '?')} {p.split('?', 1)[0]}", api, body,
                     json=not mime.startswith(SSE), request=_json_object(post.encode() if isinstance(post, str) else None),
                     client="codex" if codex_client(headers.get("originator"), headers.get("user-agent")) else None)  # fmt: skip


def streams(path: Path, api: str | None) -> list[Stream]:
    """The streams a file holds (``api`` overrides what the file says)."""
    try:
        head = path.open("rb").read(1)
    except OSError as e:
        raise Unreadable(str(e)) from e
    if path.suffix == ".har" or (head == b"{" and path.suffix != ".sse"):
        try:
            doc = json.loads(path.read_bytes())
        except ValueError as e:
            raise Unreadable(f"not JSON ({e})") from e
        if isinstance(doc, dict) and "log" in doc:
            found = list(_har(path, doc))
        elif path.suffix == ".har":
            raise Unreadable("not a HAR file (no log object)")
        else:  # a saved JSON response body
            return [Stream(str(path), api or guess_json_api(doc), path.read_bytes(), json=True)]
    elif path.suffix == ".flow" or head.isdigit():  # tnetstring: length first
        found = list(_flows(path))
    else:
        body = path.read_bytes()
        return [Stream(str(path), api or guess_api(body), body)]
    if api is not None:
        for s in found:
            s.api = api
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog=prog("check"),
        description=__doc__.split("\n\n", 1)[0],
        epilog="Exit status: 0 every stream correct, 1 violations found, 2 a file unreadable or of unknown API, "
        "3 no violations but a flow had no body saved. --rules lists the rules.",
    )
    ap.add_argument("files", nargs="*", type=Path, metavar="FILE", help="a .flow file, a .har file or a saved SSE body")
    ap.add_argument(
        "--api",
        choices=["responses", "chat", "messages", "gemini"],
        help="the API of the streams (default: from the request path, or guessed from a bare body)",
    )
    bodies = ap.add_mutually_exclusive_group()
    bodies.add_argument(
        "--original",
        action="store_true",
        help="check the gateway's original body of each flow (kept by streamfix as streamfix.original) "
        "instead of the body the client got: for a bug report against the gateway",
    )
    bodies.add_argument("--both", action="store_true", help="check both bodies of each flow, each labelled")
    ap.add_argument("--rules", action="store_true", help="list the contract's rules and exit")
    ap.add_argument("-q", "--quiet", action="store_true", help="print only streams with violations")
    a = ap.parse_args(argv)
    if a.rules:
        for name, text in RULES.items():
            print(f"{name:28} {text}")
        return 0
    if not a.files:
        ap.error("no FILE given")
    which: Literal["client", "gateway", "both"] = "gateway" if a.original else "both" if a.both else "client"
    statuses: set[int] = set()
    for path in a.files:
        try:
            found = streams(path, a.api)
        except Unreadable as e:
            print(f"{path}: {e}", file=sys.stderr)
            statuses.add(2)
            continue
        if not found:
            print(f"{path}: no LLM event stream in it")
        for s in found:
            if s.api is None:
                print(f"{s.label}: cannot tell the API of this body; use --api", file=sys.stderr)
                statuses.add(2)
                continue
            for tag, body in _bodies(s, which):
                statuses.add(_report(s, tag, body, a.quiet))
    for status in (2, 1, NO_BODY):  # the worst first: unreadable, violations, nothing saved
        if status in statuses:
            return status
    return 0


def _bodies(s: Stream, which: str) -> list[tuple[str, bytes | None]]:
    """(label suffix, body or None: not saved) for each body ``which`` asks to check."""
    if which == "client":
        return [("", s.body)]
    if s.original is not None:
        gateway: bytes | None = s.original
    elif s.repaired:
        gateway = None  # streamfix changed the body and did not keep the gateway's
    else:
        gateway = s.body  # not changed by streamfix: the body is the gateway's
    if which == "gateway":
        return [(" gateway's original", gateway)]
    return [(" gateway's original", gateway), (" as the client got it", s.body)]


def _report(s: Stream, tag: str, body: bytes | None, quiet: bool) -> int:
    """Check one body and print what was found; returns its exit status."""
    if s.skipped is not None:
        if not quiet:
            print(f"{s.label} [{s.api}]: not checked: {s.skipped}")
        return 0
    if body is None:
        if s.body is None:
            what = "the response was streamed and its body not kept"
        else:
            what = "streamfix repaired it without keeping the gateway's original"
        print(f"{s.label} [{s.api}]{tag}: no body saved ({what}); nothing checked: {HOW_TO_SAVE}")
        return NO_BODY
    assert s.api is not None
    if s.json:
        vs, dropped, what = check_json(s.api, body, s.request), 0, "a JSON body"
    else:
        c = StreamChecker(s.api, client=s.client, request=s.request)
        c.feed(body)
        vs, dropped = c.close(), c.dropped
        what = f"{c.events} events"
    total = len(vs) + dropped
    if not total:
        if not quiet:
            print(f"{s.label} [{s.api}]{tag}: ok, {what}")
        return 0
    print(f"{s.label} [{s.api}]{tag}: {total} violation{'s' if total != 1 else ''}")
    for v in vs:
        print(f"  {v}")
    if dropped:
        print(f"  ... {dropped} more")
    return 1


if __name__ == "__main__":
    sys.exit(main())
