"""The real-CPA matrix's recordings (``recordings/real-cpa/``): writing them from a live run,
reading them back in CI.

One directory per cell, in the format of ``streamfix/recordings.py`` (``recording.json``,
``response.body``) plus what a real build's capture must say of itself::

    recordings/real-cpa/<version>/build.json            the build: version, commit, binary sha256
    recordings/real-cpa/<version>/<path>/<api>/<turn>/
      recording.json   the cell, the client's request, the response's status and headers,
                       how the transport ended, the provider call CPA made (its path,
                       request body and status; headers but credentials), the outcomes
                       of the live run raw and through the sidecar (realcpa_matrix.outcome)
      response.body    what CPA sent the client, byte for byte (a WebSocket turn: its
                       messages, each as one SSE event)
    recordings/real-cpa/<version>/<path>/provider/<turn>.body
                       what the fake provider sent CPA for the turn, byte for byte (shared
                       by the turn's client APIs; a cell whose provider bytes differ has its
                       own provider.body)

No credential is written: the client's key and the fake's keys are headers that are not
kept (only content-type and accept are), and the provider call's headers pass
:data:`PROVIDER_HEADERS`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import realcpa
import realcpa_matrix as m

ROOT = HERE.parents[1] / "recordings" / "real-cpa"
CONFIG_KEY = {
    "claude": "claude-api-key",
    "interactions": "interactions-api-key",
    "openai": "openai-compatibility",
    "gemini": "gemini-api-key",
    "vertex": "vertex-api-key",
    "codex": "codex-api-key",
    "antigravity": "antigravity auth file",
}
PROVIDER_HEADERS = frozenset({"content-type", "accept", "anthropic-version", "api-revision", "openai-beta"})
"""The provider call's request headers a recording keeps (never a credential)."""
CLIENT_HEADERS = frozenset({"content-type", "accept"})
RESPONSE_HEADERS = frozenset({"content-type"})


def build_info(version: str) -> dict[str, Any]:
    exe = realcpa.binary(version)
    assert exe is not None
    return {
        "version": version,
        "commit": m.COMMITS.get(version, "unknown"),
        "binary_sha256": hashlib.sha256(exe.read_bytes()).hexdigest(),
        "repository": "https://github.com/router-for-me/CLIProxyAPI",
    }


def cell_dir(root: Path, version: str, path: str, api: str, turn: str) -> Path:
    return root / version / path / api / turn


def write(root: Path, c: dict[str, Any], build: dict[str, Any]) -> Path:
    """Write one cell of a live run (``realcpa_matrix.run_cell``'s result)."""
    v, p, api, t = c["version"], c["path"], c["api"], c["turn"]
    d = cell_dir(root, v, p, api, t)
    d.mkdir(parents=True, exist_ok=True)
    raw, fixed, call = c["raw"], c["sidecar"], c["provider"]
    ws = api == "responses-ws"
    meta: dict[str, Any] = {
        "description": f"real CPA {v}, {CONFIG_KEY[p]} path, client {api}, turn {t}",
        "api": m.WIRE_API[api],
        "kind": kind(p, api, t, m.outcome(api, raw.body, raw.status, c["request"]), raw.ended),
        "source": f"captured from the real CPA {v} (commit {build['commit']}) in front of "
        f"tests/support/standins/fake_providers.py by `python tests/support/realcpa_matrix.py capture`",
        "cell": {"version": v, "path": p, "api": api, "turn": t},
        "cpa": {k: build[k] for k in ("version", "commit", "binary_sha256")},
        "request": {
            "method": "GET" if ws else "POST",
            "path": "/v1/responses" if ws else m.HTTP_PATHS[api],
            "headers": {k: v2 for k, v2 in m.HEADERS.items() if k in CLIENT_HEADERS},
            "body": c["request"],
        },
        "response": {
            "status": raw.status,
            "headers": {k: v2 for k, v2 in raw.headers.items() if k in RESPONSE_HEADERS},
        },
        "transport": "websocket" if ws else "http",
        "ended": raw.ended,
        "provider": None,
        "outcome": {
            "raw": m.outcome(api, raw.body, raw.status, c["request"]),
            "sidecar": m.outcome(api, fixed.body, fixed.status, c["request"]),
            "sidecar_ended": fixed.ended,
        },
        "started_at": int(time.time()),
        "attempts": c.get("attempts", 1),
        "consistent": c.get("consistent", True),
    }
    if ws:
        meta["response"]["headers"] = {"content-type": "text/event-stream"}  # the messages, framed as SSE
    if call is not None:
        meta["provider"] = {
            "config_key": CONFIG_KEY[p],
            "api": realcpa.PROVIDER_API[p],
            "script": call["script"],
            "method": "POST",
            "path": call["path"],
            "headers": {k.lower(): v2 for k, v2 in call["headers"].items() if k.lower() in PROVIDER_HEADERS},
            "body": call["body"],
            "status": call["status"],
            "ended": call["ended"],
            "response_file": _provider_file(root, d, v, p, t, call["response"]),
        }
    (d / "response.body").write_bytes(raw.body)
    (d / "recording.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
    return d


def kind(path: str, api: str, turn: str, raw: dict[str, Any], ended: str) -> str:
    """``clean``: the raw stream is correct (no contract rule broken) and tells the turn's
    truth (tests/support/matrix_truth.py): the sidecar must pass it byte for byte. Else ``buggy``."""
    import matrix_truth

    return "clean" if not raw["violations"] and matrix_truth.told(path, api, turn, raw, ended) else "buggy"


def _provider_file(root: Path, d: Path, version: str, path: str, turn: str, body: bytes) -> str:
    """Where a cell's provider body is kept, relative to the cell's directory: one file per
    (version, path, turn), ``<version>/<path>/provider/<turn>.body``, which every client
    API of the turn shares (the fake sends the same bytes whatever CPA translates them
    into), or the cell's own ``provider.body`` when its bytes differ."""
    shared = root / version / path / "provider" / f"{turn}.body"
    if not shared.exists():
        shared.parent.mkdir(parents=True, exist_ok=True)
        shared.write_bytes(body)
    if shared.read_bytes() == body:
        return str(shared.relative_to(d, walk_up=True))
    (d / "provider.body").write_bytes(body)
    return "provider.body"


ATTEMPTS = 10
"""Tries of a cell whose two live requests (raw, through the sidecar) CPA answered differently."""


def consistent(live: m.Live, version: str, path: str, api: str, turn: str) -> dict[str, Any]:
    """One cell live, retried until CPA answered its raw and its sidecar request alike: CPA
    is not deterministic everywhere (v7.2.140's Responses WebSocket sometimes sends the
    provider's error before it drops the socket, sometimes not; v7.2.89's races the error
    against its own 408), and a capture's sidecar outcome is what the replay of its raw
    stream must give. ``attempts`` says how many runs it took."""
    import matrix_replay

    for attempt in range(1, ATTEMPTS + 1):
        c = m.run_cell(live, version, path, api, turn)
        c["attempts"] = attempt
        meta = {
            "request": {
                "method": "GET" if api == "responses-ws" else "POST",
                "path": "/v1/responses" if api == "responses-ws" else m.HTTP_PATHS[api],
                "body": c["request"],
            },
            "response": {"status": c["raw"].status, "headers": c["raw"].headers},
            "transport": "websocket" if api == "responses-ws" else "http",
            "started_at": int(time.time()),
        }
        replayed = m.outcome(api, matrix_replay.replay(meta, c["raw"].body), c["raw"].status, c["request"])
        c["consistent"] = m.same(replayed, m.outcome(api, c["sidecar"].body, c["sidecar"].status, c["request"]))
        if c["consistent"]:
            return c
    print(f"warning: {version} {path} {api} {turn}: CPA answered the raw and the sidecar request differently "
          f"{ATTEMPTS} times; captured as inconsistent (the CI replay will fail it: capture again)", file=sys.stderr)  # fmt: skip
    return c


def capture(
    versions: list[str], paths: list[str], apis: list[str], turns: list[str], out: Path | None, keep: bool = False
) -> int:
    """Run the cells and write their recordings; without ``keep`` a version's old
    recordings go first (a capture is whole)."""
    root = out or ROOT
    tmp = Path(tempfile.mkdtemp(prefix="cpa-matrix-"))
    live = m.Live(tmp)
    lock = threading.Lock()
    done = 0
    try:
        builds = {v: build_info(v) for v in versions}
        for v in versions:
            if not keep and (root / v).exists():
                shutil.rmtree(root / v)
            (root / v).mkdir(parents=True, exist_ok=True)
            (root / v / "build.json").write_text(json.dumps(builds[v], indent=1) + "\n")
        by_stack: dict[tuple[str, str], list[tuple[str, str, str, str]]] = {}
        for cell in m.cells(versions, paths, apis, turns):
            by_stack.setdefault(cell[:2], []).append(cell)

        def run(stack_cells: list[tuple[str, str, str, str]]) -> None:
            nonlocal done
            for v, p, api, t in stack_cells:
                c = consistent(live, v, p, api, t)
                write(root, c, builds[v])
                with lock:
                    done += 1
                    o = json.loads((cell_dir(root, v, p, api, t) / "recording.json").read_text())["outcome"]
                    print(
                        f"{done:4} {v:9} {p:12} {api:12} {t:15} raw {o['raw']['ending']:32} "
                        f"sidecar {o['sidecar']['ending']}",
                        flush=True,
                    )

        # start the stacks one by one (CPA's start is the slow part), run them two at a time
        for key in by_stack:
            live.get(*key)
        with ThreadPoolExecutor(max_workers=2) as pool:
            for f in [pool.submit(run, cs) for cs in by_stack.values()]:
                f.result()
    finally:
        live.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{done} cells written to {root}")
    return 0


# --- reading them back ----------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    dir: Path
    meta: dict[str, Any]

    @property
    def key(self) -> tuple[str, str, str, str]:
        c = self.meta["cell"]
        return c["version"], c["path"], c["api"], c["turn"]

    @property
    def api(self) -> str:
        return self.meta["cell"]["api"]

    @property
    def body(self) -> bytes:
        return (self.dir / "response.body").read_bytes()

    @property
    def provider_body(self) -> bytes | None:
        call = self.meta.get("provider")
        return (self.dir / call["response_file"]).read_bytes() if call else None


def load(root: Path = ROOT) -> list[Cell]:
    return [Cell(p.parent, json.loads(p.read_text())) for p in sorted(root.glob("*/*/*/*/recording.json"))]


def builds(root: Path = ROOT) -> dict[str, dict[str, Any]]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(root.glob("*/build.json"))}


def expected_cells() -> Iterator[tuple[str, str, str, str]]:
    return m.cells()


def write_docs() -> int:
    import matrix_docs

    return matrix_docs.main()
