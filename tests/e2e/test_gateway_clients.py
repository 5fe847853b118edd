"""The real clients on the failure and stop turns through the REAL gateways, raw and through
the sidecar.

    client (AI SDK 7 and 6 on Responses, chat and Anthropic messages; openai-python raw
    and stream helpers on chat and Responses; codex exec on Responses) -> [sidecar client
    leg] -> LiteLLM 1.108.7 / Portkey 1.15.2 -> [sidecar upstream leg] -> fake provider
    (tests/support/standins/fake_providers.py)

Each cell of the gateway matrix (tests/support/gateway_matrix.py: gateway, provider family,
client API, turn) on one of :data:`TURNS` is asked of the gateway by every client of its
API (:data:`BY_API`), each with its own prompt naming the turn (``[script:NAME]``), the
gateway's model and headers and the turn's output cap, on three legs: ``raw`` (the
gateway), ``client`` (a sidecar's client leg in front of it) and ``both`` (the gateway's
provider calls through the same sidecar's upstream listener too). What each client reported
is read as its user sees it (outcomes.outcome) and held to the turn's truth in its API's
terms (matrix_truth.truth, outcomes.want):

- through the client leg: every client, on every cell whose truth the sidecar's client
  stream shows (all but those gateway_truth.CLIENT_LEG lists, with why;
  tests/addons/test_gateway_matrix.py keeps that list exact);
- through both legs: the same on Portkey, and on LiteLLM every cell, shown or not;
- raw: the outcomes as measured (:data:`RAW`).

One test per gateway (pytest-xdist runs the two side by side); in it every case runs at once,
all legs together: the AI SDK cases of one generation in node processes of 40, openai-python
and Codex on threads, the matrix's own requests beside them. About 75 s for LiteLLM (its two
instances' start, then mostly Codex) and 30 s for Portkey on 2 cores.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import gateway_matrix as gm
import gateway_truth
import matrix_truth
import pytest
import realgateways as rg
from outcomes import Case, outcome, run_cases, want
from runners import CLIENT_LIST, CLIENTS, Client, installed
from support import ROOT, show_logs_on_failure

pytestmark = [pytest.mark.e2e, pytest.mark.clients]

TURNS = ("inband_error", "no_finish", "cut_body", "done_no_finish", "max_tokens", "cap_call", "refusal",
         "context_window")  # fmt: skip
"""The failure and stop turns (each where the provider has it: gateway_matrix.cells)."""
APIS = ("chat", "responses", "messages")
BY_API: dict[str, list[Client]] = {
    api: [c for c in CLIENT_LIST if c.api == api and c.variant not in ("ws", "compatible") and c.install != "aisdk5"]
    for api in APIS
}
"""The clients of each client API: AI SDK 7 and 6 (chat through @ai-sdk/openai), openai-python
raw and helpers, Codex over HTTP."""
CHECKED = ("client", "both")
"""The legs whose stream is read too (the matrix's own request: does it tell the turn?)."""
ALL = [c for cs in BY_API.values() for c in cs]
TOOLS = [{"name": "exec_command", "description": "Runs a shell command",
          "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}]  # fmt: skip
SCRATCH = ROOT / ".cache" / "clients-runs"
Cell = tuple[str, str, str, str]


def cells(gateway: str) -> list[Cell]:
    return list(gm.cells([gateway], apis=APIS, turns=TURNS))


def truth(cell: Cell) -> str:
    """The cell's turn in its API's terms (``matrix_truth.FAILURE``: any failure)."""
    g, p, api, t = cell
    return matrix_truth.truth(gm.TRUTH_PATH[rg.provider_api(g, p, api)], api, t)


def cid(cell: Cell, leg: str, client: Client) -> str:
    return f"{gm.nonce(*cell, leg)} {client.name}"


# --- what was measured -------------------------------------------------------------------


def _all(api: str, label: str) -> dict[str, str]:
    return {c.name: label for c in BY_API[api]}


_NO_END = {
    # a stream that stops with no finish and no end marker: AI SDK 7 says "interrupted", 6 "other",
    # openai-python's raw iteration and its chat helper end with no finish_reason at all
    "chat": {"aisdk7/chat": "finish interrupted", "aisdk6/chat": "finish other", "openai-py/chat": "finish None",
             "openai-py/chat.stream": "finish None"},
    "responses": {"aisdk7/responses": "finish interrupted", "aisdk6/responses": "finish other",
                  "openai-py/responses": "finish None"},
    "messages": {"aisdk7/anthropic": "finish interrupted"},
}  # fmt: skip
RAW: dict[Cell, dict[str, str]] = {
    # LiteLLM writes a normal end for a provider body that ended without its finish (chat stop,
    # Responses completed, Gemini -> messages end_turn), for Anthropic's context-window stop on chat
    # and Responses, and for Gemini's MAX_TOKENS after a whole call (tool_calls, completed, tool_use)
    **{("litellm", p, "chat", t): _all("chat", "ok") for p in ("openai", "anthropic") for t in ("no_finish", "done_no_finish")},
    ("litellm", "anthropic", "chat", "context_window"): _all("chat", "ok"),
    **{("litellm", "anthropic", "responses", t): _all("responses", "ok")
       for t in ("no_finish", "done_no_finish", "context_window")},
    **{("litellm", "gemini", a, t): _all(a, "ok") for a in ("chat", "responses", "messages") for t in ("no_finish", "cap_call")},
    # LiteLLM's messages stream of an Anthropic body without its finish: no message_delta at all, or a
    # message_stop with no message_delta before it
    ("litellm", "anthropic", "messages", "no_finish"): _NO_END["messages"],
    ("litellm", "anthropic", "messages", "done_no_finish"): {"aisdk7/anthropic": "finish other"},
    # Portkey passes a body cut or ended without its finish on as it came: no finish, no end marker
    # (its Responses helper and Codex fail a turn with no response.completed; the rest take it)
    **{("portkey", p, "chat", t): _NO_END["chat"] for p in ("openai", "anthropic")
       for t in ("no_finish", "cut_body", "done_no_finish")},
    **{("portkey", "openai", "responses", t): _NO_END["responses"] for t in ("no_finish", "cut_body")},
    **{("portkey", "anthropic", "messages", t): _NO_END["messages"] for t in ("no_finish", "cut_body")},
    ("portkey", "anthropic", "messages", "done_no_finish"): {"aisdk7/anthropic": "finish other"},
    # Portkey's Gemini -> chat writes nothing for an in-band error, a cut or a body without finish
    **{("portkey", "gemini", "chat", t): _NO_END["chat"] for t in ("inband_error", "no_finish", "cut_body")},
    # Portkey's Anthropic -> chat: the in-band error as a chunk with finish_reason "overloaded_error" and
    # no index (the AI SDK's schema and the chat helper reject it; raw iteration skips a choice that is
    # not index 0), and stop for the refusal and context-window stops
    ("portkey", "anthropic", "chat", "inband_error"): {"openai-py/chat": "finish None"},
    **{("portkey", "anthropic", "chat", t): _all("chat", "ok") for t in ("refusal", "context_window")},
}  # fmt: skip
"""Cell -> client -> what it reported raw (outcomes.outcome), where that is not the turn's
truth in its terms (a client not named told the truth). Measured on LiteLLM 1.108.7 and
Portkey 1.15.2, each entry read against the cell's raw stream in recordings/gateways/."""

READS: dict[tuple[str, str, str, str, str], str] = {
    **dict.fromkeys(
        [("litellm", "openai", "responses", "refusal", "aisdk7/responses"),
         ("portkey", "openai", "chat", "refusal", "aisdk7/chat"),
         ("portkey", "openai", "responses", "refusal", "aisdk7/responses")], "content-filter"),
}  # fmt: skip
"""(cell, client) -> what a client that tells the truth reports, where that is its own word and
not the API's: AI SDK 7 reads OpenAI's refusal (a refusal delta or content part, on a turn
that ends stop / completed) as finishReason content-filter, wherever the refusal reaches it
(LiteLLM's chat drops the delta: there it reads stop)."""


def expected(cell: Cell, client: Client) -> str:
    """What ``client`` reports when it tells the cell's turn (outcomes.want, :data:`READS`)."""
    return READS.get((*cell, client.name)) or want(client, truth(cell))


# --- running it --------------------------------------------------------------------------


def _leg(st: gm.Stack, leg: str) -> tuple[str, rg.Gateway]:
    """The base URL a client asks on ``leg`` and the gateway instance behind it."""
    return {"raw": (st.plain.url, st.plain), "client": (st.client, st.plain), "both": (st.both, st.proxied)}[leg]


def _cases(st: gm.Stack, cell: Cell, leg: str) -> list[Case]:
    _, p, api, t = cell
    base, gw = _leg(st, leg)
    headers = gw.headers(p)
    key = headers.get("authorization", "").removeprefix("Bearer ")
    return [Case(cid(cell, leg, c), c, base + "/v1", f"Do the task ({cid(cell, leg, c)}). [script:{t}]",
                 gw.model(p), key, headers, gm.cap(t)) for c in BY_API[api]]  # fmt: skip


def _shown(cell: Cell, leg: str) -> bool:
    """Does the sidecar's stream on ``leg`` tell the cell's truth (every cell but those
    gateway_truth lists, with why; tests/addons/test_gateway_matrix.py keeps the lists exact)?"""
    return cell not in (gateway_truth.CLIENT_LEG if leg == "client" else gateway_truth.BOTH_LEGS)


def _measure(st: gm.Stack, scratch: Path) -> dict[str, Any]:
    cs = cells(st.name)
    t0 = time.monotonic()
    res = run_cases([k for cell in cs for leg in gm.LEGS for k in _cases(st, cell, leg)], TOOLS, scratch,
                    codex_threads=4)  # fmt: skip
    got = {(cell, leg, c.name): outcome(c, res[cid(cell, leg, c)]) for cell in cs for leg in gm.LEGS
           for c in BY_API[cell[2]]}  # fmt: skip
    return {"cells": cs, "got": got, "raw": res, "seconds": round(time.monotonic() - t0, 1)}


def _dump(mg: dict[str, Any], gateway: str) -> None:
    """With ``STREAMFIX_MEASURE_GATEWAY_CLIENTS=DIR``: every outcome and every runner's result
    of this run into DIR/GATEWAY.jsonl, to read RAW from."""
    out = os.environ.get("STREAMFIX_MEASURE_GATEWAY_CLIENTS")
    if not out:
        return
    rows = [{"cell": cell, "leg": leg, "client": c.name, "want": expected(cell, c),
             "got": mg["got"][(cell, leg, c.name)], "shown": leg in CHECKED and _shown(cell, leg),
             "result": mg["raw"][cid(cell, leg, c)]}
            for cell in mg["cells"] for leg in gm.LEGS for c in BY_API[cell[2]]]  # fmt: skip
    rows.append({"seconds": mg["seconds"]})
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / f"{gateway}.jsonl").write_text("".join(json.dumps(r, default=str) + "\n" for r in rows))


def _table(mg: dict[str, Any]) -> str:
    lines = []
    for cell in mg["cells"]:
        marks = "".join("+" if _shown(cell, leg) else "-" for leg in CHECKED)
        for c in BY_API[cell[2]]:
            w = expected(cell, c)
            got = [mg["got"][(cell, leg, c.name)] for leg in gm.LEGS]
            lines.append(f"{marks} {' '.join(cell[1:]):32} {c.name:27} want {w:14} "
                         + "  ".join(f"{leg}: {o:14}" for leg, o in zip(gm.LEGS, got)))  # fmt: skip
    return "\n".join(lines)


def _check(mg: dict[str, Any], leg: str, every: bool) -> list[str]:
    """The clients told wrong on ``leg``; ``every``: on each cell, else on those whose stream
    on the leg tells the truth."""
    return [f"{' '.join(cell)} {leg} {c.name}: {got}, want {w}" for cell in mg["cells"]
            if every or _shown(cell, leg) for c in BY_API[cell[2]]
            if (got := mg["got"][(cell, leg, c.name)]) != (w := expected(cell, c))]  # fmt: skip


def _raw_diffs(mg: dict[str, Any]) -> list[str]:
    diffs = []
    for cell in mg["cells"]:
        for c in BY_API[cell[2]]:
            got, w = mg["got"][(cell, "raw", c.name)], RAW.get(cell, {}).get(c.name, expected(cell, c))
            if got != w:
                diffs.append(f"raw {cell!r}: {{{c.name!r}: {got!r}}},  # listed: {w!r}")
    return diffs


@pytest.mark.parametrize("gateway", rg.GATEWAYS)
def test_real_clients_through_the_gateway(gateway, tmp_path, request, record_property):
    """Raw: the outcomes as measured; through the client leg: every client tells each turn
    the sidecar's stream shows; through both legs: on LiteLLM every turn, on Portkey each
    turn the stream shows."""
    rg.require(gateway)
    missing = [c.name for c in ALL if not installed(c)]
    assert not missing, f"not installed in {CLIENTS}: {missing}; run scripts/install-clients"
    live = gm.Live(tmp_path)
    SCRATCH.mkdir(parents=True, exist_ok=True)
    try:
        st = live.get(gateway)
        show_logs_on_failure(request, st.procs())
        with tempfile.TemporaryDirectory(prefix=f"gw-{gateway}-", dir=SCRATCH) as tmp:
            mg = _measure(st, Path(tmp))
    finally:
        live.close()
    _dump(mg, gateway)
    table = _table(mg)
    record_property("terminal_summary", f"real clients through {gateway} ({mg['seconds']} s; +/-: the stream "
                                        f"through the client leg, both legs tells the turn)\n{table}")  # fmt: skip
    problems = _raw_diffs(mg) + _check(mg, "client", every=False) + _check(mg, "both", every=gateway == "litellm")
    assert not problems, "\n".join(problems) + "\n" + table
