"""Check saved LLM streams against the stream contract (wire/contract.py), offline.

    python -m streamfix.check FILE...

Each FILE is one of:

- a mitmproxy flow file (``.flow``, e.g. from ``mitmdump -w`` or mitmweb's "Save"): every
  flow whose path is a known API (``/responses``, ``/chat/completions``, ``/messages``,
  ``:streamGenerateContent``) and whose response is an event stream is checked;
- a HAR export (``.har``, from a browser or mitmweb): the same, for every entry;
- anything else: one saved SSE response body; its API comes from ``--api`` or, failing
  that, from the events themselves.

Prints each stream's violations (rule, event number, short reason; never content) and
exits 1 when there is any, 0 when every stream is correct, 2 when a file cannot be read
or its API cannot be told. For a gateway's CI, or a bug report against one.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from wire.apis import api_for_path
from wire.contract import RULES, StreamChecker, guess_api

SSE = "text/event-stream"


@dataclass
class Stream:
    label: str
    api: str | None
    body: bytes


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
                if api is None or not f.response.headers.get("content-type", "").lower().startswith(SSE):
                    continue
                try:
                    body = f.response.get_content(strict=True) or b""
                except ValueError as e:
                    raise Unreadable(f"flow {k}: cannot decode the response body ({e})") from e
                yield Stream(f"{path}#{k} {f.request.method} {f.request.path.split('?', 1)[0]}", api, body)
    except FlowReadException as e:
        raise Unreadable(f"not a readable flow file ({e})") from e


def _har(path: Path) -> Iterator[Stream]:
    try:
        har = json.loads(path.read_text("utf-8"))
        entries = har["log"]["entries"]
    except (ValueError, KeyError, TypeError) as e:
        raise Unreadable(f"not a HAR file ({e})") from e
    for k, e in enumerate(entries):
        req, resp = e.get("request") or {}, e.get("response") or {}
        url = req.get("url", "")
        p = "/" + url.split("://", 1)[-1].split("/", 1)[-1] if "://" in url else url
        api = api_for_path(p)
        content = resp.get("content") or {}
        if api is None or not str(content.get("mimeType", "")).lower().startswith(SSE):
            continue
        text = content.get("text") or ""
        body = base64.b64decode(text) if content.get("encoding") == "base64" else text.encode("utf-8")
        yield Stream(f"{path}#{k} {req.get('method', '?')} {p.split('?', 1)[0]}", api, body)


def streams(path: Path, api: str | None) -> list[Stream]:
    """The streams a file holds (``api`` overrides what the file says)."""
    try:
        head = path.open("rb").read(1)
    except OSError as e:
        raise Unreadable(str(e)) from e
    if path.suffix == ".har" or (head == b"{" and path.suffix != ".sse"):
        found = list(_har(path))
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
        prog="python -m streamfix.check",
        description=__doc__.split("\n\n", 1)[0],
        epilog="Exit status: 0 every stream correct, 1 violations found, 2 a file unreadable or of unknown API. "
        "--rules lists the rules.",
    )
    ap.add_argument("files", nargs="*", type=Path, metavar="FILE", help="a .flow file, a .har file or a saved SSE body")
    ap.add_argument(
        "--api",
        choices=["responses", "chat", "messages", "gemini"],
        help="the API of the streams (default: from the request path, or guessed from a bare body)",
    )
    ap.add_argument("--rules", action="store_true", help="list the contract's rules and exit")
    ap.add_argument("-q", "--quiet", action="store_true", help="print only streams with violations")
    a = ap.parse_args(argv)
    if a.rules:
        for name, text in RULES.items():
            print(f"{name:28} {text}")
        return 0
    if not a.files:
        ap.error("no FILE given")
    status = 0
    for path in a.files:
        try:
            found = streams(path, a.api)
        except Unreadable as e:
            print(f"{path}: {e}", file=sys.stderr)
            status = 2
            continue
        if not found:
            print(f"{path}: no LLM event stream in it")
        for s in found:
            if s.api is None:
                print(f"{s.label}: cannot tell the API of this body; use --api", file=sys.stderr)
                status = 2
                continue
            c = StreamChecker(s.api)
            c.feed(s.body)
            vs = c.close()
            total = len(vs) + c.dropped
            if not total:
                if not a.quiet:
                    print(f"{s.label} [{s.api}]: ok, {c.events} events")
                continue
            status = max(status, 1)
            print(f"{s.label} [{s.api}]: {total} violation{'s' if total != 1 else ''}")
            for v in vs:
                print(f"  {v}")
            if c.dropped:
                print(f"  ... {c.dropped} more")
    return status


if __name__ == "__main__":
    sys.exit(main())
