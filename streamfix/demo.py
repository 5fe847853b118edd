"""Show what streamfix does: each recording raw from the upstream and repaired through mitmdump.

    python -m streamfix.demo [NAME ...]

Starts the replay upstream and mitmdump with the addon (both on free 127.0.0.1 ports),
requests every recording (or the named ones) both ways, and prints, per recording, the
events that differ (``-`` raw, ``+`` repaired) and the receipts mitmdump logged.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import tempfile
from pathlib import Path

import httpx

from streamfix.wire.sse import SseParser

from . import procs
from .cli import prog
from .recordings import Recording, all_recordings, load


def events(body: bytes) -> list[str]:
    p = SseParser()
    out = []
    for e in p.feed(body) + p.close():
        if e.data is not None:
            name = f"{e.event}: " if e.event else ""
            out.append(name + e.data.decode("utf-8", "replace"))
    return out or body.decode("utf-8", "replace").splitlines()


def fetch(client: httpx.Client, base: str, rec: Recording) -> bytes:
    r = rec.request
    path = f"/rec/{rec.name}{r['path']}"
    with client.stream(
        r.get("method", "POST"),
        base + path,
        content=rec.request_body,
        headers={"content-type": "application/json", "x-streamfix-delay-ms": "0"},
    ) as resp:
        return resp.read()


def clip(s: str, n: int = 160) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def inline(a: str, b: str, context: int = 40) -> str:
    """One changed event as ``…context[-old-]{+new+}context…`` around each difference."""
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            seg = a[i1:i2]
            out.append(seg if len(seg) <= 2 * context else seg[:context] + " … " + seg[-context:])
        else:
            out.append(("[-" + a[i1:i2] + "-]" if i2 > i1 else "") + ("{+" + b[j1:j2] + "+}" if j2 > j1 else ""))
    text = "".join(out)
    return text if out[0].startswith(("[-", "{+")) else "…" + text[max(0, len(out[0]) - context) :]


def diff_events(raw: list[str], fixed: list[str]) -> list[str]:
    """Events dropped (-), inserted (+) and changed (~, with the change inline)."""
    lines = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, raw, fixed, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        if op == "replace" and i2 - i1 == j2 - j1:
            lines += ["~ " + clip(inline(a, b), 400) for a, b in zip(raw[i1:i2], fixed[j1:j2])]
            continue
        lines += ["- " + clip(a) for a in raw[i1:i2]]
        lines += ["+ " + clip(b) for b in fixed[j1:j2]]
    return lines


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
                raw = fetch(client, upstream, rec)
                fixed = fetch(client, f"http://127.0.0.1:{port}", rec)
                print(f"\n=== {rec.name} ({rec.api}, {rec.kind}): {rec.meta.get('description', '')}")
                if raw == fixed:
                    print("    unchanged, byte for byte")
                    continue
                for line in diff_events(events(raw), events(fixed)):
                    print("    " + line)
        receipts = [ln for ln in log.read_text(errors="replace").splitlines() if "streamfix" in ln]
    print("\n=== mitmdump said:")
    for ln in receipts:
        print("    " + clip(ln, 200))
    return 0


if __name__ == "__main__":
    sys.exit(main())
