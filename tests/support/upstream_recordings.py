"""The upstream-leg matrix's captures (``recordings/real-cpa-upstream/``): written from a live
run of the real builds, replayed in CI through both legs (tests/support/upstream_replay.py).

    python tests/support/upstream_recordings.py capture [VERSION...]   (STREAMFIX_CPA_BIN_DIR set)

Each cell of tests/support/upstream_matrix.py (provider alias x client API x turn kind, streamed,
and the non-streaming JSON cells, ``<api>-json``) is one conversation of its own
(:func:`conv_of`) run three times at once on one build: raw (the CPA whose providers are
``proxy-url: direct``), through both legs of a sidecar (the live outcome a replay must
give), and straight to a second CPA whose ``proxy-url`` is the upstream listener of a
second sidecar: that turn is the capture, both of its legs. Its client request carries a
``[cell:...]`` marker (the fake ignores it) by which the provider calls it caused are found
among the fake's requests::

    recordings/real-cpa-upstream/<version>/build.json        version, commit, binary sha256
    recordings/real-cpa-upstream/<version>/<alias>/<api>[-json]/<turn>/
      recording.json  the cell; the client's request; CPA's response status and headers;
                      the provider calls CPA made through the sidecar's upstream listener
                      (method, path, request body, headers but credentials, status,
                      response headers, how the body ended, its file); the live outcomes
                      raw, of the captured bytes and through both legs (upstream_matrix.truth)
      response.body   CPA's client response, byte for byte, as CPA sent it (before the
                      sidecar; a WebSocket turn: its messages, one SSE event each)
    recordings/real-cpa-upstream/<version>/<alias>/provider/<turn>.<sha256:12>.body
                      a provider body, byte for byte (named by its hash: shared by the
                      cells whose calls got the same bytes)

No credential is written: the client key and the fake's keys and tokens travel in headers
that are not kept (only :data:`standins.fake_upstreams.KEPT_HEADERS`), a ``key=`` query
parameter is dropped, and tests/addons/test_real_cpa_upstream_replay.py checks every file.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import aiohttp
import orjson
import realcpa
import upstream_matrix as um
from standins import fake_upstreams as fu

ROOT = HERE.parents[1] / "recordings" / "real-cpa-upstream"
VERSIONS = ("v7.2.89", "v7.2.140")
COMMITS = {
    "v7.2.89": "7c61e982e490f028d295d69e22e372b29cd2db8c",
    "v7.2.140": "a7e3596b7e351d800e58ed29529fbca3d1c18737",
}
FIRST_CONV = 1000
"""Cell ``i`` of :func:`todo` is conversation ``FIRST_CONV + i`` in all three of its turns (its
own provider text and usage, input tokens 1000 + conv), so that no two cells, running at
once, have the same output (a cut body's content digest is a whole one's of the same text)."""
RESPONSE_HEADERS = frozenset({"content-type"})
SECRETS = (
    realcpa.CLIENT_KEY,
    "Bearer",
    "fake-antigravity-token",
    "fake-refresh",
    *(f"fake-{key}" for key, _ in um.PROVIDERS.values()),
    "fake-openai-",
)
"""Every credential the live stacks use (the client's key, the fake's keys and tokens)."""
ATTEMPTS = 5
"""Runs of a cell whose capture disagreed with its build's measured raw table or whose
live run through both legs was not the provider's truth (CPA is not deterministic
everywhere: v7.2.89's Responses WebSocket races a provider's error against its own end)."""


def build_info(version: str) -> dict[str, Any]:
    exe = realcpa.binary(version)
    assert exe is not None
    return {
        "version": version,
        "commit": COMMITS[version],
        "binary_sha256": hashlib.sha256(exe.read_bytes()).hexdigest(),
        "repository": "https://github.com/router-for-me/CLIProxyAPI",
    }


def api_dir(api: str, stream: bool = True) -> str:
    """A cell's API as its directory names it: ``chat``, or ``chat-json`` for a non-streaming request."""
    return api if stream else f"{api}-json"


def tag(alias: str, api: str, kind: str, stream: bool = True) -> str:
    return f"{alias}/{api_dir(api, stream)}/{kind}"


def _path(path_qs: str) -> str:
    """A provider call's path with any ``key=`` query parameter dropped."""
    path, _, q = path_qs.partition("?")
    kept = [(k, v) for k, v in parse_qsl(q, keep_blank_values=True) if k.lower() != "key"]
    return path + ("?" + urlencode(kept) if kept else "")


def todo() -> list[tuple[str, str, str, bool]]:
    """Every cell a capture holds, (alias, API, turn, streamed), in conversation order."""
    return [(*c, True) for c in um.cells()] + [(*c, False) for c in um.json_cells()]


def conv_of(alias: str, api: str, kind: str, stream: bool = True) -> int:
    return FIRST_CONV + todo().index((alias, api, kind, stream))


async def capture_turn(
    session: aiohttp.ClientSession, base: str, api: str, alias: str, kind: str, stream: bool, conv: int
) -> dict[str, Any]:
    """The captured turn straight to CPA: status, headers, body as CPA sent it."""
    path, body = um.request(api, alias, kind, conv, stream, tag=tag(alias, api, kind, stream))
    if api == "responses_ws":
        body.pop("stream")
        create = {**body, "type": "response.create"}
        msgs: list[bytes] = []
        ended = "terminal"
        try:
            async with session.ws_connect(base.replace("http://", "ws://") + path, headers={"authorization": um.HEADERS["authorization"]},
                                          timeout=aiohttp.ClientWSTimeout(ws_close=um.TIMEOUT)) as ws:  # fmt: skip
                await ws.send_str(orjson.dumps(create).decode())
                while True:
                    msg = await asyncio.wait_for(ws.receive(), um.TIMEOUT)
                    if msg.type != aiohttp.WSMsgType.TEXT:
                        ended = "closed"
                        break
                    msgs.append(msg.data.encode())
                    if orjson.loads(msg.data).get("type") in ("response.completed", "response.incomplete",
                                                              "response.failed", "error"):  # fmt: skip
                        break
        except (TimeoutError, aiohttp.ClientError) as e:
            ended = f"websocket: {type(e).__name__}"
        return {"path": path, "body": body, "status": 101, "headers": {"content-type": "text/event-stream"},
                "data": ws_sse_of(msgs), "ended": ended, "transport": "websocket"}  # fmt: skip
    async with session.post(base + path, data=orjson.dumps(body), headers=um.HEADERS,
                            timeout=aiohttp.ClientTimeout(total=um.TIMEOUT)) as r:  # fmt: skip
        data, ended = b"", "complete"
        try:
            async for chunk in r.content.iter_any():
                data += chunk
        except aiohttp.ClientPayloadError:
            ended = "broken"
        headers = {k.lower(): v for k, v in r.headers.items() if k.lower() in RESPONSE_HEADERS}
        return {"path": path, "body": body, "status": r.status, "headers": headers, "data": data, "ended": ended,
                "transport": "http"}  # fmt: skip


def ws_sse_of(msgs: list[bytes]) -> bytes:
    import upstream_replay

    return upstream_replay.ws_sse(msgs)


def client_view(c: dict[str, Any]) -> bytes:
    """The captured bytes as the client-side ``truth`` reads them (a broken HTTP body as
    upstream_matrix.turn marks it)."""
    return c["data"] + (b"\n<connection broken>" if c["ended"] == "broken" else b"")


def calls_of(fake: fu.FakeUpstreams, alias: str, api: str, kind: str, stream: bool = True) -> list[dict[str, Any]]:
    """The fake's records of the calls the capture turn caused, taken out of its log (the
    next run of the cell, another attempt or another build, finds only its own)."""
    marker = f"[cell:{tag(alias, api, kind, stream)}]".encode()
    out = [r for r in list(fake.requests) if marker in r.get("raw", b"")]
    for r in out:
        fake.requests.remove(r)
    return out


def label(api: str, status: int, body: bytes, alias: str, kind: str, conv: int, stream: bool = True) -> str:
    return um.cell(um.truth(api, status, body, stream), um.expected(alias, kind, conv))


def raw_table(version: str, stream: bool = True) -> dict[str, str]:
    """The build's measured raw labels (upstream_matrix's RAW_* tables, or RAW_JSON_* for JSON)."""
    return um.raw_expected(version) if stream else um.raw_json_expected(version)


def legs_label(key: str, stream: bool = True) -> str:
    """What a cell through both legs must be: the provider's truth (``ok``), but the JSON
    bodies CPA itself makes invalid (upstream_matrix.JSON_BROKEN)."""
    return "ok" if stream else um.JSON_BROKEN.get(key, "ok")


async def run_cell(
    st: um.Stack, cap: um.Stack, fakes: fu.Running, alias: str, api: str, kind: str, stream: bool = True
) -> dict[str, Any]:
    """The cell's three turns at once, all of its conversation (:func:`conv_of`: the same
    provider text and usage): raw and through both legs on ``st``, and the capture straight to
    ``cap``'s CPA behind ``cap``'s own sidecar (its upstream leg: a sidecar of its own, so that
    the capture's calls, which no client flow there claims, never meet the cell's client flow
    in ``st``'s correlator)."""
    conv = conv_of(alias, api, kind, stream)
    async with aiohttp.ClientSession() as s:
        (rs, rb), (ls, lb), cap = await asyncio.gather(
            um.turn(s, st.url(False), api, alias, kind, conv, stream),
            # its own marker: linked to its own call by prompt, never to another API's of the same turn
            um.turn(s, st.url(True), api, alias, kind, conv, stream, tag="legs " + tag(alias, api, kind, stream)),
            capture_turn(s, cap.cpa_legs, api, alias, kind, stream, conv),
        )
    await asyncio.sleep(0.05)  # the fake's record of a cut body is complete once its close ran
    return {"raw": um.truth(api, rs, rb, stream), "legs": um.truth(api, ls, lb, stream), "capture": cap,
            "calls": calls_of(fakes.fake, alias, api, kind, stream), "stream": stream, "conv": conv}  # fmt: skip


def _meta(version: str, build: dict, alias: str, api: str, kind: str, got: dict[str, Any]) -> dict[str, Any]:
    cap = got["capture"]
    ws = cap["transport"] == "websocket"
    stream = got["stream"]
    return {
        "description": f"real CPA {version}, {um.PROVIDERS[alias][0]} path ({alias}), client {api_dir(api, stream)}, "
        f"turn {kind}: "
        "the client's request, CPA's provider calls through the sidecar's upstream listener, CPA's client response",
        "source": f"captured from the real CPA {version} (commit {build['commit']}) in front of "
        "tests/support/standins/fake_upstreams.py by `python tests/support/upstream_recordings.py capture`",
        "cell": {"version": version, "alias": alias, "api": api, "turn": kind, "stream": stream},
        "cpa": {k: build[k] for k in ("version", "commit", "binary_sha256")},
        "conv": got["conv"],
        "request": {
            "method": "GET" if ws else "POST",
            "path": cap["path"],
            "headers": {"content-type": "application/json"},
            "body": cap["body"],
        },
        "response": {"status": cap["status"], "headers": cap["headers"]},
        "transport": cap["transport"],
        "ended": cap["ended"],
        "calls": [],
        "outcome": {
            "raw": got["raw"],
            "captured": um.truth(api, cap["status"], client_view(cap), stream),
            "legs": got["legs"],
        },
        "started_at": int(time.time()),
    }


def write_cell(root: Path, version: str, build: dict, alias: str, api: str, kind: str, got: dict[str, Any]) -> Path:
    d = root / version / alias / api_dir(api, got["stream"]) / kind
    d.mkdir(parents=True, exist_ok=True)
    meta = _meta(version, build, alias, api, kind, got)
    for r in got["calls"]:
        body = r.get("response", b"")
        sha = hashlib.sha256(body).hexdigest()[:12]
        f = root / version / alias / "provider" / f"{kind}.{sha}.body"
        if not f.exists():
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(body)
        meta["calls"].append({
            "provider": um.PROVIDER_OF[alias], "method": "POST", "path": _path(r["path"]), "headers": r["headers"],
            "body": r["body"], "status": r.get("status"),
            "response_headers": {k.lower(): v for k, v in (r.get("response_headers") or {}).items()
                                 if k.lower() in RESPONSE_HEADERS},
            "ended": r.get("ended"), "response_file": str(f.relative_to(d, walk_up=True)),
        })  # fmt: skip
    (d / "response.body").write_bytes(got["capture"]["data"])
    (d / "recording.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
    return d


def _good(version: str, alias: str, api: str, kind: str, got: dict[str, Any]) -> bool:
    """The capture shows its build's measured raw defect, and the live run through both
    legs heard the provider's truth."""
    key = f"{alias}/{api}/{kind}"
    stream = got["stream"]
    want = um.normalized({key: raw_table(version, stream).get(key, "ok")})[key]
    cap = got["capture"]
    captured = label(api, cap["status"], client_view(cap), alias, kind, got["conv"], stream)
    legs = um.cell(got["legs"], um.expected(alias, kind, got["conv"]))
    return um.normalized({key: captured})[key] == want and legs == legs_label(key, stream) and bool(got["calls"])


async def _capture_cells(st: um.Stack, cap: um.Stack, fakes: fu.Running, root: Path, build: dict, parallel: int) -> int:
    v = st.version
    sem = asyncio.Semaphore(parallel)
    done = 0

    async def one(alias: str, api: str, kind: str, stream: bool) -> None:
        nonlocal done
        async with sem:
            for attempt in range(1, ATTEMPTS + 1):
                got = await run_cell(st, cap, fakes, alias, api, kind, stream)
                if _good(v, alias, api, kind, got):
                    break
                print(f"{v} {alias} {api_dir(api, stream)} {kind}: attempt {attempt} not as measured: captured "
                      f"{got['capture']['status']} {got['capture']['ended']}, through both legs {got['legs']}",
                      file=sys.stderr)  # fmt: skip
        write_cell(root, v, build, alias, api, kind, got)
        done += 1
        print(f"{done:4} {v:9} {alias:16} {api_dir(api, stream):14} {kind:10} calls {len(got['calls'])}", flush=True)

    await asyncio.gather(*(one(*c) for c in todo()))
    return done


def capture(versions: list[str], root: Path = ROOT, parallel: int = 6) -> int:
    """Every cell of each build, written anew (a build's old captures go first)."""
    fakes = fu.Running()
    done = 0
    try:
        for v in versions:
            build = build_info(v)
            fakes.fake.requests.clear()
            if (root / v).exists():
                shutil.rmtree(root / v)
            (root / v).mkdir(parents=True)
            (root / v / "build.json").write_text(json.dumps(build, indent=1) + "\n")
            d = Path(tempfile.mkdtemp(prefix="upcapture-"))
            st = um.start(v, fakes, d / "conf")
            try:
                cap = um.start(v, fakes, d / "capture-conf")
            except BaseException:
                st.stop()
                raise
            try:
                done += asyncio.run(_capture_cells(st, cap, fakes, root, build, parallel))
            finally:
                st.stop()
                cap.stop()
                shutil.rmtree(d, ignore_errors=True)
    finally:
        fakes.stop()
    print(f"{done} cells written to {root}")
    return 0


# --- reading them back ----------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    dir: Path
    meta: dict[str, Any]

    @property
    def key(self) -> tuple[str, str, str, str]:
        """(version, alias, API as its directory names it, turn)."""
        c = self.meta["cell"]
        return c["version"], c["alias"], api_dir(c["api"], c["stream"]), c["turn"]

    @property
    def api(self) -> str:
        return self.meta["cell"]["api"]

    @property
    def stream(self) -> bool:
        return self.meta["cell"]["stream"]

    @property
    def body(self) -> bytes:
        return (self.dir / "response.body").read_bytes()

    @property
    def calls(self) -> list[tuple[dict[str, Any], bytes]]:
        return [(c, (self.dir / c["response_file"]).read_bytes()) for c in self.meta["calls"]]


def expected_keys(versions=VERSIONS) -> set[tuple[str, str, str, str]]:
    """Every cell a whole capture holds: the streaming matrix and the JSON one, per build."""
    return {(v, a, api_dir(api, s), k) for v in versions for s, cs in ((True, um.cells()), (False, um.json_cells()))
            for a, api, k in cs}  # fmt: skip


def load(root: Path = ROOT) -> list[Cell]:
    return [Cell(p.parent, json.loads(p.read_text())) for p in sorted(root.glob("*/*/*/*/recording.json"))]


def builds(root: Path = ROOT) -> dict[str, dict[str, Any]]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(root.glob("*/build.json"))}


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "capture":
        print(__doc__, file=sys.stderr)
        return 2
    versions = argv[1:] or list(VERSIONS)
    missing = [v for v in versions if realcpa.binary(v) is None]
    if missing:
        print("; ".join(realcpa.missing_reason(v) for v in missing), file=sys.stderr)
        return 2
    return capture(versions)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
