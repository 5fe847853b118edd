"""Fuzz targets over the SSE parser and every repairer, with atheris (libFuzzer).

    python tests/support/fuzz.py [-max_total_time=600] [corpus dir]    # `just fuzz`
    python tests/support/fuzz.py path/to/crash-file                   # re-run one input

Each target takes the fuzzer's bytes and reads its choices from them (:class:`Draw`), so
the same targets also run under hypothesis (``tests/wire/test_fuzz.py``, a bounded budget in
CI) and replay saved inputs (``tests/support/fuzz_regressions/``, every crash kept as a test).

The streams are structure-aware: events are drawn from the recordings of the API (buggy
and clean), then some are mutated (a JSON value replaced by null, a number, a string,
a list; a key deleted; the event cut short; random bytes in its place), line ends may
turn into CRLF or CR, and the body is cut into random chunks. What must hold:

- parser: the events' raw bytes (plus the rest at close) are the input, byte for byte,
  and any chunking gives the same events as one chunk;
- repairer (through :class:`wire.stream.StreamRepair`, as the addon runs it): no exception
  escapes and the repairer does not fail over to passthrough; the output is valid
  framing (every event but a trailing unterminated one ends with a blank line, and there
  is one only if the input had one); any chunking gives the same output as one chunk;
- a spec-correct (clean) recording, chunked anyhow, comes out byte-identical.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

if __name__ == "__main__":  # coverage for libFuzzer: instrument the protocol core only
    import atheris

    with atheris.instrument_imports(include=["streamfix.wire"]):
        import streamfix.wire.apis
        import streamfix.wire.chat
        import streamfix.wire.gemini
        import streamfix.wire.messages
        import streamfix.wire.responses
        import streamfix.wire.sse
        import streamfix.wire.stream  # noqa: F401

import orjson
from streamfix.wire.apis import stream_repairer
from streamfix.wire.rules import FlowContext, Rules
from streamfix.wire.sse import SseParser
from streamfix.wire.stream import StreamRepair
from streamfix.wire.verdict import Verdict

from streamfix.recordings import all_recordings

APIS = ("responses", "chat", "messages", "gemini")
_RECS = [r for r in all_recordings() if r.streaming]
POOL: dict[str, list[bytes]] = {api: [] for api in APIS}
"""Per API: the raw events of its streaming recordings."""
REQUESTS: dict[str, dict] = {}
CLEAN: list[tuple[str, bytes, dict]] = []
for _r in _RECS:
    _p = SseParser()
    POOL[_r.api] += [e.raw for e in _p.feed(_r.body) + _p.close()]
    REQUESTS.setdefault(_r.api, _r.request.get("body") or {})
    if _r.kind == "clean":
        CLEAN.append((_r.api, _r.body, _r.request.get("body") or {}))
_VALUES = (None, 0, -1, 2**63, 1.5, "", "x" * 300, [], {}, True, [1, "a"], {"type": "function_call"})


class Draw:
    """Choices read from a byte string; past its end every choice is 0."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.i = 0

    def int(self, n: int) -> int:
        """0 <= value < n (two bytes' worth)."""
        if n <= 1:
            return 0
        b = self.data[self.i : self.i + 2]
        self.i += 2
        return int.from_bytes(b.ljust(2, b"\0"), "big") % n

    def bytes(self, n: int) -> bytes:
        b = self.data[self.i : self.i + n]
        self.i += n
        return b


def _mutate_json(d: Draw, raw: bytes) -> bytes:
    p = SseParser()
    evs = p.feed(raw) + p.close()
    if not evs or evs[0].data is None:
        return raw
    try:
        obj = orjson.loads(evs[0].data)
    except orjson.JSONDecodeError:
        return raw
    # walk down a few levels, then replace or delete one key
    node = obj
    for _ in range(d.int(4)):
        kids = [v for v in (node.values() if isinstance(node, dict) else node if isinstance(node, list) else [])]
        kids = [k for k in kids if isinstance(k, (dict, list)) and k]
        if not kids:
            break
        node = kids[d.int(len(kids))]
    if isinstance(node, dict) and node:
        key = list(node)[d.int(len(node))]
        if d.int(3) == 0:
            del node[key]
        else:
            node[key] = _VALUES[d.int(len(_VALUES))]
    elif isinstance(node, list) and node:
        node[d.int(len(node))] = _VALUES[d.int(len(_VALUES))]
    return evs[0].with_data(orjson.dumps(obj))


def stream(d: Draw, api: str) -> bytes:
    """A stream for ``api`` built from its recordings' events, some of them mutated."""
    pool = POOL[api]
    out = []
    for _ in range(1 + d.int(40)):
        raw = pool[d.int(len(pool))]
        how = d.int(16)
        if how == 0:
            raw = raw[: d.int(len(raw))]  # cut short
        elif how == 1:
            raw = d.bytes(d.int(64))  # noise
        elif how in (2, 3, 4):
            raw = _mutate_json(d, raw)
        out.append(raw)
    body = b"".join(out)
    eol = d.int(8)
    if eol == 0:
        body = body.replace(b"\n", b"\r\n")
    elif eol == 1:
        body = body.replace(b"\n", b"\r")
    return body


def chunks(d: Draw, body: bytes) -> list[bytes]:
    """``body`` cut at up to 16 random places."""
    cuts = sorted({d.int(len(body) + 1) for _ in range(d.int(17))})
    out, prev = [], 0
    for c in [*cuts, len(body)]:
        if c > prev:
            out.append(body[prev:c])
            prev = c
    return out


def _parse(pieces: list[bytes]) -> list:
    p = SseParser()
    evs = []
    for c in pieces:
        evs += p.feed(c)
    return evs + p.close()


def target_parser(data: bytes) -> None:
    d = Draw(data)
    body = stream(d, APIS[d.int(len(APIS))]) if d.int(2) else d.bytes(d.int(4096))
    evs = _parse(chunks(d, body))
    assert b"".join(e.raw for e in evs) == body, "the parser lost or changed bytes"
    one = _parse([body])
    assert [(e.raw, e.fields, e.complete) for e in evs] == [(e.raw, e.fields, e.complete) for e in one], (
        "chunking changed the events"
    )


def _repair(api: str, request: dict, pieces: list[bytes]) -> tuple[bytes, StreamRepair]:
    verdict = Verdict()
    verdict.request(request)
    model = request.get("model")
    fctx = FlowContext(model=model if isinstance(model, str) else None, started_at=1700000000, request=request)
    s = StreamRepair(stream_repairer(api, Rules(), fctx, verdict))
    out = [s.feed(c) for c in pieces]
    out.append(s.close())
    return b"".join(out), s


def target_repair(data: bytes) -> None:
    d = Draw(data)
    api = APIS[d.int(len(APIS))]
    body = stream(d, api)
    request = REQUESTS.get(api, {})
    out, s = _repair(api, request, chunks(d, body))
    assert s.error is None, f"the {api} repairer failed over to passthrough: {s.error!r}"
    evs = _parse([out])
    assert all(e.complete for e in evs[:-1]), "an unterminated event before the end"
    if evs and not evs[-1].complete:
        assert _parse([body])[-1:] and not _parse([body])[-1].complete, "an unterminated event the input did not have"
    one, _ = _repair(api, request, [body])
    assert out == one, "chunking changed the repaired output"


def target_clean(data: bytes) -> None:
    d = Draw(data)
    if not CLEAN:
        return
    api, body, request = CLEAN[d.int(len(CLEAN))]
    out, s = _repair(api, request, chunks(d, body))
    assert s.error is None, s.error
    assert out == body, f"a clean {api} stream was changed"


TARGETS = {"parser": target_parser, "repair": target_repair, "clean": target_clean}


def target_all(data: bytes) -> None:
    """All targets; the first byte picks which."""
    if not data:
        return
    list(TARGETS.values())[data[0] % len(TARGETS)](data[1:])


def main() -> None:
    import atheris

    atheris.Setup(sys.argv, target_all)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
