"""Saved client flows built from recordings, with a credential in every place one can hide (the capture tests)."""

from __future__ import annotations

from pathlib import Path

import orjson
from mitmproxy import http
from mitmproxy.test import tflow

from streamfix.recordings import load

KEY = "sk-capture-SECRET-7777"


GKEY = "AIza-capture-SECRET-8888"


def flow_of(name: str, original: bytes | None, repaired: bytes | None, headers: dict | None = None, path=None):
    rec = load(name)
    body = dict(rec.request["body"])
    req = http.Request.make("POST", "http://127.0.0.1:8317" + (path or rec.request["path"]), orjson.dumps(body),
                            {"content-type": "application/json", "authorization": f"Bearer {KEY}",
                             "cookie": f"s={KEY}", **(headers or {})})  # fmt: skip
    req.timestamp_start = 1789012345.6
    resp = http.Response.make(200, b"", {**rec.headers, "set-cookie": f"s={KEY}", "content-length": "1"})
    f = tflow.tflow(req=req, resp=resp)
    f.response.raw_content = repaired
    if original is not None:
        f.metadata["streamfix.original"] = original
    return f


def all_bytes(d: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(d.iterdir()))
