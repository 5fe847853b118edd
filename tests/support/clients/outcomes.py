"""What a real client made of a turn, in one word, and many client runs at once.

:func:`outcome` reads a runner's result (runners.py) the way the client's user sees it:
``error`` (the client reports a failure), ``length`` (a truncation), ``content-filter``,
``incomplete`` (openai-python's raw Responses events end ``response.incomplete``), ``ok``
(a normal end) or ``finish X`` (a finish reason none of those). :func:`want` says which of
them tells a turn whose truth is an API's ending (``matrix_truth.truth``).

:func:`run_cases` runs a list of :class:`Case` (one client against one base URL, each
with its own prompt, model, key, headers and output cap): the AI SDK cases of one
generation in one node process (runners.run_aisdk_batch), openai-python and Codex cases
on threads, all at once; the result of each case by its id.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runners import PROMPT, Client, run_aisdk_batch, run_codex, run_openai_py


def outcome(client: Client, r: dict[str, Any]) -> str:
    """``error``, ``length``, ``content-filter``, ``incomplete``, ``ok`` or ``finish X``:
    what the client reported, as its user sees it."""
    if client.family == "aisdk":
        if (
            r.get("thrown")
            or r.get("errors")
            or r.get("finishReason") == "error"
            or r.get("hung")
            or r.get("probe_error")
        ):
            return "error"
        fr = r.get("finishReason")
        fr = fr.get("unified") if isinstance(fr, dict) else fr
        return {"length": "length", "content-filter": "content-filter"}.get(
            fr, "ok" if fr in ("stop", "tool-calls") else f"finish {fr}"
        )
    if client.family == "openai-py":
        exc = r.get("exception")
        if exc in ("LengthFinishReasonError",):
            return "length"
        if exc in ("ContentFilterFinishReasonError",):
            return "content-filter"
        if exc:
            return "error"
        fin = r.get("finish") or r.get("terminal") or r.get("status")
        if fin in ("response.failed", "failed") or "error" in r.get("types", ()):  # an `error` event
            return "error"
        if fin in ("length",):
            return "length"
        if fin in ("content_filter",):
            return "content-filter"
        if fin in ("response.incomplete", "incomplete"):
            return "incomplete"
        return "ok" if fin in ("stop", "tool_calls", "response.completed", "completed") else f"finish {fin}"
    failed = r.get("rc") != 0 or r.get("failures")
    return "error" if failed else "ok"


KIND = {
    **dict.fromkeys(("length", "incomplete:max_output_tokens", "max_tokens", "model_context_window_exceeded",
                     "MAX_TOKENS"), "length"),
    **dict.fromkeys(("content_filter", "incomplete:content_filter", "refusal", "SAFETY"), "content-filter"),
    **dict.fromkeys(("stop", "tool_calls", "completed", "end_turn", "tool_use", "STOP"), "ok"),
}  # fmt: skip
"""An API's ending (``matrix_truth.truth``) -> what it is to a client: a truncation, a
filtered answer or a normal end (a failure, ``matrix_truth.FAILURE``, is ``error``)."""


def want(client: Client, kind: str) -> str:
    """What :func:`outcome` says when ``client`` tells a turn of ``kind`` (``error``,
    ``length``, ``content-filter``, ``ok``; or an API's ending, :data:`KIND`) in its own
    terms."""
    w = "error" if kind in ("error", "failure") else KIND.get(kind, kind)
    if client.name == "openai-py/responses.stream" and w in ("length", "content-filter"):
        return "error"  # the helper raises "Didn't receive a `response.completed` event." on response.incomplete
    if client.family == "openai-py" and client.api == "responses" and w in ("length", "content-filter"):
        return "incomplete"  # raw events: response.incomplete (reason max_output_tokens / content_filter)
    if client.family == "codex" and w != "ok":
        return "error"  # Codex fails a response.incomplete turn (docs/truncation.md)
    return w


@dataclass(frozen=True)
class Case:
    """One client run: ``client`` against ``base`` (the API root, ``.../v1``)."""

    id: str
    client: Client
    base: str
    prompt: str = PROMPT
    model: str = "test-model"
    api_key: str = "test-key"
    headers: dict[str, str] = field(default_factory=dict)
    cap: int | None = None
    """The output-token limit sent (AI SDK ``maxOutputTokens``, chat ``max_tokens``,
    Responses ``max_output_tokens``; Codex sends none)."""


def run_cases(
    cases: list[Case],
    tools: list[dict[str, Any]],
    scratch: Path,
    threads: int = 6,
    codex_threads: int = 2,
    aisdk_batch: int = 40,
    node_procs: int = 2,
) -> dict[str, dict[str, Any]]:
    """Run every case at once; each runner's result by case id. AI SDK cases go by
    generation into node processes of at most ``aisdk_batch`` cases, ``node_procs`` at a
    time; openai-python cases on ``threads`` threads, Codex runs on ``codex_threads`` (each
    in its own folder under ``scratch``)."""
    out: dict[str, dict[str, Any]] = {}
    batches: dict[Path, list[Case]] = {}
    for c in cases:
        if c.client.family == "aisdk":
            batches.setdefault(c.client.install_dir, []).append(c)

    def aisdk(install: Path, cs: list[Case]) -> None:
        spec = [{"id": c.id, "api": c.client.variant, "stream": True, "tools": tools, "prompt": c.prompt,
                 "baseURL": c.base, "model": c.model, "apiKey": c.api_key, "headers": c.headers,
                 **({"maxOutputTokens": c.cap} if c.cap else {})} for c in cs]  # fmt: skip
        out.update(run_aisdk_batch(install, spec))

    def py(c: Case) -> None:
        cap = (("max_output_tokens" if c.client.api == "responses" else "max_tokens"), c.cap) if c.cap else None
        out[c.id] = run_openai_py(c.client, c.base, tools, True, cap, prompt=c.prompt, model=c.model,
                                  api_key=c.api_key, headers=c.headers)  # fmt: skip

    def codex(c: Case) -> None:
        out[c.id] = run_codex(c.base, scratch, prompt=c.prompt, model=c.model, api_key=c.api_key, headers=c.headers)

    scratch.mkdir(parents=True, exist_ok=True)
    with (
        ThreadPoolExecutor(max_workers=node_procs) as node,
        ThreadPoolExecutor(max_workers=threads) as pool,
        ThreadPoolExecutor(max_workers=codex_threads) as cx,
    ):
        futs = [node.submit(aisdk, inst, cs[i : i + aisdk_batch]) for inst, cs in batches.items()
                for i in range(0, len(cs), aisdk_batch)]  # fmt: skip
        futs += [cx.submit(codex, c) for c in cases if c.client.family == "codex"]
        futs += [pool.submit(py, c) for c in cases if c.client.family == "openai-py"]
        for f in futs:
            f.result()
    return out
