"""The real clients against a real CPA, raw and through the sidecar (the client runners of tests/clients).

    client (AI SDK 5/6/7, openai-python, codex exec over SSE and WebSocket)
        -> [mitmdump -s addons/repair.py] -> real CPA (tests/support/realcpa.py) -> fake provider

Every provider plays the ``probe`` script (tests/support/standins/fake_providers.py): a line of
text, then one ``exec_command`` call that writes ``probe-marker.txt``; a request carrying
the tool's result gets "ALL DONE" (Codex's second turn). Each client is judged by
``tests/support/clients/judge.py`` against what a correct stream of that turn gives. Raw, the
outcome of every client is asserted as measured on the real build (``RAW``); through
the sidecar every client succeeds.
"""

from __future__ import annotations

import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
from cpastacks import Stacks
from expect import Call, Expected
from judge import judge
from runners import CLIENT_LIST, CLIENTS, Client, installed, run_aisdk_batch, run_codex, run_openai_py
from standins.fake_providers import PROBE_CMD
from support import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.clients]

TOOLS = [{"name": "exec_command", "description": "Runs a shell command",
          "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}]  # fmt: skip
TEXT = "Running the probe."
CALLS = (Call("exec_command", PROBE_CMD),)
EXPECTED = {
    "responses": Expected("responses", CALLS, "response.completed", None, TEXT),
    "chat": Expected("chat", CALLS, "tool_calls", None, TEXT),
    "messages": Expected("messages", CALLS, "tool_use", None, TEXT),
}
JSON = " json"
"""Row suffix of a non-streamed run (AI SDK generateText, openai-python create()/parse())."""
SCRATCH = ROOT / ".cache" / "clients-runs"

OK = "ok"
_CHAT_INDEX = {
    # tool_calls[].index is the Claude block / interactions step index (1 here), not 0
    "aisdk6/chat": "throws Cannot read properties of undefined (reading 'hasFinished')",
    "openai-py/chat.stream": "IndexError: list index out of range",
}
_NO_STATUS = {
    # function_call items without status: the AI SDK drops the call
    "aisdk7/responses": "error part (rejects created, output_item.done), finish error, 0 calls",
    "aisdk6/responses": "finish stop, 0 calls",
    "aisdk5/responses": "finish stop, 0 calls",
}
_NO_MODEL = {
    # response.created/in_progress without model (the strict schema of AI SDK 7)
    "aisdk7/responses": "error part (rejects created, in_progress), finish error",
}
_JSON_NO_ID = {
    # non-stream Responses body: function_call output items without id and status
    f"aisdk{g}/responses{JSON}": "throws Invalid JSON response"
    for g in (5, 6, 7)
}
RAW: dict[tuple[str, str], dict[str, str]] = {
    ("v7.2.89", "claude"): {**_CHAT_INDEX, **_NO_MODEL},
    ("v7.2.140", "claude"): _CHAT_INDEX,
    ("v7.2.89", "interactions"): {**_CHAT_INDEX, **_NO_STATUS, **_JSON_NO_ID},
    ("v7.2.140", "interactions"): {**_CHAT_INDEX, **_NO_STATUS, **_JSON_NO_ID},
    ("v7.2.89", "openai"): _NO_MODEL,
    ("v7.2.140", "openai"): {},
}  # fmt: skip
"""(version, provider) -> client -> the raw outcome measured on the real build (the
judge's label); a client not named is ``ok``. Codex 0.171 gets through v7.2.89's late
message close (as with the recordings, docs/clients.md)."""


def clients_for(provider: str) -> list[Client]:
    return [c for c in CLIENT_LIST if c.api in ("responses", "chat", "messages")]


def rows(provider: str) -> list[str]:
    """Every row: each client streaming, and each but Codex also non-streamed."""
    cs = [c for c in clients_for(provider) if installed(c)]
    return [c.name for c in cs] + [c.name + JSON for c in cs if c.family != "codex"]


def _run_all(st, base_of: dict[str, str], scratch: Path) -> dict[tuple[str, str], str]:
    """Every client in every mode (``raw``/``sidecar`` -> base URL): outcome labels."""
    out: dict[tuple[str, str], str] = {}
    chosen = [c for c in clients_for(st.cpa.provider) if installed(c)]
    batches: dict[tuple[str, str], list[Client]] = {}
    singles: list[tuple[str, Client]] = []
    for mode, base in base_of.items():
        for c in chosen:
            if c.family == "aisdk":
                batches.setdefault((mode, c.install or ""), []).append(c)
            elif c.family == "openai-py":
                singles.append((mode, c))

    def aisdk(mode: str, cs: list[Client]) -> None:
        cases = [{"id": c.name + ("" if stream else JSON), "api": c.variant, "baseURL": base_of[mode] + "/v1",
                  "stream": stream, "tools": TOOLS} for c in cs for stream in (True, False)]  # fmt: skip
        res = run_aisdk_batch(cs[0].install_dir, cases)
        for c in cs:
            for stream in (True, False):
                row = c.name + ("" if stream else JSON)
                exp = replace(EXPECTED[c.api], stream=stream)
                out[(mode, row)] = judge(c, exp, res[row]).label

    def py(mode: str, c: Client, stream: bool) -> None:
        r = run_openai_py(c, base_of[mode] + "/v1", TOOLS, stream=stream)
        exp = replace(EXPECTED[c.api], stream=stream)
        out[(mode, c.name + ("" if stream else JSON))] = judge(c, exp, r).label

    with ThreadPoolExecutor(max_workers=6) as pool:
        futures = [pool.submit(aisdk, m, cs) for (m, _), cs in batches.items()]
        futures += [pool.submit(py, m, c, stream) for m, c in singles for stream in (True, False)]
        for f in futures:
            f.result()
    # Codex one run at a time: which transport a run used is read from CPA's own log
    for mode in base_of:
        for c in chosen:
            if c.family != "codex":
                continue
            n = len(st.cpa.proc.lines)
            r = run_codex(base + "/v1", scratch, websocket=c.variant == "ws")
            time.sleep(0.3)
            log = st.cpa.proc.lines[n:]
            r["ws_turns"] = sum(1 for ln in log if '| GET     "/v1/responses"' in ln)
            r["http_requests"] = sum(1 for ln in log if '| POST    "/v1/responses"' in ln)
            out[(mode, c.name)] = judge(c, EXPECTED[c.api], r).label
    return out


@pytest.mark.parametrize("version", ["v7.2.89", "v7.2.140"])
@pytest.mark.parametrize("provider", ["claude", "interactions", "openai"])
def test_real_clients(stacks: Stacks, request, record_property, version, provider):
    st = stacks.get(request, version, provider)
    missing = [c.name for c in clients_for(provider) if not installed(c)]
    assert not missing, f"not installed in {CLIENTS}: {missing}; run scripts/install-clients"
    stacks.fakes.fake.default = "probe"
    SCRATCH.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="realcpa-", dir=SCRATCH) as tmp:
        got = _run_all(st, {"raw": st.cpa.url, "sidecar": st.proxy}, Path(tmp))
    names = rows(provider)
    table = "\n".join(f"{n:32} raw: {got[('raw', n)]:45} sidecar: {got[('sidecar', n)]}" for n in names)
    record_property(
        "terminal_summary", f"real CPA {version}, {provider} path: clients raw and through the sidecar\n{table}"
    )
    assert {n: got[("sidecar", n)] for n in names} == dict.fromkeys(names, OK), table
    want_raw = RAW.get((version, provider), {})
    assert {n: got[("raw", n)] for n in names} == {n: want_raw.get(n, OK) for n in names}, table


@pytest.mark.parametrize("version", ["v7.2.89", "v7.2.140"])
@pytest.mark.parametrize("provider", ["claude", "interactions"])
def test_codex_without_upstream_usage(stacks: Stacks, request, version, provider):
    """The provider sends no usage: on the interactions path CPA's response.completed then
    has no input/output/total tokens (usage {} on v7.2.89, zero details only on v7.2.140)
    and Codex fails the turn raw; the Claude path writes zeros. Through the sidecar, ok."""
    st = stacks.get(request, version, provider)
    stacks.fakes.fake.default = "probe_no_usage"
    codex = next(c for c in CLIENT_LIST if c.name == "codex")
    if not installed(codex):
        pytest.fail(f"codex not installed in {CLIENTS}; run scripts/install-clients")
    SCRATCH.mkdir(parents=True, exist_ok=True)
    got = {}
    with tempfile.TemporaryDirectory(prefix="realcpa-", dir=SCRATCH) as tmp:
        for mode, base in (("raw", st.cpa.url), ("sidecar", st.proxy)):
            got[mode] = judge(codex, EXPECTED["responses"], run_codex(base + "/v1", Path(tmp))).label
    assert got["sidecar"] == OK, got
    if provider == "interactions":
        assert got["raw"].startswith("exit 1, turn.failed") and "input_tokens" in got["raw"], got
    else:
        assert got["raw"] == OK, got
