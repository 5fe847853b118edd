"""The real clients on the failure turns of the Gemini path, through a REAL CPA, raw and
through both legs of the sidecar.

    client (AI SDK 7 and 6 on Responses, chat, Anthropic messages and Google Gemini;
    openai-python raw and stream helpers; codex exec) -> [sidecar client leg] -> real CPA
    -> [sidecar upstream leg] -> fake Gemini (tests/support/standins/fake_upstreams.py)

CPA's gemini-api-key path is the one whose translators lose the most (N1-N3, N5-N7): a
cut body, an in-band error frame and a body that ends without a finish reach the clients
as a success or as nothing; MAX_TOKENS and SAFETY as normal ends. Each client is run on
each turn kind and its outcome read the way its users see it (outcomes.outcome): through
both legs every client reports the failure as a failure and the truncation or safety
stop in its API's terms; raw, the outcomes as measured on each build are asserted.
"""

from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import realcpa
import upstream_matrix as um
from outcomes import outcome, want
from runners import CLIENT_LIST, CLIENTS, installed, run_aisdk_batch, run_codex, run_openai_py
from standins import fake_upstreams as fu
from support import ROOT, show_logs_on_failure

pytestmark = [pytest.mark.e2e, pytest.mark.clients]
KINDS = ("error", "no_finish", "cut", "max_tokens", "safety")
TOOLS = [{"name": "exec_command", "description": "Runs a shell command",
          "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}]  # fmt: skip
AISDK = [c for c in CLIENT_LIST if c.family == "aisdk" and c.install in ("aisdk7", "aisdk6")]
PY = [c for c in CLIENT_LIST if c.family == "openai-py"]
CODEX = [c for c in CLIENT_LIST if c.name == "codex"]
SCRATCH = ROOT / ".cache" / "clients-runs"


WANT_LEGS = {"error": "error", "no_finish": "error", "cut": "error", "max_tokens": "length", "safety": "content-filter"}


def want_legs(client, kind: str) -> str:
    return want(client, WANT_LEGS[kind])


def run_clients(base: str, kind: str, scratch: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    by_install: dict[str, list] = {}
    for c in AISDK:
        by_install.setdefault(c.install or "", []).append(c)

    def aisdk(cs):
        # each case its own prompt: conversations that run at once are told apart by it
        cases = [{"id": c.name, "api": c.variant, "stream": True, "tools": TOOLS, "prompt": f"Do the task ({c.name}).",
                  "baseURL": base + ("/v1beta" if c.variant == "google" else "/v1")} for c in cs]  # fmt: skip
        res = run_aisdk_batch(cs[0].install_dir, cases)
        for c in cs:
            out[c.name] = outcome(c, res[c.name])

    with ThreadPoolExecutor(max_workers=2) as pool:
        for f in [pool.submit(aisdk, cs) for cs in by_install.values()]:
            f.result()
    for c in PY:  # one at a time: openai-python's runner sends one fixed prompt
        out[c.name] = outcome(c, run_openai_py(c, base + "/v1", TOOLS, stream=True))
    for c in CODEX:
        out[c.name] = outcome(c, run_codex(base + "/v1", scratch))
    return out


@pytest.fixture(scope="module")
def fakes():
    f = fu.Running()
    yield f
    f.stop()


# raw, as measured: the clients that take a failure or a stop for a normal end ("ok")
RAW_OK = {
    "v7.2.140": {
        # N1: response.completed; N3: [DONE] with no finish (openai-python's raw chat: no finish, no error)
        "error": {"aisdk7/responses", "aisdk6/responses", "openai-py/responses", "openai-py/responses.stream", "codex"},
    },
}


@pytest.mark.parametrize("version", ["v7.2.89", "v7.2.140"])
def test_real_clients_hear_the_providers_failures_and_stops(fakes, request, record_property, version, tmp_path):
    if realcpa.binary(version) is None:
        pytest.skip(realcpa.missing_reason(version))
    missing = [c.name for c in AISDK + PY + CODEX if not installed(c)]
    assert not missing, f"not installed in {CLIENTS}: {missing}; run scripts/install-clients"
    st = um.start(version, fakes, Path(tempfile.mkdtemp(dir=tmp_path)) / "conf", primary="up-gemini")
    show_logs_on_failure(request, {f"{k} {version}": p for k, p in st.procs.items()})
    SCRATCH.mkdir(parents=True, exist_ok=True)
    rows: dict[str, dict[str, tuple[str, str]]] = {}
    try:
        for kind in KINDS:
            fakes.fake.default_kind = kind
            with tempfile.TemporaryDirectory(prefix="upclients-", dir=SCRATCH) as tmp:
                raw = run_clients(st.url(False), kind, Path(tmp))
                legs = run_clients(st.url(True), kind, Path(tmp))
            rows[kind] = {n: (raw[n], legs[n]) for n in raw}
    finally:
        fakes.fake.default_kind = "text_tool"
        st.stop()
    names = [c.name for c in AISDK + PY + CODEX]
    table = "\n".join(
        f"{kind:10} {n:28} raw: {rows[kind][n][0]:16} both legs: {rows[kind][n][1]}" for kind in KINDS for n in names
    )
    record_property("terminal_summary", f"real clients, CPA {version} Gemini path\n{table}")
    clients = {c.name: c for c in AISDK + PY + CODEX}
    wrong = {f"{kind} {n}": rows[kind][n][1] for kind in KINDS for n in names
             if rows[kind][n][1] != want_legs(clients[n], kind)}  # fmt: skip
    assert wrong == {}, table
    raw_ok = {f"{kind} {n}" for kind in KINDS for n in names if rows[kind][n][0] == "ok"}
    assert raw_ok, "raw, some client takes a failure or a stop for a normal end (else this proves nothing)\n" + table
