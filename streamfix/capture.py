"""Turn a saved flow into a recording: a reproducible case anyone can replay.

    python -m streamfix.capture FLOWFILE NAME [--index N | --id FLOW_ID] [--out DIR]

FLOWFILE is a mitmproxy flow file (``-w`` of the sidecar, mitmweb's "Save"). The client
flow it holds (an LLM API path; ``--index``/``--id`` picks one when there are several,
upstream-leg flows are never taken) becomes ``DIR/NAME/`` in the format of
``streamfix/recordings.py``:

* ``response.body``: the body the gateway sent. For a flow streamfix repaired, that is
  the original it kept (run the sidecar with ``--keep-bodies`` or ``--web``: without it a
  streamed flow has no body at all); a flow from a plain mitmproxy is taken as it is.
* ``expected.body``: what streamfix made of it, when the flow holds both. It is a starting
  point, not a verdict: check it by hand (the format's rule for expected bodies).
* ``recording.json``: the request trimmed to what a repair reads (model, output caps,
  tools, tool choice, stream flags; no prompts, no messages), request headers reduced to
  content-type, accept, user-agent and API version headers, the query's secrets redacted
  (``wire/redact.py``), the response status and content type, the request's time
  (``started_at``, which ``created_at`` repairs use), and where it came from.

No secret leaves the flow: authorization, API keys and cookies are not copied, and the
written files are checked for the flow's credentials before the command succeeds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from streamfix.wire import redact
from streamfix.wire.apis import api_for_path

from . import CHECKOUT
from .cli import prog
from .recordings import ROOT

KEEP_REQUEST = (
    "model", "stream", "stream_options", "max_output_tokens", "max_completion_tokens", "max_tokens",
    "generationConfig", "generation_config", "tools", "tool_choice", "parallel_tool_calls",
    "reasoning", "thinking", "include", "store", "text", "response_format",
)  # fmt: skip
"""Request body fields a recording keeps (what repairs and the replay upstream read)."""
KEEP_REQUEST_HEADERS = ("content-type", "accept", "user-agent", "anthropic-version", "anthropic-beta", "openai-beta")
DROP_RESPONSE_HEADERS = frozenset(
    {"set-cookie", "content-length", "transfer-encoding", "content-encoding", "connection", "keep-alive", "date"}
)


class CaptureError(Exception):
    """Why a flow cannot become a recording (the message is for the user)."""


def client_flows(flows: list) -> list:
    """The flows a recording can be made of: HTTP requests to an LLM API path with a response."""
    from mitmproxy import http

    return [
        f for f in flows
        if isinstance(f, http.HTTPFlow) and f.response is not None and api_for_path(f.request.path) is not None
    ]  # fmt: skip


def trim_request(body: Any) -> dict[str, Any]:
    return {k: body[k] for k in KEEP_REQUEST if isinstance(body, dict) and k in body}


def _body(flow) -> tuple[bytes, bytes | None]:
    """(the gateway's body, streamfix's repaired body or None)."""
    resp = flow.response
    repaired = resp.get_content(strict=False) if resp.raw_content is not None else None
    original = flow.metadata.get("streamfix.original")
    if isinstance(original, bytes):
        return original, repaired if repaired != original else None
    if repaired is None:
        raise CaptureError(
            "the flow has no response body: mitmproxy does not keep streamed bodies. Save it with -w "
            "(scripts/sidecar -- -w FILE, or mitmdump -s addons/repair.py -w FILE keeps them), or run the sidecar "
            "with --keep-bodies (or --web), or mitmdump with --set streamfix_keep_bodies=true, and save again."
        )
    if flow.marked == ":wrench:" or (flow.comment or "").startswith("streamfix ["):
        raise CaptureError(
            "streamfix repaired this flow but kept no original body: its body is the repaired one. "
            "Save it again with --set streamfix_keep_bodies=true."
        )
    return repaired, None


def _secrets(flow) -> list[str]:
    """The flow's credentials (to check that none was written)."""
    out = []
    for name in redact.REQUEST_HEADERS:
        for v in flow.request.headers.get_all(name):
            if not redact.is_redacted(v):
                out += [v, v.split(" ", 1)[-1]]
    q = redact.query_secret(flow.request.path)
    if q and not redact.is_redacted(q):
        out.append(q)
    return [s for s in out if len(s) >= 6]


def capture(flow, name: str, out: Path, source: str, force: bool = False) -> Path:
    """Write ``out/name/`` from one client flow; returns the directory."""
    if not name or "/" in name or name.startswith("."):
        raise CaptureError(f"bad recording name {name!r}")
    api = api_for_path(flow.request.path)
    if api is None:
        raise CaptureError(f"{flow.request.path.split('?', 1)[0]} is not an LLM API path streamfix knows")
    body, repaired = _body(flow)
    try:
        req_body = json.loads(flow.request.get_content(strict=False) or b"{}")
    except ValueError as e:
        raise CaptureError("the request body is not JSON") from e
    d = out / name
    if d.exists() and not force:
        raise CaptureError(f"{d} exists (--force replaces it)")
    resp = flow.response
    meta: dict[str, Any] = {
        "description": f"captured with streamfix.capture from {source}; "
        + ("expected.body is streamfix's repair at capture time: check it by hand" if repaired is not None
           else "streamfix changed nothing in it at capture time"),
        "api": api,
        "kind": "buggy" if repaired is not None else "clean",
        "source": f"{source}, flow {flow.id}, captured {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
        "started_at": int(flow.request.timestamp_start),
        "request": {
            "method": flow.request.method,
            "path": redact.redact_query(flow.request.path),
            "headers": {k: v for k in KEEP_REQUEST_HEADERS if (v := flow.request.headers.get(k)) is not None},
            "body": trim_request(req_body),
        },
        "response": {
            "status": resp.status_code,
            "headers": {k.lower(): v for k, v in resp.headers.items() if k.lower() not in DROP_RESPONSE_HEADERS},
        },
    }  # fmt: skip
    files = {"recording.json": (json.dumps(meta, indent=2, ensure_ascii=False) + "\n").encode(), "response.body": body}
    if repaired is not None:
        files["expected.body"] = repaired
    leaked = [s for s in _secrets(flow) for data in files.values() if s.encode() in data]
    if leaked:  # e.g. a key echoed in the body: refuse rather than hand it over
        raise CaptureError("a credential of the flow appears in the response body; not written")
    d.mkdir(parents=True, exist_ok=True)
    for fname in ("recording.json", "response.body", "expected.body"):
        p = d / fname
        if fname in files:
            p.write_bytes(files[fname])
        elif p.exists():
            p.unlink()
    return d


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog=prog("capture"),
        description="Turn a saved flow (a client's LLM API call) into a recordings/ entry, secrets left out.",
    )
    ap.add_argument("flowfile", type=Path, help="a mitmproxy flow file (-w, mitmweb's Save)")
    ap.add_argument("name", help="the recording's name (a directory under --out)")
    pick = ap.add_mutually_exclusive_group()
    pick.add_argument("--index", type=int, help="which client flow, counting from 0 (when the file has several)")
    pick.add_argument("--id", help="which client flow, by mitmproxy flow id")
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT if CHECKOUT is not None else Path("recordings"),
        help="where recordings live (default: %(default)s)",
    )
    ap.add_argument("--force", action="store_true", help="replace an existing recording of that name")
    a = ap.parse_args(argv)

    from mitmproxy import io
    from mitmproxy.exceptions import FlowReadException

    try:
        with a.flowfile.open("rb") as f:
            flows = client_flows(list(io.FlowReader(f).stream()))
    except (OSError, FlowReadException) as e:
        print(f"streamfix.capture: cannot read {a.flowfile}: {e}", file=sys.stderr)
        return 2
    if a.id is not None:
        chosen = [f for f in flows if f.id == a.id]
    elif a.index is not None:
        chosen = flows[a.index : a.index + 1] if 0 <= a.index < len(flows) else []
    else:
        chosen = flows
    if len(chosen) != 1:
        print(f"streamfix.capture: {len(flows)} client flows in {a.flowfile}; pick one with --index or --id:",
              file=sys.stderr)  # fmt: skip
        for i, f in enumerate(flows):
            print(f"  {i}  {f.id}  {f.request.method} {f.request.path.split('?', 1)[0]}  "
                  f"{f.response.status_code}  {(f.comment or '').splitlines()[0] if f.comment else ''}",
                  file=sys.stderr)  # fmt: skip
        return 2
    try:
        d = capture(chosen[0], a.name, a.out, a.flowfile.name, a.force)
    except CaptureError as e:
        print(f"streamfix.capture: {e}", file=sys.stderr)
        return 1
    print(f"wrote {d}/ ({'buggy, with expected.body to check by hand' if (d / 'expected.body').exists() else 'clean'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
