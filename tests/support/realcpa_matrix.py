"""The real-CPA matrix: every provider path x client API x turn kind, on real CPA builds.

A *cell* is (CPA version, provider path, client API, turn): the fake provider of that path
(tests/support/standins/fake_providers.py) plays the turn's script, a client asks CPA for it on
that API, and what CPA sends back is the cell's raw stream. The same request through the
sidecar (real ``mitmdump -s addons/repair.py`` in reverse mode in front of CPA, the client
leg alone) is the cell's repaired stream.

- provider paths (:data:`PATHS`): ``claude`` (``claude-api-key``), ``interactions``
  (``interactions-api-key``), ``openai`` (``openai-compatibility``), ``gemini``
  (``gemini-api-key``, AI Studio), ``vertex`` (``vertex-api-key``), ``codex``
  (``codex-api-key`` with a ``base-url``), each pointed at the local fake;
- client APIs (:data:`APIS`): ``responses`` (SSE), ``responses-ws`` (the same over
  CPA's Responses WebSocket, ``GET /v1/responses``), ``chat``, ``messages``, ``gemini``
  (``/v1beta/models/{model}:streamGenerateContent?alt=sse``);
- turns (``fake_providers.TURNS``), where the provider has a word for it
  (``fake_providers.unsupported`` says why not, else).

``python tests/support/realcpa_matrix.py capture`` runs every cell of every build found
(``STREAMFIX_CPA_BIN_DIR``) and writes ``recordings/real-cpa/`` (:mod:`matrix_recordings`
reads it back); ``python tests/support/realcpa_matrix.py docs`` writes docs/real-cpa.md's matrix
from those recordings. ``tests/addons/test_real_cpa_matrix.py`` replays them in CI.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import orjson
import realcpa
from standins.fake_providers import TURN_CAPS, TURNS, unsupported

PATHS = ("claude", "interactions", "openai", "gemini", "vertex", "antigravity", "codex")
APIS = ("responses", "responses-ws", "chat", "messages", "gemini")
VERSIONS = ("v7.2.89", "v7.2.140")
COMMITS = realcpa.COMMITS
HTTP_PATHS = {
    "responses": "/v1/responses",
    "chat": "/v1/chat/completions",
    "messages": "/v1/messages",
    "gemini": f"/v1beta/models/{realcpa.MODEL}:streamGenerateContent?alt=sse",
}
WIRE_API = {
    "responses": "responses",
    "responses-ws": "responses",
    "chat": "chat",
    "messages": "messages",
    "gemini": "gemini",
}
"""A client API -> the API its stream speaks (wire/contract.py's names)."""
TOOL = (
    "exec_command",
    "Runs a shell command",
    {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
)
TIMEOUT = 20.0
WS_WAIT = 3.0
"""Seconds a WebSocket turn may stay silent before it counts as left open."""


def cells(versions=VERSIONS, paths=PATHS, apis=APIS, turns=TURNS) -> Iterator[tuple[str, str, str, str]]:
    """Every (version, path, api, turn) the matrix has (turns a path's provider cannot say left out)."""
    for v in versions:
        for p in paths:
            for a in apis:
                for t in turns:
                    if unsupported(realcpa.PROVIDER_API[p], t) is None:
                        yield v, p, a, t


def absent(path: str) -> dict[str, str]:
    """The turns a path cannot play, with why (for the docs and the coverage test)."""
    return {t: why for t in TURNS if (why := unsupported(realcpa.PROVIDER_API[path], t)) is not None}


def request_body(api: str, turn: str, nonce: str) -> dict[str, Any]:
    """The client's request of a cell: the turn named in its text (``[script:NAME]``), one
    tool, the turn's output cap (``fake_providers.TURN_CAPS``) in the API's spelling."""
    text = f"Do the task ({nonce}). [script:{turn}]"
    cap = TURN_CAPS.get(turn)
    name, desc, params = TOOL
    if api in ("responses", "responses-ws"):
        body: dict[str, Any] = {
            "model": realcpa.MODEL,
            "stream": True,
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}],
            "tools": [{"type": "function", "name": name, "description": desc, "parameters": params}],
        }
        if cap:
            body["max_output_tokens"] = cap
        if api == "responses-ws":
            body.pop("stream")
            body = {"type": "response.create", **body}
    elif api == "chat":
        body = {
            "model": realcpa.MODEL,
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": text}],
            "tools": [{"type": "function", "function": {"name": name, "description": desc, "parameters": params}}],
        }
        if cap:
            body["max_tokens"] = cap
    elif api == "messages":
        body = {
            "model": realcpa.MODEL,
            "stream": True,
            "max_tokens": cap or 4096,
            "messages": [{"role": "user", "content": text}],
            "tools": [{"name": name, "description": desc, "input_schema": params}],
        }
    elif api == "gemini":
        body = {
            "contents": [{"role": "user", "parts": [{"text": text}]}],
            "tools": [{"functionDeclarations": [{"name": name, "description": desc, "parameters": params}]}],
        }
        if cap:
            body["generationConfig"] = {"maxOutputTokens": cap}
    else:
        raise ValueError(api)
    return body


HEADERS = {"authorization": f"Bearer {realcpa.CLIENT_KEY}", "content-type": "application/json"}
"""What every cell's client sends (the key is the tests' own, never a real one; recordings
keep only content-type)."""


@dataclass
class Got:
    """What a client got of one cell."""

    status: int
    headers: dict[str, str]
    body: bytes
    """The raw stream (SSE bytes; a WebSocket turn's messages framed as SSE, see :func:`ws_sse`)."""
    ended: str
    """How the transport ended: ``clean``, ``reset`` (the body was cut: an error while reading
    it), for a WebSocket ``terminal`` (a terminal message came), ``closed`` (the socket closed
    without one) or ``open`` (nothing for :data:`WS_WAIT` s)."""


def post(base: str, api: str, body: dict[str, Any], headers: dict[str, str] = HEADERS, path: str = "") -> Got:
    """One streamed request (to ``path``, default the API's); a body cut by the peer is kept
    as far as it came."""
    import httpx

    chunks: list[bytes] = []
    with (
        httpx.Client(http1=True, http2=False, timeout=TIMEOUT, trust_env=False) as client,
        client.stream("POST", base + (path or HTTP_PATHS[api]), content=orjson.dumps(body), headers=headers) as r,
    ):
        ended = "clean"
        try:
            chunks.extend(r.iter_raw())
        except httpx.HTTPError:
            ended = "reset"
        return Got(r.status_code, {k.lower(): v for k, v in r.headers.items()}, b"".join(chunks), ended)


def ws_sse(messages: list[bytes]) -> bytes:
    """WebSocket messages as SSE events (``event: TYPE`` + ``data: MESSAGE``): the form the
    contract and the SSE repairers read; each message is kept byte for byte in its data line."""
    out = []
    for m in messages:
        try:
            t = orjson.loads(m).get("type", "")
        except (orjson.JSONDecodeError, AttributeError):
            t = ""
        head = b"event: " + str(t).encode() + b"\n" if t else b""
        out.append(head + b"data: " + m + b"\n\n")
    return b"".join(out)


TERMINAL_TYPES = {"response.completed", "response.incomplete", "response.failed", "error"}


async def _ws(base: str, body: dict[str, Any]) -> Got:
    import aiohttp

    out: list[bytes] = []
    url = base.replace("http://", "ws://") + "/v1/responses"
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(
            url, headers={"authorization": HEADERS["authorization"]}, timeout=aiohttp.ClientWSTimeout(ws_close=TIMEOUT)
        ) as ws,
    ):
        await ws.send_str(orjson.dumps(body).decode())
        while True:
            try:
                msg = await asyncio.wait_for(ws.receive(), WS_WAIT)
            except TimeoutError:
                return Got(101, {}, ws_sse(out), "open")
            if msg.type != aiohttp.WSMsgType.TEXT:
                return Got(101, {}, ws_sse(out), "closed")
            out.append(msg.data.encode())
            try:
                t = orjson.loads(msg.data).get("type")
            except (orjson.JSONDecodeError, AttributeError):
                t = None
            if t in TERMINAL_TYPES:
                return Got(101, {}, ws_sse(out), "terminal")


def ws(base: str, body: dict[str, Any]) -> Got:
    return asyncio.run(_ws(base, body))


def send(base: str, api: str, turn: str, nonce: str) -> tuple[dict[str, Any], Got]:
    body = request_body(api, turn, nonce)
    return body, (ws(base, body) if api == "responses-ws" else post(base, api, body))


# --- what a cell's stream says -------------------------------------------------------


def outcome(api: str, body: bytes, status: int = 200, request: Any = None) -> dict[str, Any]:
    """What a client can read of a stream, without its volatile ids and clocks: how it
    ended (in the API's terms), its text, its tool calls (name, arguments), its usage and
    the contract rules it breaks. Two streams with the same outcome tell a client the same
    turn; the CI replay compares the repair of a captured raw stream with the live
    sidecar's by it. ``request``: the client's request body (its output cap is evidence
    for the contract's ``terminal.truncated``)."""
    from streamfix.wire.contract import check
    from streamfix.wire.invariants import json_events

    wire = WIRE_API[api]
    if status not in (200, 101):  # an HTTP error: its JSON error object, not a stream
        try:
            err = orjson.loads(body).get("error") or {}
        except (orjson.JSONDecodeError, AttributeError):
            err = {}
        kind = err.get("type") or err.get("status") or err.get("code") if isinstance(err, dict) else None
        return {
            "violations": [],
            "ending": f"http {status}" + (f":{kind}" if kind else ""),
            "text": "",
            "calls": [],
            "usage": None,
        }
    evs = [e for e in json_events(body) if isinstance(e, dict)]
    out: dict[str, Any] = {"violations": sorted({v.rule for v in check(wire, body, request=request)})}
    if wire == "responses":
        ending = "none"
        text: list[str] = []
        calls: dict[Any, list[str]] = {}
        names: dict[Any, str] = {}
        usage = None
        vendor = []
        for e in evs:
            t = e.get("type", "")
            if t == "response.output_text.delta":
                text.append(str(e.get("delta", "")))
            elif t == "response.refusal.delta":
                text.append("[refusal]" + str(e.get("delta", "")))
            elif t == "response.output_item.added" and (e.get("item") or {}).get("type") == "function_call":
                names[e.get("output_index")] = e["item"].get("name")
                calls.setdefault(e.get("output_index"), [])
            elif t == "response.function_call_arguments.delta":
                calls.setdefault(e.get("output_index"), []).append(str(e.get("delta", "")))
            elif t in ("response.completed", "response.incomplete", "response.failed"):
                r = e.get("response") or {}
                ending = t.removeprefix("response.")
                reason = (r.get("incomplete_details") or {}).get("reason") or (r.get("error") or {}).get("code")
                if reason:
                    ending += f":{reason}"
                usage = r.get("usage")
            elif t == "error":
                ending = f"error:{e.get('code') or (e.get('error') or {}).get('code') or e.get('status')}"
            elif not t.startswith("response."):
                vendor.append(t)
        out |= {
            "ending": ending,
            "text": "".join(text),
            "calls": [[names.get(k), "".join(v)] for k, v in calls.items()],
            "usage": _usage(usage),
        }
        if vendor:
            out["vendor"] = vendor
    elif wire == "chat":
        finishes, text, errors = [], [], []
        calls2: dict[Any, list[Any]] = {}
        usage = None
        for e in evs:
            if "error" in e:
                errors.append(str((e.get("error") or {}).get("type") or "error"))
            for ch in e.get("choices") or []:
                d = ch.get("delta") or {}
                if d.get("content"):
                    text.append(d["content"])
                if d.get("refusal"):
                    text.append("[refusal]" + d["refusal"])
                for tc in d.get("tool_calls") or []:
                    c = calls2.setdefault(tc.get("index"), [None, []])
                    fn = tc.get("function") or {}
                    if fn.get("name"):
                        c[0] = fn["name"] if c[0] is None else c[0] + "+" + fn["name"]
                    if fn.get("arguments"):
                        c[1].append(fn["arguments"])
                if ch.get("finish_reason"):
                    finishes.append(ch["finish_reason"])
            if isinstance(e.get("usage"), dict):
                usage = e["usage"]
        ending = ",".join(finishes) or "none"
        if errors:
            ending = (ending + "," if finishes else "") + "error:" + errors[-1]
        out |= {
            "ending": ending,
            "text": "".join(text),
            "calls": [[c[0], "".join(c[1])] for c in calls2.values()],
            "usage": _usage(usage),
        }
    elif wire == "messages":
        stops, text, calls3 = [], [], []
        usage = None
        ending = "none"
        for e in evs:
            t = e.get("type")
            if t == "content_block_start" and (e.get("content_block") or {}).get("type") == "tool_use":
                calls3.append([e["content_block"].get("name"), []])
            elif t == "content_block_delta":
                d = e.get("delta") or {}
                if d.get("type") == "text_delta":
                    text.append(d.get("text", ""))
                elif d.get("type") == "input_json_delta" and calls3:
                    calls3[-1][1].append(d.get("partial_json", ""))
            elif t == "message_delta":
                stops.append(str((e.get("delta") or {}).get("stop_reason")))
                usage = e.get("usage")
            elif t == "message_stop":
                ending = ",".join(stops) or "stop-without-delta"
            elif t == "error":
                ending = f"error:{(e.get('error') or {}).get('type')}"
        out |= {
            "ending": ending,
            "text": "".join(text),
            "calls": [[n, "".join(a)] for n, a in calls3],
            "usage": _usage(usage),
        }
    else:
        finishes, text, calls4 = [], [], []
        usage = None
        ending = "none"
        for e in evs:
            if "error" in e:
                ending = f"error:{(e.get('error') or {}).get('status')}"
                continue
            for c in e.get("candidates") or []:
                for p in (c.get("content") or {}).get("parts") or []:
                    if "functionCall" in p:
                        fc = p["functionCall"]
                        calls4.append([fc.get("name"), orjson.dumps(fc.get("args")).decode()])
                    elif p.get("text") and not p.get("thought"):
                        text.append(p["text"])
                if c.get("finishReason"):
                    finishes.append(c["finishReason"])
            if isinstance(e.get("usageMetadata"), dict):
                usage = e["usageMetadata"]
        if finishes and not ending.startswith("error"):
            ending = ",".join(finishes)
        out |= {"ending": ending, "text": "".join(text), "calls": calls4, "usage": _usage(usage)}
    return out


def same(a: dict[str, Any], b: dict[str, Any], any_error: bool = False) -> bool:
    """Two outcomes tell the same turn. CPA's OpenAI -> Gemini translator emits parallel calls
    in Go map order, so two live requests of one cell may list them in another order:
    calls are compared as a multiset. ``any_error`` (a Responses WebSocket turn): an error
    ending is the same whichever error it names (v7.2.89 races the provider's error against
    its own 408 on the socket: which one comes is CPA's race, that the turn failed is not)."""

    def norm(o: dict[str, Any]) -> dict[str, Any]:
        out = o | {"calls": sorted(map(tuple, o.get("calls") or []))}
        if any_error and str(o.get("ending", "")).startswith("error:"):
            out["ending"] = "error"
        return out

    return norm(a) == norm(b)


_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "prompt_tokens",
    "completion_tokens",
    "promptTokenCount",
    "candidatesTokenCount",
    "thoughtsTokenCount",
    "totalTokenCount",
)


def _usage(u: Any) -> dict[str, Any] | None:
    """The counts of a usage object (and its reasoning / cached details), flat."""
    if not isinstance(u, dict):
        return None
    out = {k: u[k] for k in _USAGE_KEYS if k in u}
    for det, key in (
        ("output_tokens_details", "reasoning_tokens"),
        ("completion_tokens_details", "reasoning_tokens"),
        ("input_tokens_details", "cached_tokens"),
        ("prompt_tokens_details", "cached_tokens"),
    ):
        d = u.get(det)
        if isinstance(d, dict) and key in d:
            out[f"{det}.{key}"] = d[key]
    return out


# --- running the cells live ------------------------------------------------------------


@dataclass
class Stack:
    """One real CPA (one version, one provider path) with the fake behind it and a sidecar in front."""

    version: str
    path: str
    cpa: realcpa.Cpa
    mitm: Any
    proxy: str


@dataclass
class Live:
    """Every stack of a live run, started on first use (one fake provider server for all)."""

    tmp: Path
    stacks: dict[tuple[str, str], Stack] = field(default_factory=dict)
    fakes: Any = None

    def __post_init__(self) -> None:
        from standins.fake_providers import Running

        self.fakes = Running(delay_ms=0)

    def get(self, version: str, path: str) -> Stack:
        from support import start_mitmdump

        key = (version, path)
        if key not in self.stacks:
            cpa = realcpa.start(version, path, self.fakes.url)
            try:
                conf = self.tmp / f"conf-{version}-{path}"
                conf.mkdir(parents=True, exist_ok=True)
                mitm, port = start_mitmdump(cpa.url, conf)
            except BaseException:
                cpa.stop()
                raise
            self.stacks[key] = Stack(version, path, cpa, mitm, f"http://127.0.0.1:{port}")
        return self.stacks[key]

    def provider_call(self, path: str, nonce: str) -> dict[str, Any] | None:
        """The fake's record of the provider call CPA made for the request with ``nonce``."""
        api = realcpa.PROVIDER_API[path]
        deadline = time.monotonic() + 2
        while True:
            for r in reversed(self.fakes.fake.requests):
                if r["api"] == api and nonce.encode() in r["raw"]:
                    if r["done"] or time.monotonic() > deadline:
                        return r
                    break
            else:
                return None
            time.sleep(0.02)

    def close(self) -> None:
        for st in self.stacks.values():
            st.mitm.stop()
            st.cpa.stop()
        self.stacks.clear()
        self.fakes.stop()


def run_cell(live: Live, version: str, path: str, api: str, turn: str) -> dict[str, Any]:
    """One cell live: raw (straight to CPA) and through the sidecar. Returns everything a
    recording of it keeps (:func:`matrix_recordings.write`)."""
    st = live.get(version, path)
    nonce = f"cell {version} {path} {api} {turn}"
    t0 = time.monotonic()
    req, raw = send(st.cpa.url, api, turn, nonce + " raw")
    call = live.provider_call(path, nonce + " raw")
    _req2, fixed = send(st.proxy, api, turn, nonce + " sidecar")
    return {
        "version": version,
        "path": path,
        "api": api,
        "turn": turn,
        "request": req,
        "raw": raw,
        "sidecar": fixed,
        "provider": call,
        "seconds": round(time.monotonic() - t0, 2),
    }


def versions_here() -> list[str]:
    return [v for v in VERSIONS if realcpa.binary(v) is not None]


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python tests/support/realcpa_matrix.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    cap = sub.add_parser("capture", help="run every cell on the real builds and write recordings/real-cpa/")
    cap.add_argument("--versions", nargs="*", default=None, help="default: every build found")
    cap.add_argument("--paths", nargs="*", default=list(PATHS))
    cap.add_argument("--apis", nargs="*", default=list(APIS))
    cap.add_argument("--turns", nargs="*", default=list(TURNS))
    cap.add_argument("--out", type=Path, default=None, help="default: recordings/real-cpa")
    cap.add_argument("--keep", action="store_true", help="keep the recordings of cells not run now")
    show = sub.add_parser("show", help="run cells and print their outcomes, raw and through the sidecar")
    show.add_argument("version")
    show.add_argument("path")
    show.add_argument("--apis", nargs="*", default=list(APIS))
    show.add_argument("--turns", nargs="*", default=list(TURNS))
    show.add_argument("--body", action="store_true", help="print the raw bodies too")
    sub.add_parser("docs", help="write docs/real-cpa.md's matrix from recordings/real-cpa/")
    a = ap.parse_args(argv)
    if a.cmd == "docs":
        import matrix_recordings

        return matrix_recordings.write_docs()
    if a.cmd == "show":
        tmp = Path(tempfile.mkdtemp(prefix="cpa-matrix-"))
        live = Live(tmp)
        try:
            for v, p, api, t in cells([a.version], [a.path], a.apis, a.turns):
                c = run_cell(live, v, p, api, t)
                o_raw = outcome(api, c["raw"].body, c["raw"].status, c["request"])
                o_fix = outcome(api, c["sidecar"].body, c["sidecar"].status, c["request"])
                print(f"{v} {p} {api} {t}: raw {c['raw'].status} {c['raw'].ended} {json.dumps(o_raw)}")
                print(f"{'':>{len(v + p + api + t) + 3}}  sidecar {c['sidecar'].ended} {json.dumps(o_fix)}")
                if a.body:
                    print(c["raw"].body.decode("utf-8", "replace"))
                    if c["provider"]:
                        print("--- provider body:")
                        print(c["provider"]["response"].decode("utf-8", "replace"))
        finally:
            live.close()
            shutil.rmtree(tmp, ignore_errors=True)
        return 0
    import matrix_recordings

    versions = a.versions if a.versions is not None else versions_here()
    missing = [v for v in versions if realcpa.binary(v) is None]
    if missing or not versions:
        for v in missing or VERSIONS:
            print(realcpa.missing_reason(v), file=sys.stderr)
        return 2
    return matrix_recordings.capture(versions, a.paths, a.apis, a.turns, a.out, keep=a.keep)


if __name__ == "__main__":
    raise SystemExit(main())
