"""Every real client against every recording, straight from the upstream and through the addon.

    .venv/bin/python tests/support/clients/harness.py                 # print the matrix
    .venv/bin/python tests/support/clients/harness.py --write-docs    # ...and update docs/clients.md
    .venv/bin/python tests/support/clients/harness.py --ablate        # which client catches each rule

The stack: the replay upstream (``python -m streamfix.replay --port 0``) and one real
``mitmdump -s addons/repair.py`` per mode, in reverse mode in front of it, each on a port
the OS picked and with its own confdir. Mode ``raw`` is the replay upstream itself;
``repaired`` is mitmdump with default options; ablation modes switch one rule off
(``--set streamfix_status=false``, ``streamfix_truncation=off``...). A client picks the
recording through its base URL ``<mode base>/rec/<recording>/v1`` (Codex:
``/rec/<recording>,responses-codex-done/v1``, so its second request, the one carrying the
tool output, gets a text answer and the turn ends).

Runs are parallel where they share nothing: one node process per AI SDK generation and
mode runs its cases concurrently, openai-python runs in threads, Codex runs two at a
time (each in its own CODEX_HOME and working directory). Every run has a timeout.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for p in (HERE, HERE.parent, HERE.parents[2]):  # tests/support/clients, tests/support (support.py), repo root
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import support
from expect import FOLLOWUP, Expected, expected_from_body, output_cap, tools_for
from judge import Outcome, judge
from runners import CLIENT_LIST, Client, installed, run_aisdk_batch, run_codex, run_openai_py

from streamfix.recordings import Recording, all_recordings

CLIENT_APIS = {"responses", "chat", "messages", "gemini"}
API_ROOT = {"gemini": "v1beta"}
"""The base URL's last segment per API (the SDKs append /responses, /chat/completions,
/messages, /models/<model>:streamGenerateContent)."""
ABLATIONS: dict[str, tuple[str, ...]] = {
    "status": ("streamfix_status=false",),
    "item_order": ("streamfix_item_order=false",),
    "output_index": ("streamfix_output_index=false",),
    "sequence": ("streamfix_sequence=false",),
    "usage": ("streamfix_usage=false",),
    "schema_fill": ("streamfix_schema_fill=false",),
    "terminal_output": ("streamfix_terminal_output=false",),
    "response_id": ("streamfix_response_id=false",),
    "tool_index": ("streamfix_tool_index=false",),
    "tool_header": ("streamfix_tool_header=false",),
    "truncation": ("streamfix_truncation=off",),
    "finish_reason": ("streamfix_finish_reason=false",),
    "announce": ("streamfix_announce=false",),
    "item_id": ("streamfix_item_id=false",),
    "replay": ("streamfix_replay=false",),
    "nonstandard": ("streamfix_nonstandard=false",),
    "eof_terminal": ("streamfix_eof_terminal=false",),
    "reasoning_summary": ("streamfix_reasoning_summary=false",),
    "no_events": ("streamfix_no_events=false",),
    "usage_chunk": ("streamfix_usage_chunk=false",),
    "cr_end": ("streamfix_cr_end=false",),
}
"""Ablation mode name -> the mitmdump ``--set`` options that switch that rule off."""
CODEX_PARALLEL = 3
SCRATCH = HERE.parents[3] / ".cache" / "clients-runs"


@dataclass
class Stack:
    """The replay upstream and one mitmdump per mode; ``bases[mode]`` is its base URL."""

    bases: dict[str, str]
    procs: list[Any] = field(default_factory=list)

    def logs(self) -> str:
        return "\n\n".join(f"$ {' '.join(p.cmd[:3])} ...\n{p.tail(30)}" for p in self.procs)


@contextmanager
def stack(modes: dict[str, tuple[str, ...]], scratch: Path, root: Path | None = None) -> Iterator[Stack]:
    """Start the replay upstream (of ``root``, default recordings/) and a mitmdump per mode."""
    replay, upstream = support.start_replay(root)
    st = Stack({"raw": upstream}, [replay])
    try:
        started: dict[str, Any] = {}

        def start(mode: str, sets: tuple[str, ...]) -> None:
            confdir = scratch / f"confdir-{mode}"
            confdir.mkdir(parents=True, exist_ok=True)
            args = [a for s in sets for a in ("--set", s)]
            started[mode] = support.start_mitmdump(upstream, confdir, *args)

        with ThreadPoolExecutor(max_workers=4) as pool:  # mitmdump takes ~1 s to start
            futures = [pool.submit(start, m, s) for m, s in modes.items()]
            errors = [f.exception() for f in futures if f.exception() is not None]
        for mode, (proc, port) in started.items():
            st.procs.append(proc)
            st.bases[mode] = f"http://127.0.0.1:{port}"
        if errors:
            raise errors[0]
        yield st
    finally:
        for p in reversed(st.procs):
            p.stop()


@dataclass
class Run:
    mode: str
    client: Client
    recording: Recording
    expected: Expected
    base_url: str
    result: dict[str, Any] | None = None
    outcome: Outcome | None = None

    @property
    def id(self) -> str:
        return f"{self.mode}|{self.client.name}|{self.recording.name}"


@dataclass
class Matrix:
    runs: list[Run]
    recordings: list[Recording]
    skipped: list[Recording]
    """Recordings no client here speaks (messages, gemini)."""
    missing: list[Client]
    """Clients not installed (scripts/install-clients not run)."""
    seconds: float

    def cell(self, mode: str, client: str, recording: str) -> Run | None:
        for r in self.runs:
            if r.mode == mode and r.client.name == client and r.recording.name == recording:
                return r
        return None

    def modes(self) -> list[str]:
        return list(dict.fromkeys(r.mode for r in self.runs))


def client_recordings(
    names: list[str] | None = None, root: Path | None = None
) -> tuple[list[Recording], list[Recording]]:
    recs = [r for r in (all_recordings(root) if root else all_recordings()) if not names or r.name in names]
    return [r for r in recs if r.api in CLIENT_APIS], [r for r in recs if r.api not in CLIENT_APIS]


def run_matrix(
    modes: dict[str, tuple[str, ...]] | None = None,
    clients: list[str] | None = None,
    recordings: list[str] | None = None,
    raw: bool = True,
    root: Path | None = None,
) -> Matrix:
    """Run every installed client against every applicable recording in every mode."""
    started = time.monotonic()
    modes = {"repaired": ()} if modes is None else modes
    recs, skipped = client_recordings(recordings, root)
    chosen = [c for c in CLIENT_LIST if not clients or c.name in clients or c.family in clients]
    missing = [c for c in chosen if not installed(c)]
    chosen = [c for c in chosen if installed(c)]
    expected = {r.name: expected_from_body(r.api, r.expected, r.streaming) for r in recs}
    # scratch (confdirs, CODEX_HOMEs, Codex working dirs) under .cache, not /tmp: Codex
    # refuses to set up its helper binaries in a CODEX_HOME under the temp dir
    SCRATCH.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="run-", dir=SCRATCH) as tmp:
        scratch = Path(tmp)
        with stack(modes, scratch, root) as st:
            all_modes = (["raw"] if raw else []) + list(modes)
            runs = []
            for mode in all_modes:
                for c in chosen:
                    for r in recs:
                        if r.api != c.api or (c.family == "codex" and not r.streaming):
                            continue  # Codex only streams
                        pick = f"{r.name},{FOLLOWUP}" if c.family == "codex" else r.name
                        root_seg = API_ROOT.get(r.api, "v1")
                        runs.append(Run(mode, c, r, expected[r.name], f"{st.bases[mode]}/rec/{pick}/{root_seg}"))
            _execute(runs, scratch, st.procs[0])
            for run in runs:
                run.outcome = judge(run.client, run.expected, run.result or {})
    return Matrix(runs, recs, skipped, missing, time.monotonic() - started)


def transport_counts(replay: Any, run_id: str) -> dict[str, int]:
    """How many WebSocket turns (prewarms apart) and HTTP requests the replay upstream
    logged for one run (its ``X-Streamfix-Run`` header)."""
    tag = f" run={run_id}"
    lines = [ln for ln in list(replay.lines) if ln.endswith(tag)]
    return {
        "ws_turns": sum(1 for ln in lines if ln.startswith("websocket turn") and ": recording " in ln),
        "http_requests": sum(1 for ln in lines if ln.startswith("http request")),
    }


def _execute(runs: list[Run], scratch: Path, replay: Any) -> None:
    batches: dict[tuple[str, str], list[Run]] = defaultdict(list)
    singles: list[Run] = []
    for run in runs:
        if run.client.family == "aisdk":
            batches[(run.client.install or "", run.mode)].append(run)
        else:
            singles.append(run)

    def aisdk(batch: list[Run]) -> None:
        cases = [
            {
                "id": r.id,
                "api": r.client.variant,
                "baseURL": r.base_url,
                "stream": r.recording.streaming,
                "tools": tools_for(r.recording.request.get("body"), r.expected.calls),
                "maxOutputTokens": (output_cap(r.recording.request.get("body")) or (None, None))[1],
            }
            for r in batch
        ]
        res = run_aisdk_batch(batch[0].client.install_dir, cases)
        for r in batch:
            r.result = res[r.id]

    def single(run: Run) -> None:
        if run.client.family == "codex":
            run_id = uuid.uuid4().hex[:12]
            run.result = run_codex(run.base_url, scratch, websocket=run.client.variant == "ws", run_id=run_id)
            time.sleep(0.2)  # the replay upstream's last log line may still be on its way
            run.result.update(transport_counts(replay, run_id))
        else:
            tools = tools_for(run.recording.request.get("body"), run.expected.calls)
            cap = output_cap(run.recording.request.get("body"))
            run.result = run_openai_py(run.client, run.base_url, tools, run.recording.streaming, cap)

    # Codex in its own small pool (each run is a process with a few threads); the node
    # batches and the in-process openai-python runs share the other
    codex = [r for r in singles if r.client.family == "codex"]
    rest = [r for r in singles if r.client.family != "codex"]
    with ThreadPoolExecutor(max_workers=CODEX_PARALLEL) as cpool, ThreadPoolExecutor(max_workers=8) as pool:
        futures = [cpool.submit(single, r) for r in codex]
        futures += [pool.submit(aisdk, b) for b in batches.values()]
        futures += [pool.submit(single, r) for r in rest]
        for f in futures:
            f.result()


# --- reading the matrix -------------------------------------------------------------


def proves_nothing(m: Matrix) -> list[str]:
    """Buggy recordings that no client fails on straight from the upstream."""
    out = []
    for rec in m.recordings:
        if rec.kind != "buggy":
            continue
        raw = [r for r in m.runs if r.mode == "raw" and r.recording.name == rec.name]
        if raw and all(r.outcome.ok for r in raw):
            out.append(rec.name)
    return out


def problems(m: Matrix, documented: dict[str, dict[str, str]] | None = None) -> list[str]:
    """Everything that is wrong: a repaired run that fails, a clean recording that fails
    raw, a raw failure that is not the documented one."""
    out = []
    for r in m.runs:
        where = f"{r.client.name} x {r.recording.name} [{r.mode}]"
        if r.mode == "repaired" and not r.outcome.ok:
            out.append(f"{where}: {r.outcome.label}  result={_brief(r.result)}")
        elif r.mode == "raw":
            if r.recording.kind == "clean" and not r.outcome.ok:
                out.append(f"{where}: clean recording fails: {r.outcome.label}  result={_brief(r.result)}")
            want = (documented or {}).get(r.recording.name, {}).get(r.client.name)
            if want is not None and want != r.outcome.label:
                out.append(f"{where}: documented raw outcome {want!r}, got {r.outcome.label!r}")
    return out


def _brief(result: dict[str, Any] | None) -> str:
    if not result:
        return "{}"
    keep = {k: v for k, v in result.items() if k not in ("types", "parts", "versions", "events", "dir")}
    s = repr(keep)
    return s if len(s) < 600 else s[:600] + "…"


def main(argv: list[str] | None = None) -> int:
    from report import ablation_table, render_text, write_docs

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--client", action="append", help="only this client (name or family); repeatable")
    ap.add_argument("--recording", action="append", help="only this recording; repeatable")
    ap.add_argument("--recordings", type=Path, help="another recordings folder (default: recordings/)")
    ap.add_argument("--ablate", action="store_true", help="also run with each repair rule switched off")
    ap.add_argument("--write-docs", action="store_true", help="update the generated part of docs/clients.md")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every failing run's result")
    a = ap.parse_args(argv)
    modes: dict[str, tuple[str, ...]] = {"repaired": ()}
    if a.ablate:
        modes.update({f"no-{k}": v for k, v in ABLATIONS.items()})
    m = run_matrix(modes, a.client, a.recording, root=a.recordings)
    print(render_text(m))
    if a.ablate:
        print(ablation_table(m, markdown=False))
    if a.verbose:
        for r in m.runs:
            if not r.outcome.ok:
                print(f"{r.id}: {r.outcome.label}\n    {_brief(r.result)}")
    if a.write_docs:
        write_docs(m)
    return 0


if __name__ == "__main__":
    sys.exit(main())
