"""Driving addons/repair.py in process as mitmproxy's HTTP layer would: a flow, its hooks, its reads."""

import orjson
from mitmproxy import http
from mitmproxy.test import tflow


def make_flow(path="/v1/responses", body=None, ctype="text/event-stream", resp_body=None, headers=()):
    req = http.Request.make(
        "POST",
        "http://127.0.0.1:8317" + path,
        orjson.dumps(body if body is not None else {"model": "m", "stream": True, "max_output_tokens": 50}),
        {"content-type": "application/json", **dict(headers)},
    )
    resp = http.Response.make(200, b"", {"content-type": ctype})
    resp.headers["content-length"] = "999"
    f = tflow.tflow(req=req, resp=resp)
    f.response.raw_content = resp_body  # None: not yet read, as in responseheaders of a live flow
    return f


def drive(stream, chunks):
    """What mitmproxy's HTTP layer does: one call per read, then b"" at the end."""
    out = []
    for c in [*chunks, b""]:
        r = stream(c)
        assert isinstance(r, list) and b"" not in r, "never an empty chunk (HTTP/1 terminator)"
        out += r
    return b"".join(out)


def hooks(addon, f):
    addon.request(f)
    addon.responseheaders(f)
