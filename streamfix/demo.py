"""Show what streamfix does: each recording raw from the upstream and repaired through mitmdump.

    python -m streamfix.demo [NAME ...]

Starts the replay upstream and mitmdump with the addon (both on free 127.0.0.1 ports),
requests every recording (or the named ones) both ways, and prints, per recording, what
changed event by event, as mitmweb's "streamfix diff" view shows it (``~ #N`` a changed
event with one line per changed JSON field, ``+ #N ... (inserted)``, ``- dropped original
#N``), and the receipts mitmdump logged.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import httpx

from streamfix.addons.sseview import body_diff

from . import procs
from .cli import prog
from .recordings import Recording, all_recordings, load


def fetch(client: httpx.Client, base: str, rec: Recording) -> tuple[bool, bytes]:
    """(is it an event stream, the body) of the recording's request sent to ``base``."""
    r = rec.request
    path = f"/rec/{rec.name}{r['path']}"
    with client.stream(
        r.get("method", "POST"),
        base + path,
        content=rec.request_body,
        headers={"content-type": "application/json", "x-streamfix-delay-ms": "0"},
    ) as resp:
        return resp.headers.get("content-type", "").startswith("text/event-stream"), resp.read()


def clip(s: str, n: int = 160) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=prog("demo"), description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", help="recordings to show (default: all)")
    a = ap.parse_args(argv)
    recs = [load(n) for n in a.names] if a.names else all_recordings()

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "mitmdump.log"
        replay, upstream = procs.start_replay()
        mitm, port = procs.start_mitmdump(
            upstream, confdir=Path(tmp), log=log, args=["--set", "termlog_verbosity=info"]
        )
        with procs.running(mitm, replay), httpx.Client(timeout=30) as client:
            for rec in recs:
                sse, raw = fetch(client, upstream, rec)
                _, fixed = fetch(client, f"http://127.0.0.1:{port}", rec)
                print(f"\n=== {rec.name} ({rec.api}, {rec.kind}): {rec.meta.get('description', '')}")
                if raw == fixed:
                    print("    unchanged, byte for byte")
                    continue
                for line in body_diff(raw, fixed, sse).splitlines():  # mitmweb's "streamfix diff", event by event
                    print("    " + line)
        receipts = [ln for ln in log.read_text(errors="replace").splitlines() if "streamfix" in ln]
    print("\n=== mitmdump said:")
    for ln in receipts:
        print("    " + clip(ln, 200))
    return 0


if __name__ == "__main__":
    sys.exit(main())
