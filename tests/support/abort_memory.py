"""Memory after client aborts: streamfix's mitmdump against mitmproxy's own passthrough.

    .venv/bin/python tests/support/abort_memory.py            # RSS after 200 aborts and per 1,000 more
    .venv/bin/python tests/support/abort_memory.py --garbage  # what only a full collection frees

A measurement, not a test (no timed or sized assertion): one mitmdump (``-s
addons/repair.py``, or with ``--passthrough`` none, ``stream_large_bodies=1`` so it
streams too) in reverse mode in front of a local upstream that answers every
``/v1/responses`` with a Responses stream and then stalls; clients abort round-robin at
every point (in the request, before the response headers, mid-body) with a FIN or an RST.
RSS is read from the process (tests/support/pressure_probe.py) after a warm-up, after 200 aborts
and after each 1,000 more, with the collector as mitmproxy runs it. ``--garbage`` starts
mitmdump with the cycle collector off and reports, after the aborts, which objects of
streamfix's own types and how many flows only a full collection could free.
"""

from __future__ import annotations

import argparse
import itertools
import json
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import httpx
from support import REPAIR_ADDON, ROOT, Proc, child_env, mitmdump_args

PROBE = HERE / "pressure_probe.py"
BODY = (ROOT / "recordings" / "responses-devin-toolcall" / "response.body").read_bytes()
EVENTS = [e + b"\n\n" for e in BODY.split(b"\n\n") if e]
REQUEST = json.dumps({"model": "m", "stream": True, "input": "hi"}).encode()
KINDS = [(point, how) for point in ("request", "headers", "body") for how in ("fin", "rst")]


def upstream() -> int:
    """``/headers/...``: no answer for 2 s; anything else: 5 events, then a 2 s stall."""
    srv = socket.create_server(("127.0.0.1", 0))

    def handle(c: socket.socket) -> None:
        with c:
            try:
                data = b""
                while b"\r\n\r\n" not in data:
                    got = c.recv(65536)
                    if not got:
                        return
                    data += got
                if data.split(b" ", 2)[1].startswith(b"/headers/"):
                    time.sleep(2)
                    return
                c.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
                for ev in EVENTS[:5]:
                    c.sendall(b"%x\r\n%s\r\n" % (len(ev), ev))
                time.sleep(2)
            except OSError:
                pass

    def serve() -> None:
        while True:
            c, _ = srv.accept()
            threading.Thread(target=handle, args=(c,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1]


def abort(port: int, point: str, how: str) -> None:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        msg = (
            b"POST /%s/v1/responses HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%s" % (point.encode(), len(REQUEST), REQUEST)
        )
        if point == "request":
            s.sendall(msg[:-10])  # the request body is not complete
            time.sleep(0.02)
        elif point == "headers":
            s.sendall(msg)
            time.sleep(0.05)
        else:
            s.sendall(msg)
            got = b""
            while got.count(b"\n\n") < 3:
                got += s.recv(65536)
        if how == "rst":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    finally:
        s.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passthrough", action="store_true", help="mitmproxy alone (no addon), streaming")
    ap.add_argument("--garbage", action="store_true", help="collector off; report what only a full collection frees")
    ap.add_argument("--more", type=int, default=2, help="rounds of 1,000 aborts after the first 200 (default 2)")
    a = ap.parse_args(argv)
    up = upstream()
    conf = Path(tempfile.mkdtemp(prefix="abort-memory-"))
    addons = (PROBE,) if a.passthrough else (REPAIR_ADDON, PROBE)
    extra = ["--set", "stream_large_bodies=1"] if a.passthrough else []
    cmd = mitmdump_args(conf, "--mode", f"reverse:http://127.0.0.1:{up}@127.0.0.1:0", *extra, addons=addons)
    proc = Proc(cmd, env=child_env(**({"STREAMFIX_GC_OFF": "1"} if a.garbage else {})))
    try:
        port = int(proc.wait_for(r"listening at 127\.0\.0\.1:(\d+)").group(1))
        base = f"http://127.0.0.1:{port}/__streamfix/state"

        def state(query: str = "") -> dict:
            return httpx.get(base + query, timeout=60, trust_env=False).json()

        def run(n: int) -> None:
            for i in range(n):
                abort(port, *KINDS[i % len(KINDS)])
            time.sleep(2.5)  # the upstream's stalls end, the last flows with them

        run(24)
        if a.garbage:
            state("?garbage=1")  # what startup and the warm-up left
            run(200)
            print(json.dumps({"passthrough": a.passthrough, "aborts": 200, **state("?garbage=1")}))
            return 0
        rss = [state()["rss_kb"]]
        run(200)
        rss.append(state()["rss_kb"])
        for _ in range(a.more):
            run(1000)
            rss.append(state()["rss_kb"])
        after = state("?collect=1")
        print(
            json.dumps(
                {
                    "passthrough": a.passthrough,
                    "rss_kb": rss,
                    "after_200_mb": round((rss[1] - rss[0]) / 1024, 2),
                    "per_1000_mb": [round((y - x) / 1024, 2) for x, y in itertools.pairwise(rss[1:])],
                    "after_full_collection_kb": after["rss_kb"],
                    "addon_flows": after["flows"],
                    "live_flows": after["live_flows"],
                }
            )
        )
        return 0
    finally:
        proc.stop()


if __name__ == "__main__":
    sys.exit(main())
