"""The real clients on the matrix's failure and stop-reason turns, raw and through the sidecar.

    client (AI SDK 5/6/7, openai-python raw and helpers, codex exec)
        -> [mitmdump -s addons/repair.py] -> real CPA v7.2.89 / v7.2.140 -> fake provider

Each case is a provider path and a turn (tests/support/standins/fake_providers.py): the Gemini path's
body that ends without a finish, carries an in-band error or is cut inside a chunk, its
MAX_TOKENS (the clients ask for 16 output tokens) and SAFETY stops; the Codex backend's
max-tokens, content-filter and context-window turns and its own events; the OpenAI-compatible
path's truncation and content filter. Every client is labelled by what it reported (the AI
SDK's finish reason or its error part, what openai-python returned or raised, whether Codex
finished the turn) and, through the sidecar, must tell the turn's truth
(tests/support/matrix_truth.py) in its own terms: a failure is never done (the AI SDK reports an
error, openai-python raises, Codex fails the turn), a truncation is ``length`` /
``LengthFinishReasonError`` / Codex's "Incomplete response", a filtered answer
``content-filter`` / ``ContentFilterFinishReasonError``. Raw, the labels are asserted as
measured on each build (:data:`RAW`): where CPA hides the truth, the clients take the turn
as done. A cell whose truth the client stream cannot show (``matrix_truth.HIDDEN``; for
Codex also the max-tokens turn of a path whose client must send the cap: Codex sends none)
is only recorded.
"""

from __future__ import annotations

import json
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import matrix_truth
import pytest
import realcpa
import realcpa_matrix as m
from runners import CLIENT_LIST, CLIENTS, Client, installed, run_aisdk_batch, run_codex, run_openai_py
from support import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.clients]

TOOLS = [{"name": "exec_command", "description": "Runs a shell command",
          "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}]  # fmt: skip
CASES: dict[str, tuple[str, ...]] = {
    # path -> turns
    "gemini": ("no_finish", "inband_error", "cut_body", "max_tokens", "safety"),
    "codex": ("max_tokens", "safety", "context_window", "inband_error", "vendor"),
    "openai": ("max_tokens", "safety", "no_finish"),
    "antigravity": ("no_finish", "inband_error", "safety"),
}
CAP = 16
"""The output cap every client asks for (the max-tokens turn reports it spent)."""
SCRATCH = ROOT / ".cache" / "clients-runs"


def clients() -> list[Client]:
    """Every client but Codex's WebSocket row (the matrix's own WebSocket turns stand for
    it): Responses, chat, and AI SDK 7's Anthropic (/v1/messages) and Google (/v1beta)."""
    return [c for c in CLIENT_LIST if c.variant != "ws"]


def label(c: Client, r: dict[str, Any]) -> str:
    """What the client reported, in a word or two."""
    if c.family == "aisdk":
        if r.get("probe_error") or r.get("hung"):
            return "hangs" if r.get("hung") else "probe error"
        if r.get("thrown"):
            return "throws"
        if r.get("errors"):
            return f"error part, {r.get('finishReason')}"
        return str(r.get("finishReason"))
    if c.family == "openai-py":
        if "exception" in r:
            return r["exception"]
        if c.api == "responses":
            if not r.get("terminal") and "error" in r.get("types", []):
                return "error event"  # a Responses error event, which raw iteration yields
            return r.get("terminal") or f"status {r.get('status')}"
        return str(r.get("finish"))
    if r.get("rc") == 0:
        return "done"
    why = (r.get("failures") or [""])[-1]
    return f"turn failed: {why[:70]}" if why else f"exit {r.get('rc')}"


_LENGTH = {"aisdk": {"length"}, "openai-py/responses": {"response.incomplete"},
           "openai-py/responses.stream": {"RuntimeError"}, "openai-py/chat": {"length"},
           "openai-py/chat.stream": {"LengthFinishReasonError"}}  # fmt: skip
_FILTER = {"aisdk": {"content-filter"}, "openai-py/responses": {"response.incomplete"},
           "openai-py/responses.stream": {"RuntimeError"}, "openai-py/chat": {"content_filter"},
           "openai-py/chat.stream": {"ContentFilterFinishReasonError"}}  # fmt: skip


def tells(c: Client, path: str, turn: str, got: str) -> bool:
    """Does the client's label tell the turn's truth (``matrix_truth.truth``)?"""
    want = matrix_truth.truth(path, c.api, turn)
    key = c.family if c.family == "aisdk" else c.name
    if c.family == "codex":
        return got == "done" if want == "completed" else got.startswith("turn failed")
    if want == matrix_truth.FAILURE:
        if c.family == "aisdk":
            # AI SDK 5's Responses provider reads response.failed as finish "unknown", with no
            # error part (its own reading of a failure; 6 and 7 give an error part)
            return (
                got == "throws" or got.startswith("error part") or (c.name == "aisdk5/responses" and got == "unknown")
            )
        return got in ("APIError", "RuntimeError", "response.failed", "error event") or got.endswith("Error")
    if want in ("length", "incomplete:max_output_tokens", "max_tokens", "MAX_TOKENS"):
        return got in _LENGTH[key]
    if want in ("content_filter", "incomplete:content_filter", "refusal", "SAFETY"):
        return got in _FILTER[key]
    return got in ({"stop", "tool-calls"} if c.family == "aisdk" else {"response.completed", "stop", "tool_calls",
                                                                       "status completed"})  # fmt: skip


def hidden(c: Client, path: str, turn: str) -> str | None:
    """Why this client cannot be told this cell's truth (None: it can)."""
    why = matrix_truth.HIDDEN.get((path, c.api, turn))
    if why:
        return why
    if c.family == "codex" and turn == "max_tokens" and path in ("gemini", "openai"):
        return "Codex sends no max_output_tokens, and the path's translator says completed: only the cap shows it"
    return None


def run_all(base: str, scratch: Path) -> dict[str, str]:
    """Every client once against ``base``; label by row."""
    out: dict[str, str] = {}
    chosen = [c for c in clients() if installed(c)]
    batches: dict[str, list[Client]] = {}
    for c in chosen:
        if c.family == "aisdk":
            batches.setdefault(c.install or "", []).append(c)

    def aisdk(cs: list[Client]) -> None:
        cases = [{"id": c.name, "api": c.variant, "baseURL": base + ("/v1beta" if c.api == "gemini" else "/v1"),
                  "stream": True, "tools": TOOLS, "maxOutputTokens": CAP} for c in cs]  # fmt: skip
        res = run_aisdk_batch(cs[0].install_dir, cases)
        for c in cs:
            out[c.name] = label(c, res[c.name])

    def py(c: Client) -> None:
        cap = ("max_output_tokens", CAP) if c.api == "responses" else ("max_tokens", CAP)
        out[c.name] = label(c, run_openai_py(c, base + "/v1", TOOLS, cap=cap))

    with ThreadPoolExecutor(max_workers=4) as pool:
        futs = [pool.submit(aisdk, cs) for cs in batches.values()]
        futs += [pool.submit(py, c) for c in chosen if c.family == "openai-py"]
        for f in futs:
            f.result()
    for c in chosen:
        if c.family == "codex":
            out[c.name] = label(c, run_codex(base + "/v1", scratch))
    return out


RAW: dict[tuple[str, str, str], dict[str, str]] = {
    ("v7.2.140", "codex", "vendor"): {
        "aisdk7/google": "interrupted",
        "openai-py/responses.stream": "RuntimeError",
    },
    ("v7.2.89", "codex", "vendor"): {
        "aisdk7/google": "interrupted",
        "openai-py/responses.stream": "RuntimeError",
    },
    ("v7.2.140", "gemini", "no_finish"): {
        "aisdk7/responses": "stop",
        "aisdk7/chat": "interrupted",
        "aisdk7/anthropic": "other",
        "aisdk7/google": "interrupted",
        "aisdk6/responses": "other",
        "aisdk6/chat": "other",
        "aisdk6/compatible": "other",
        "aisdk5/chat": "unknown",
        "openai-py/responses": "response.completed",
        "openai-py/responses.stream": "status completed",
        "openai-py/chat": "None",
        "openai-py/chat.stream": "None",
        "codex": "done",
    },
    ("v7.2.140", "gemini", "inband_error"): {
        "aisdk7/responses": "stop",
        "aisdk7/chat": "interrupted",
        "aisdk7/anthropic": "other",
        "aisdk6/responses": "other",
        "aisdk6/chat": "other",
        "aisdk6/compatible": "other",
        "aisdk5/chat": "unknown",
        "openai-py/responses": "response.completed",
        "openai-py/responses.stream": "status completed",
        "openai-py/chat": "None",
        "openai-py/chat.stream": "None",
        "codex": "done",
    },
    ("v7.2.140", "gemini", "cut_body"): {
        "aisdk7/responses": "stop",
        "aisdk6/responses": "other",
        "openai-py/responses": "response.completed",
        "openai-py/responses.stream": "status completed",
        "codex": "done",
    },
    ("v7.2.140", "gemini", "max_tokens"): {
        "aisdk7/responses": "stop",
        "aisdk7/chat": "other",
        "aisdk6/responses": "stop",
        "aisdk6/chat": "other",
        "aisdk6/compatible": "other",
        "aisdk5/responses": "stop",
        "aisdk5/chat": "unknown",
        "openai-py/responses": "response.completed",
        "openai-py/responses.stream": "status completed",
        "openai-py/chat": "max_tokens",
        "openai-py/chat.stream": "max_tokens",
    },
    ("v7.2.140", "gemini", "safety"): {
        "aisdk7/chat": "stop",
        "aisdk6/chat": "stop",
        "aisdk6/compatible": "stop",
        "aisdk5/chat": "stop",
        "openai-py/chat": "stop",
        "openai-py/chat.stream": "stop",
    },
    ("v7.2.89", "gemini", "no_finish"): {
        "aisdk7/chat": "interrupted",
        "aisdk7/anthropic": "other",
        "aisdk7/google": "interrupted",
        "aisdk6/responses": "other",
        "aisdk6/chat": "other",
        "aisdk6/compatible": "other",
        "aisdk5/chat": "unknown",
        "openai-py/responses": "status None",
        "openai-py/chat": "None",
        "openai-py/chat.stream": "None",
    },
    ("v7.2.89", "gemini", "inband_error"): {
        "aisdk7/chat": "interrupted",
        "aisdk7/anthropic": "other",
        "aisdk6/responses": "other",
        "aisdk6/chat": "other",
        "aisdk6/compatible": "other",
        "aisdk5/chat": "unknown",
        "openai-py/responses": "status None",
        "openai-py/chat": "None",
        "openai-py/chat.stream": "None",
    },
    ("v7.2.89", "gemini", "max_tokens"): {
        "aisdk7/responses": "error part, error",
        "aisdk7/chat": "other",
        "aisdk6/responses": "stop",
        "aisdk6/chat": "other",
        "aisdk6/compatible": "other",
        "aisdk5/responses": "stop",
        "aisdk5/chat": "unknown",
        "openai-py/responses": "response.completed",
        "openai-py/responses.stream": "status completed",
        "openai-py/chat": "max_tokens",
        "openai-py/chat.stream": "max_tokens",
    },
    ("v7.2.89", "gemini", "safety"): {
        "aisdk7/chat": "stop",
        "aisdk6/chat": "stop",
        "aisdk6/compatible": "stop",
        "aisdk5/chat": "stop",
        "openai-py/chat": "stop",
        "openai-py/chat.stream": "stop",
    },
    ("v7.2.140", "antigravity", "no_finish"): {
        "aisdk7/responses": "stop",
        "aisdk7/chat": "interrupted",
        "aisdk7/anthropic": "stop",
        "aisdk7/google": "interrupted",
        "aisdk6/responses": "other",
        "aisdk6/chat": "other",
        "aisdk6/compatible": "other",
        "aisdk5/chat": "unknown",
        "openai-py/responses": "response.completed",
        "openai-py/responses.stream": "status completed",
        "openai-py/chat": "None",
        "openai-py/chat.stream": "None",
        "codex": "done",
    },
    ("v7.2.140", "antigravity", "inband_error"): {
        "aisdk7/responses": "stop",
        "aisdk7/chat": "interrupted",
        "aisdk7/anthropic": "stop",
        "aisdk7/google": "interrupted",
        "aisdk6/responses": "other",
        "aisdk6/chat": "other",
        "aisdk6/compatible": "other",
        "aisdk5/chat": "unknown",
        "openai-py/responses": "response.completed",
        "openai-py/responses.stream": "status completed",
        "openai-py/chat": "None",
        "openai-py/chat.stream": "None",
        "codex": "done",
    },
    ("v7.2.140", "antigravity", "safety"): {
        "aisdk7/chat": "stop",
        "aisdk6/chat": "stop",
        "aisdk6/compatible": "stop",
        "aisdk5/chat": "stop",
        "openai-py/chat": "stop",
        "openai-py/chat.stream": "stop",
    },
    ("v7.2.89", "antigravity", "no_finish"): {
        "aisdk7/chat": "interrupted",
        "aisdk7/anthropic": "stop",
        "aisdk7/google": "interrupted",
        "aisdk6/responses": "other",
        "aisdk6/chat": "other",
        "aisdk6/compatible": "other",
        "aisdk5/chat": "unknown",
        "openai-py/responses": "status None",
        "openai-py/chat": "None",
        "openai-py/chat.stream": "None",
    },
    ("v7.2.89", "antigravity", "inband_error"): {
        "aisdk7/chat": "interrupted",
        "aisdk7/anthropic": "stop",
        "aisdk7/google": "interrupted",
        "aisdk6/responses": "other",
        "aisdk6/chat": "other",
        "aisdk6/compatible": "other",
        "aisdk5/chat": "unknown",
        "openai-py/responses": "status None",
        "openai-py/chat": "None",
        "openai-py/chat.stream": "None",
    },
    ("v7.2.89", "antigravity", "safety"): {
        "aisdk7/chat": "stop",
        "aisdk6/chat": "stop",
        "aisdk6/compatible": "stop",
        "aisdk5/chat": "stop",
        "openai-py/chat": "stop",
        "openai-py/chat.stream": "stop",
    },
    ("v7.2.140", "openai", "no_finish"): {
        "aisdk7/chat": "interrupted",
        "aisdk7/anthropic": "other",
        "aisdk7/google": "stop",
        "aisdk6/chat": "other",
        "aisdk6/compatible": "other",
        "aisdk5/chat": "unknown",
        "openai-py/chat": "None",
        "openai-py/chat.stream": "None",
    },
    ("v7.2.89", "openai", "no_finish"): {
        "aisdk7/chat": "interrupted",
        "aisdk7/anthropic": "other",
        "aisdk7/google": "stop",
        "aisdk6/responses": "other",
        "aisdk6/chat": "other",
        "aisdk6/compatible": "other",
        "aisdk5/chat": "unknown",
        "openai-py/responses": "status None",
        "openai-py/chat": "None",
        "openai-py/chat.stream": "None",
    },
    ("v7.2.89", "openai", "max_tokens"): {
        "aisdk7/responses": "error part, error",
        "aisdk6/responses": "stop",
        "aisdk5/responses": "stop",
        "openai-py/responses": "response.completed",
        "openai-py/responses.stream": "status completed",
    },
}
"""(version, path, turn) -> client -> the raw label measured on the real build (a client not
named: the label that tells the truth)."""


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    if not m.versions_here():
        pytest.skip(realcpa.missing_reason("v7.2.140"))
    missing = [c.name for c in clients() if not installed(c)]
    if missing:
        pytest.fail(f"not installed in {CLIENTS}: {missing}; run scripts/install-clients")
    lv = m.Live(tmp_path_factory.mktemp("matrix-clients"))
    yield lv
    lv.close()


@pytest.mark.parametrize("version", m.VERSIONS)
@pytest.mark.parametrize("path", sorted(CASES))
def test_clients_on_failures_and_stops(live, record_property, version, path):
    if realcpa.binary(version) is None:
        pytest.skip(realcpa.missing_reason(version))
    st = live.get(version, path)
    SCRATCH.mkdir(parents=True, exist_ok=True)
    lines, wrong, raw_diffs = [], [], []
    measured: dict[str, dict[str, str]] = {}
    for turn in CASES[path]:
        live.fakes.fake.default = turn
        with tempfile.TemporaryDirectory(prefix="matrix-clients-", dir=SCRATCH) as tmp:
            raw = run_all(st.cpa.url, Path(tmp))
            fixed = run_all(st.proxy, Path(tmp))
        for c in clients():
            why = hidden(c, path, turn)
            ok = tells(c, path, turn, fixed[c.name])
            mark = "✓" if ok else ("(hidden)" if why else "✗")
            lines.append(f"{turn:15} {c.name:28} raw: {raw[c.name]:52} sidecar: {fixed[c.name]} {mark}")
            if not ok and not why:
                wrong.append(f"{turn} {c.name}: sidecar {fixed[c.name]!r}")
            if not tells(c, path, turn, raw[c.name]) and not why:
                measured.setdefault(turn, {})[c.name] = raw[c.name]
            want_raw = RAW.get((version, path, turn), {}).get(c.name)
            if want_raw is None and not tells(c, path, turn, raw[c.name]) and not why:
                raw_diffs.append(f"{turn} {c.name}: raw {raw[c.name]!r} (not in RAW)")
            elif want_raw is not None and raw[c.name] != want_raw:
                raw_diffs.append(f"{turn} {c.name}: raw {raw[c.name]!r}, measured {want_raw!r}")
    measure = os.environ.get("STREAMFIX_MEASURE_CLIENTS")
    if measure:  # writes what this run measured raw (for RAW), one JSON line per (version, path)
        with open(measure, "a") as fp:
            fp.write(json.dumps({"key": [version, path], "raw": measured}) + "\n")
    table = "\n".join(lines)
    record_property("terminal_summary", f"real CPA {version}, {path} path: the clients raw and through the sidecar\n"
                                        + table)  # fmt: skip
    assert not wrong, "\n".join(wrong) + "\n" + table
    assert not raw_diffs, "\n".join(raw_diffs) + "\n" + table
