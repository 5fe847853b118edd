"""Did a client get what the recording's repaired stream says? One verdict per run.

Success, per family (each client's own parser decides; docs/clients.md):

- AI SDK: nothing thrown, no ``error`` stream part, ``finishReason`` as the stream ends
  (``tool-calls`` / ``stop``; ``length`` for a truncated one), exactly the expected tool
  calls with ``invalid: false`` and the expected input. A truncated call's arguments are
  not JSON, so there the call must arrive ``invalid: true`` (and its ``tool-error`` is
  expected).
- openai-python: raw iteration sees the expected terminal event / finish_reason and
  tool calls; the helpers return them, or, for a truncated stream, raise what they raise
  on the real API (``responses.stream()``: ``RuntimeError: Didn't receive a
  response.completed event`` after ``response.incomplete``; ``chat.completions.stream()``
  and ``.parse()``: ``LengthFinishReasonError``; ``responses.parse()`` raises nothing, its
  ``status`` says ``incomplete``).
- Codex: exit 0, the final message is the follow-up's ("ALL DONE", or the recording's
  own text when it calls no tool), the marker written when the recording's command writes
  it; for a truncated stream the documented ``turn.failed`` "Incomplete response returned,
  reason: max_output_tokens" (exit 1).
- A stream that ends in ``response.failed`` (a gateway's failure, or the one streamfix
  ends a cut stream with): no client may report a success. AI SDK: a finish other than
  ``stop``/``tool-calls``/``length``/``content-filter`` (7 and 6 give ``error`` with an
  ``error`` part, 5 ``unknown``), or a throw when the failure comes before any output;
  openai-python raw iteration sees ``response.failed``, the helper raises
  ``RuntimeError: Didn't receive a response.completed event`` after it (``Expected to
  have received response.created before response.failed`` when it is the first event);
  Codex ``turn.failed`` (exit 1). The same for an error event on chat (openai-python
  raises ``APIError``), messages and Gemini (streamfix's failure for a stream with no
  event).

Anything else is a failure, labelled with its symptom (the matrix cell).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from expect import MARKER_TEXT, Call, Expected
from runners import Client

FOLLOWUP_TEXT = "ALL DONE"


@dataclass(frozen=True)
class Outcome:
    ok: bool
    label: str
    """``ok``, or the symptom: ``error part``, ``IndexError``, ``turn.failed: ...``."""


OK = Outcome(True, "ok")


def judge(client: Client, exp: Expected, result: dict[str, Any]) -> Outcome:
    if client.family == "aisdk":
        return _aisdk(exp, result)
    if client.family == "openai-py":
        return _openai_py(client, exp, result)
    return _codex(exp, result, websocket=client.variant == "ws")


def _fail(*symptoms: str) -> Outcome:
    return Outcome(False, ", ".join(s for s in symptoms if s))


def _calls_label(got: list[list[str]], want: tuple[Call, ...]) -> str:
    if len(got) != len(want):
        return _n_calls(len(got))
    if [g[0] for g in got] != [c.name for c in want]:
        return "wrong tool names"
    return "arguments differ"


def _aisdk(exp: Expected, r: dict[str, Any]) -> Outcome:
    if "probe_error" in r:
        return _fail("probe: " + r["probe_error"][:80])
    if r.get("hung"):
        return _fail("hangs (never finishes)")
    if exp.failed and r.get("thrown"):  # a failure before any output: thrown by the SDK, seen
        return OK
    if r.get("thrown"):  # nothing else is known then: no finish, no calls
        never = " (then finishReason never settles)" if r.get("finishError") == "never settles" else ""
        return _fail("throws " + _short(r["thrown"]) + never)
    if r.get("finishError") == "never settles":
        return _fail("finishReason never settles")
    if exp.failed:
        if r.get("finishReason") in _SUCCESS or r.get("toolCalls"):
            return _fail(f"reported as success (finish {r.get('finishReason')})")
        return OK
    symptoms = []
    if r.get("errors"):
        symptoms.append(_error_parts(r["errors"]))
    calls = r.get("toolCalls") or []
    want_finish = exp.aisdk_finish()
    if r.get("finishReason") != want_finish:
        symptoms.append(f"finish {r.get('finishReason')}")
    if [c["toolName"] for c in calls] != [c.name for c in exp.calls]:
        symptoms.append(_n_calls(len(calls)))
    else:
        for got, want in zip(calls, exp.calls):
            if got["invalid"] != (not want.valid):
                symptoms.append("invalid call" if got["invalid"] else "truncated call accepted")
            elif want.valid and got["input"] != want.input:
                symptoms.append("input differs")
    if r.get("toolErrors") and all(c.valid for c in exp.calls):
        symptoms.append("tool-error")
    return _fail(*dict.fromkeys(symptoms)) if symptoms else OK


_SUCCESS = ("stop", "tool-calls", "length", "content-filter")


def _n_calls(n: int) -> str:
    return f"{n} call" if n == 1 else f"{n} calls"


def _error_parts(errors: list[str]) -> str:
    """``error part (rejects response.created, ...)``: which events the SDK's schema refused."""
    rejected = list(dict.fromkeys(m.group(1) for e in errors if (m := _REJECTED.search(e))))
    if rejected:
        more = f" +{len(rejected) - 3}" if len(rejected) > 3 else ""
        return "error part (rejects " + ", ".join(t.removeprefix("response.") for t in rejected[:3]) + more + ")"
    return "error part: " + _short(errors[0], 50)


_REJECTED = re.compile(r'Value: \{"type":"([^"]+)"')


def _openai_py(client: Client, exp: Expected, r: dict[str, Any]) -> Outcome:
    exc = r.get("exception")
    calls = [list(c) for c in r.get("calls") or []]
    want_calls = [[c.name, c.arguments] for c in exp.calls]
    # responses.parse() (the non-streamed helper) reports truncation only in status
    helper = client.variant == "helper" and (exp.stream or client.api == "chat")
    if exp.failed and client.api == "chat":
        # an error chunk: openai-python raises APIError; an error body with HTTP 502: InternalServerError
        want = "APIError" if exp.stream else "InternalServerError"
        return OK if exc == want else _fail(_exc(r) or "failure not reported", _finish_label(client, exp, r))
    if helper and exp.failed:
        msg = r.get("message", "")
        want_exc = exc == "RuntimeError" and "response.completed" in msg
        if want_exc and "response.failed" in r.get("types", []):
            return OK
        if exc == "RuntimeError" and "before `response.failed`" in msg:  # a failure as the first event
            return OK
        return _fail(_exc(r) or "failure not reported")
    if helper and exp.truncated:
        if client.api == "responses":
            want_exc = exc == "RuntimeError" and "response.completed" in r.get("message", "")
            if want_exc and "response.incomplete" in r.get("types", []):
                return OK
        elif exc == "LengthFinishReasonError":
            return OK
        return _fail(_exc(r) or "truncation not reported", "" if r.get("exception") else _finish_label(client, exp, r))
    if helper and client.api == "chat" and exp.finish == "content_filter" and exc == "ContentFilterFinishReasonError":
        return OK  # the chat helpers' documented report of a filtered answer
    if exc:
        return _fail(_exc(r))
    symptoms = [_finish_label(client, exp, r)]
    if calls != want_calls:
        symptoms.append(_calls_label(calls, exp.calls))
    return _fail(*symptoms) if any(symptoms) else OK


def _finish_label(client: Client, exp: Expected, r: dict[str, Any]) -> str:
    if client.api == "responses":
        got = (
            r.get("terminal")
            if client.variant == "raw"
            else (
                {
                    "completed": "response.completed",
                    "incomplete": "response.incomplete",
                    "failed": "response.failed",
                }.get(r.get("status") or "", r.get("status"))
            )
        )
        if got != exp.finish:
            return f"ends {(got or 'without terminal').removeprefix('response.')}"
        return ""
    if r.get("finish") != exp.finish:
        return f"finish {r.get('finish')}"
    return ""


def _exc(r: dict[str, Any]) -> str:
    if not r.get("exception"):
        return ""
    return f"{r['exception']}: {_short(r.get('message', ''), 50)}"


def _codex(exp: Expected, r: dict[str, Any], websocket: bool = False) -> Outcome:
    out = _codex_run(exp, r)
    if not websocket or not out.ok:
        return out
    # the WebSocket row must really use it; Codex falls back to HTTPS after a failed turn,
    # which is right when the turn is meant to fail (a failed or truncated stream)
    if not r.get("ws_turns"):
        return _fail("no WebSocket turn logged upstream")
    if r.get("http_requests") and not (exp.failed or exp.truncated):
        return _fail("WebSocket turn failed, fell back to HTTP")
    return out


def _codex_run(exp: Expected, r: dict[str, Any]) -> Outcome:
    rc = r.get("rc")
    failures = [f for f in r.get("failures") or [] if f]
    if rc == "timeout":
        return _fail("hangs (timeout)")
    if exp.failed:
        if rc == 1 and failures:
            return OK
        return _fail(f"exit {rc}", "failure not reported")
    if exp.truncated:
        if rc == 1 and any("Incomplete response returned" in f for f in failures):
            return OK
        return _fail(f"exit {rc}", _codex_error(failures[-1]) if failures else "truncation not reported")
    if rc != 0:
        return _fail(f"exit {rc}", "turn.failed: " + _codex_error(failures[-1]) if failures else "")
    symptoms = []
    want_last = FOLLOWUP_TEXT if exp.calls else exp.text
    if (r.get("last") or "") != want_last:
        symptoms.append("tool call not run" if exp.calls else "wrong final message")
    if exp.writes_marker and r.get("marker") != MARKER_TEXT:
        symptoms.append("marker not written")
    return _fail(*symptoms) if symptoms else OK


def _codex_error(msg: str) -> str:
    return _short(msg.replace("stream disconnected before completion: ", ""), 70)


def _short(s: str, n: int = 60) -> str:
    s = " ".join(str(s).split())
    return s if len(s) <= n else s[: n - 1] + "…"
