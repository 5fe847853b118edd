"""Recordings: captured client-leg exchanges, in a plain-file format people can read.

One directory per recording under ``recordings/``::

    recordings/<name>/
      recording.json   what it is, the request, the response status and headers, pacing
      response.body    the response body exactly as the gateway sent it (SSE or JSON)
      expected.body    the repaired body, written and checked by hand (buggy ones only;
                       a clean recording's expected output is its response.body)

``recording.json`` keys: ``description``; ``api`` (``responses``, ``chat``, ``messages``,
``gemini``); ``kind`` (``buggy`` or ``clean``); ``source`` (where it came from);
``request`` {``method``, ``path``, ``headers``, ``body`` (JSON object)}; ``response``
{``status``, ``headers``}; optional ``pacing`` {``delay_ms``: pause between events when
replayed, ``chunk``: ``event`` (one write per event, the default) or ``bytes:N``}.

The same directory serves the tests, the replay upstream (``python -m streamfix.replay``)
and ``mitmdump -nr`` (``python -m streamfix.recordings to-flow NAME OUT.flow``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import CHECKOUT
from .cli import prog

ROOT = CHECKOUT / "recordings" if CHECKOUT is not None else Path(__file__).resolve().parent / "_recordings"
"""The recordings: a checkout's recordings/, or the copy installed with the package."""


@dataclass(frozen=True)
class Recording:
    name: str
    path: Path
    meta: dict[str, Any]
    body: bytes

    @property
    def api(self) -> str:
        return self.meta["api"]

    @property
    def kind(self) -> str:
        return self.meta["kind"]

    @property
    def request(self) -> dict[str, Any]:
        return self.meta["request"]

    @property
    def request_body(self) -> bytes:
        return json.dumps(self.request.get("body", {})).encode()

    @property
    def status(self) -> int:
        return int(self.meta.get("response", {}).get("status", 200))

    @property
    def expected_status(self) -> int:
        """The status the client gets after the repair (``expected_status``; the recorded one
        unless a repair answers a hidden failure with an error status)."""
        return int(self.meta.get("expected_status", self.status))

    @property
    def headers(self) -> dict[str, str]:
        return dict(self.meta.get("response", {}).get("headers", {}))

    @property
    def streaming(self) -> bool:
        return self.headers.get("content-type", "").startswith("text/event-stream")

    @property
    def expected(self) -> bytes:
        """The hand-checked repaired body (the body itself for a clean recording)."""
        p = self.path / "expected.body"
        return p.read_bytes() if p.exists() else self.body

    @property
    def delay(self) -> float:
        return float(self.meta.get("pacing", {}).get("delay_ms", 20)) / 1000


def load(name: str, root: Path = ROOT) -> Recording:
    p = root / name
    meta = json.loads((p / "recording.json").read_text())
    return Recording(name, p, meta, (p / "response.body").read_bytes())


def all_recordings(root: Path = ROOT) -> list[Recording]:
    return [load(p.name, root) for p in sorted(root.iterdir()) if (p / "recording.json").exists()]


CLIENT_MODE = "reverse:http://127.0.0.1:8317@127.0.0.1:8318"
"""The listener a recording's flow says it came through: the sidecar's client leg."""


def to_flow(rec: Recording, out: Path) -> None:
    """Write the recording as a mitmproxy ``.flow`` file (for ``mitmdump -nr``, mitmweb).

    The flow is a client-leg flow as the sidecar sees one (it came through a reverse
    listener), so the repair addon takes it for the client leg even when the process
    also has a regular listener (the upstream leg's).
    """
    from mitmproxy import http, io
    from mitmproxy.proxy.mode_specs import ProxyMode
    from mitmproxy.test import tflow

    r = rec.request
    url = "http://127.0.0.1:8317" + r["path"]
    req = http.Request.make(r.get("method", "POST"), url, rec.request_body, r.get("headers", {}))
    if "started_at" in rec.meta:  # when the exchange happened: what created_at repairs use
        req.timestamp_start = float(rec.meta["started_at"])
    resp = http.Response.make(rec.status, rec.body, rec.headers)
    f = tflow.tflow(req=req, resp=resp)
    f.client_conn.proxy_mode = ProxyMode.parse(CLIENT_MODE)
    f.comment = f"streamfix recording {rec.name}"
    with out.open("wb") as fp:
        io.FlowWriter(fp).add(f)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=prog("recordings"), description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="list the recordings")
    tf = sub.add_parser("to-flow", help="write one recording as a .flow file for mitmdump -nr")
    tf.add_argument("name")
    tf.add_argument("out", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "list":
        for rec in all_recordings():
            print(f"{rec.name:40} {rec.api:10} {rec.kind:6} {rec.meta.get('description', '')}")
    else:
        to_flow(load(a.name), a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
