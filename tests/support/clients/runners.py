"""The real clients, and how one is run against one base URL.

Three families:

- **AI SDK** (``ai`` + ``@ai-sdk/openai``, three generations installed by
  ``scripts/install-clients`` into ``.cache/clients/aisdk{5,6,7}``): one ``node
  aisdk_probe.mjs`` process per generation runs a whole batch of cases concurrently.
- **openai-python** (the venv's ``openai``): raw ``create(stream=True)`` iteration and the
  accumulating helpers ``responses.stream()`` / ``chat.completions.stream()``, in this
  process, one thread per case.
- **Codex** (``codex exec``, ``.cache/clients/codex``): one process per case with a
  throwaway ``CODEX_HOME`` whose model provider is the base URL (wire_api responses, no
  retries, short idle timeout), in its own working directory, so the tool it calls
  really runs there; the ``codex-ws`` row's provider has ``supports_websockets = true``
  (Responses over a WebSocket).

Every run is bounded by a timeout; a run never raises, it returns a result dict (what
the client saw, or what went wrong) for ``judge.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
CLIENTS = ROOT / ".cache" / "clients"
AISDK_PROBE = HERE / "aisdk_probe.mjs"

CASE_TIMEOUT = 30.0
"""Seconds one openai-python run may take (a replayed stream takes well under 2 s)."""
AISDK_TIMEOUT = 30.0
"""Seconds one AI SDK case may take; a case still unsettled then is reported as a hang
(AI SDK 5 never settles on some broken chat streams, so this bounds the whole batch). A
batch runs all its cases at once (90 and more, through one mitmdump, beside the other
pytest worker): a case that takes well under 2 s alone took 12.2 s in a clean-clone CI
run, so the bound leaves room for that."""
CODEX_IDLE_MS = 10000
CODEX_TIMEOUT = 90.0
"""Seconds one ``codex exec`` run may take: two model turns, a tool run between them, and
a stalled stream given up after :data:`CODEX_IDLE_MS` by Codex itself, so a real hang is
Codex's own failure well inside it. Alone a run takes about 8 s (two at a time); in three CI runs of the whole
suite (load average 9-13, beside the real-CPA tests) raw runs on the #4429 recordings hit
the 30 s of :data:`CASE_TIMEOUT` and were reported as hangs they are not."""
PROMPT = "Run the probe command, then say ALL DONE."


@dataclass(frozen=True)
class Client:
    name: str
    """Row label: ``aisdk7/responses``, ``openai-py/chat.stream``, ``codex``."""
    family: str
    """``aisdk``, ``openai-py`` or ``codex``."""
    api: str
    """The API it speaks here: ``responses``, ``chat``, ``messages`` or ``gemini``."""
    variant: str
    """aisdk: ``responses``/``chat``/``compatible``/``anthropic``/``google``; openai-py:
    ``raw``/``helper``."""
    install: str | None = None
    """Folder under .cache/clients (aisdk, codex)."""

    @property
    def install_dir(self) -> Path | None:
        return CLIENTS / self.install if self.install else None


CLIENT_LIST: tuple[Client, ...] = (
    Client("aisdk7/responses", "aisdk", "responses", "responses", "aisdk7"),
    Client("aisdk7/chat", "aisdk", "chat", "chat", "aisdk7"),
    Client("aisdk7/anthropic", "aisdk", "messages", "anthropic", "aisdk7"),
    Client("aisdk7/google", "aisdk", "gemini", "google", "aisdk7"),
    Client("aisdk6/responses", "aisdk", "responses", "responses", "aisdk6"),
    Client("aisdk6/chat", "aisdk", "chat", "chat", "aisdk6"),
    Client("aisdk6/compatible", "aisdk", "chat", "compatible", "aisdk6"),
    Client("aisdk5/responses", "aisdk", "responses", "responses", "aisdk5"),
    Client("aisdk5/chat", "aisdk", "chat", "chat", "aisdk5"),
    Client("openai-py/responses", "openai-py", "responses", "raw"),
    Client("openai-py/responses.stream", "openai-py", "responses", "helper"),
    Client("openai-py/chat", "openai-py", "chat", "raw"),
    Client("openai-py/chat.stream", "openai-py", "chat", "helper"),
    Client("codex", "codex", "responses", "exec", "codex"),
    Client("codex-ws", "codex", "responses", "ws", "codex"),
)


def installed(client: Client) -> bool:
    d = client.install_dir
    return d is None or (d / ".streamfix-installed").exists()


def versions() -> dict[str, str]:
    """Installed version of every client package (for the matrix header)."""
    out: dict[str, str] = {}
    for gen in ("aisdk7", "aisdk6", "aisdk5", "codex"):
        nm = CLIENTS / gen / "node_modules"
        for pkg in (
            "ai",
            "@ai-sdk/openai",
            "@ai-sdk/openai-compatible",
            "@ai-sdk/anthropic",
            "@ai-sdk/google",
            "@openai/codex",
        ):
            pj = nm / pkg / "package.json"
            if pj.exists():
                out[f"{gen}:{pkg}"] = json.loads(pj.read_text())["version"]
    try:
        import openai

        out["openai-py:openai"] = openai.__version__
    except ImportError:
        pass
    out["node"] = _node_version()
    return out


def _node_version() -> str:
    try:
        return subprocess.run(
            ["node", "--version"], check=False, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "missing"


# --- AI SDK -------------------------------------------------------------------------


def run_aisdk_batch(install: Path, cases: list[dict[str, Any]], timeout: float = AISDK_TIMEOUT) -> dict[str, dict]:
    """Run ``cases`` (id, api, baseURL, tools) in one node process; results by id."""
    for c in cases:
        c.setdefault("timeoutMs", int(timeout * 1000))
    results: dict[str, dict] = {}
    try:
        p = subprocess.run(
            ["node", str(AISDK_PROBE), str(install)],
            check=False,
            input=json.dumps(cases),
            capture_output=True,
            text=True,
            timeout=timeout + 30,
            cwd=install,
        )
        for line in p.stdout.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                results[r["id"]] = r
        missing = f"node exited {p.returncode}: {p.stderr.strip()[-400:]}"
    except subprocess.TimeoutExpired:
        missing = "node probe timed out"
    for c in cases:
        results.setdefault(c["id"], {"id": c["id"], "probe_error": missing})
    return results


# --- openai-python --------------------------------------------------------------------


def run_openai_py(
    client: Client,
    base_url: str,
    tools: list[dict[str, Any]],
    stream: bool = True,
    cap: tuple[str, int] | None = None,
    timeout: float = CASE_TIMEOUT,
    prompt: str = PROMPT,
    model: str = "test-model",
    api_key: str = "test-key",
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One request; ``stream=False`` uses ``create()`` (raw) or ``parse()`` (the helper);
    ``cap`` is the recorded request's output-token limit (key, value), sent the same way.
    ``prompt`` is the user message, ``model`` the model asked for, ``api_key`` the key sent
    and ``headers`` go with the request (a gateway's routing headers)."""
    import openai

    oa = openai.OpenAI(
        base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout, default_headers=headers or None
    )
    out: dict[str, Any] = {"calls": [], "types": []}
    started = time.monotonic()
    try:
        extra: dict[str, Any] = {}
        if cap:
            extra = (
                {"max_output_tokens": cap[1]}
                if client.api == "responses"
                else {cap[0] if cap[0] in ("max_tokens", "max_completion_tokens") else "max_tokens": cap[1]}
            )
        ask = {"model": model, "prompt": prompt}
        if not stream:
            _py_json(oa, client, tools, out, extra, **ask)
        elif client.api == "responses":
            _py_responses(oa, client.variant, tools, out, extra, **ask)
        else:
            _py_chat(oa, client.variant, tools, out, extra, **ask)
    except Exception as e:  # noqa: BLE001 - the point: record what the client raised
        out["exception"] = type(e).__name__
        out["message"] = str(e)[:300]
    out["elapsed"] = round(time.monotonic() - started, 2)
    return out


def _responses_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"type": "function", "name": t["name"], "description": t["description"], "parameters": t["parameters"]}
        for t in tools
    ]


def _chat_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t["name"], "description": t["description"], "parameters": t["parameters"]},
        }
        for t in tools
    ]


def _py_json(
    oa, client: Client, tools: list[dict[str, Any]], out: dict[str, Any], extra: dict[str, Any], model: str, prompt: str
) -> None:
    helper = client.variant == "helper"
    if client.api == "responses":
        kw = dict(model=model, input=prompt, tools=_responses_tools(tools), **extra)
        r = oa.responses.parse(**kw) if helper else oa.responses.create(**kw)
        out["status"] = r.status
        out["terminal"] = f"response.{r.status}"
        out["calls"] = [[i.name, i.arguments] for i in r.output if i.type == "function_call"]
        out["text"] = r.output_text
        return
    ctools = _chat_tools(tools)
    if helper:  # parse() only accepts strict function tools (it parses their arguments)
        ctools = [{"type": "function", "function": dict(t["function"], strict=True)} for t in ctools]
    kw = dict(model=model, messages=[{"role": "user", "content": prompt}], tools=ctools, **extra)
    r = oa.chat.completions.parse(**kw) if helper else oa.chat.completions.create(**kw)
    ch = r.choices[0]
    out["finish"] = ch.finish_reason
    out["calls"] = [[tc.function.name, tc.function.arguments] for tc in ch.message.tool_calls or []]
    out["text"] = ch.message.content or ""


def _py_responses(
    oa, variant: str, tools: list[dict[str, Any]], out: dict[str, Any], extra: dict[str, Any], model: str, prompt: str
) -> None:
    kw = dict(model=model, input=prompt, tools=_responses_tools(tools), **extra)
    if variant == "raw":
        text = []
        for ev in oa.responses.create(stream=True, **kw):
            out["types"].append(ev.type)
            if ev.type == "response.output_item.done" and getattr(ev.item, "type", None) == "function_call":
                out["calls"].append([ev.item.name, ev.item.arguments])
            elif ev.type == "response.output_text.delta":
                text.append(ev.delta)
            elif ev.type in ("response.completed", "response.incomplete", "response.failed"):
                out["terminal"] = ev.type
        out["text"] = "".join(text)
        return
    with oa.responses.stream(**kw) as stream:
        for ev in stream:
            out["types"].append(ev.type)
        final = stream.get_final_response()
    out["status"] = final.status
    out["calls"] = [[i.name, i.arguments] for i in final.output if i.type == "function_call"]
    out["text"] = final.output_text


def _py_chat(
    oa, variant: str, tools: list[dict[str, Any]], out: dict[str, Any], extra: dict[str, Any], model: str, prompt: str
) -> None:
    kw = dict(model=model, messages=[{"role": "user", "content": prompt}], tools=_chat_tools(tools), **extra)
    if variant == "raw":
        # what straightforward user code does: merge tool_calls deltas by their index
        calls: dict[int, list[str]] = {}
        text = []
        for chunk in oa.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw):
            for ch in chunk.choices:
                if ch.index != 0:
                    continue
                d = ch.delta
                if d.content:
                    text.append(d.content)
                for tc in d.tool_calls or []:
                    slot = calls.setdefault(tc.index, ["", ""])
                    if tc.function and tc.function.name and not slot[0]:
                        slot[0] = tc.function.name
                    if tc.function and tc.function.arguments:
                        slot[1] += tc.function.arguments
                if ch.finish_reason:
                    out["finish"] = ch.finish_reason
        out["calls"] = [calls[i] for i in calls]
        out["text"] = "".join(text)
        return
    with oa.chat.completions.stream(**kw) as stream:
        for ev in stream:
            out["types"].append(ev.type)
        final = stream.get_final_completion()
    ch = final.choices[0]
    out["finish"] = ch.finish_reason
    out["calls"] = [[tc.function.name, tc.function.arguments] for tc in ch.message.tool_calls or []]
    out["text"] = ch.message.content or ""


# --- Codex ----------------------------------------------------------------------------

CODEX_CONFIG = """\
model = "{model}"
model_provider = "streamfix"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.streamfix]
name = "streamfix"
base_url = "{base_url}"
env_key = "STREAMFIX_TEST_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = {idle}
http_headers = {{ {headers} }}
"""
CODEX_WEBSOCKET = "supports_websockets = true\n"
"""Added to the provider for the ``codex-ws`` row: Codex then speaks Responses over a
WebSocket on ``<base_url>/responses`` (a ``generate: false`` prewarm, then one
``response.create`` per request) and falls back to HTTPS only after failures."""


def run_codex(
    base_url: str,
    scratch: Path,
    timeout: float = CODEX_TIMEOUT,
    websocket: bool = False,
    run_id: str = "",
    prompt: str = PROMPT,
    model: str = "test-model",
    api_key: str = "test-key",
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``codex exec`` once; ``base_url`` should name a follow-up recording for turn 2.

    ``websocket``: the provider supports WebSockets (the ``codex-ws`` row). ``run_id`` goes
    out as the ``X-Streamfix-Run`` header of every request and handshake, so the replay
    upstream's log shows which transport this run really used. ``prompt`` is the task,
    ``model`` the provider's model, ``api_key`` its key (sent as a bearer token) and
    ``headers`` go with every request (a gateway's routing headers; an ``authorization``
    among them is left to ``api_key``)."""
    binary = CLIENTS / "codex" / "node_modules" / ".bin" / "codex"
    run = Path(tempfile.mkdtemp(prefix="codex-", dir=scratch))
    home, work = run / "home", run / "work"
    home.mkdir()
    work.mkdir()
    sent = {"x-streamfix-run": run_id or run.name}
    sent.update((k, v) for k, v in (headers or {}).items() if k.lower() != "authorization")
    config = CODEX_CONFIG.format(
        base_url=base_url,
        idle=CODEX_IDLE_MS,
        model=model,
        headers=", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in sent.items()),
    )
    (home / "config.toml").write_text(config + (CODEX_WEBSOCKET if websocket else ""))
    env = dict(os.environ, CODEX_HOME=str(home), STREAMFIX_TEST_KEY=api_key, NO_COLOR="1")
    env.pop("OPENAI_API_KEY", None)
    last = run / "last.txt"
    out: dict[str, Any] = {"dir": str(run)}
    started = time.monotonic()
    try:
        p = subprocess.run(
            [str(binary), "exec", "--json", "--skip-git-repo-check", "--ephemeral", "-o", str(last), prompt],
            check=False,
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        out["rc"] = p.returncode
        stdout, stderr = p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        out["rc"] = "timeout"
        stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        stderr = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    out["elapsed"] = round(time.monotonic() - started, 2)
    events = []
    for line in stdout.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    out["events"] = [e.get("type") for e in events]
    out["failures"] = [
        str((e.get("error") or {}).get("message") or e.get("message") or "")[:300]
        for e in events
        if e.get("type") in ("turn.failed", "error")
    ]
    out["commands"] = [
        [(e.get("item") or {}).get("command"), (e.get("item") or {}).get("exit_code")]
        for e in events
        if e.get("type") == "item.completed" and (e.get("item") or {}).get("type") == "command_execution"
    ]
    out["last"] = last.read_text().strip() if last.exists() else None
    marker = work / "probe-marker.txt"
    out["marker"] = marker.read_text().strip() if marker.exists() else None
    out["stderr"] = stderr.strip()[-400:]
    if out["rc"] == 0:  # a failed run's folder stays until the harness's scratch goes
        shutil.rmtree(run, ignore_errors=True)
    return out
