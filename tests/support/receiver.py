"""A real OpenTelemetry receiver for the traces tests: Arize Phoenix, installed by
scripts/install-receiver into .cache/receivers/phoenix/ (pinned by
tests/support/receivers/phoenix/requirements.txt), run on ports of 127.0.0.1 picked here,
with its database in a folder of the test's. It takes OTLP/HTTP at ``/v1/traces`` and
serves what it stored at ``/v1/projects/default/spans`` (its REST API)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import ROOT, Proc, free_port

HOME = ROOT / ".cache" / "receivers" / "phoenix"
VERSION = "20.26.1"
START_TIMEOUT = 120.0


def require() -> None:
    """Skip (fail in CI) when Phoenix is not installed, saying why."""
    if (HOME / ".streamfix-installed").exists():
        return
    why = (
        f"Arize Phoenix {VERSION} is not installed in {HOME} (scripts/install-receiver; "
        "STREAMFIX_RECEIVER=skip skips it)"
    )
    if os.environ.get("CI") == "true" and os.environ.get("STREAMFIX_RECEIVER") != "skip":
        pytest.fail(why)
    pytest.skip(why)


class Phoenix:
    """One Phoenix server; :attr:`otlp` is its OTLP/HTTP base URL (what
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` takes)."""

    def __init__(self, workdir: Path) -> None:
        require()
        workdir.mkdir(parents=True, exist_ok=True)
        for attempt in range(3):
            self.port, grpc = free_port(), free_port()
            env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_", "PYTHON"))}
            env.update(PHOENIX_WORKING_DIR=str(workdir), PHOENIX_PORT=str(self.port), PHOENIX_GRPC_PORT=str(grpc),
                       PHOENIX_HOST="127.0.0.1", PHOENIX_TELEMETRY_ENABLED="false")  # fmt: skip
            self.proc = Proc([str(HOME / "bin" / "python"), "-m", "phoenix.server.main", "serve"], env=env)
            try:
                self.proc.wait_for(r"Uvicorn running on", START_TIMEOUT)
                break
            except (RuntimeError, TimeoutError):
                self.proc.stop()
                if attempt == 2 or "address already in use" not in self.proc.output.lower():
                    raise
        self.url = f"http://127.0.0.1:{self.port}"
        self.otlp = self.url

    def spans(self) -> list[dict[str, Any]]:
        """Every span Phoenix stored (its default project), oldest first."""
        out: list[dict[str, Any]] = []
        cursor = None
        while True:
            params: dict[str, Any] = {"limit": 1000}
            if cursor:
                params["cursor"] = cursor
            r = httpx.get(f"{self.url}/v1/projects/default/spans", params=params, timeout=30, trust_env=False)
            if r.status_code == 404:  # no span yet: the project is made by the first one
                return out
            r.raise_for_status()
            page = r.json()
            out += page["data"]
            cursor = page.get("next_cursor")
            if not cursor:
                return sorted(out, key=lambda s: s["start_time"])

    def wait_spans(self, n: int, timeout: float = 60.0) -> list[dict[str, Any]]:
        """The spans once there are at least ``n`` (the exporter batches: a few seconds)."""
        deadline = time.monotonic() + timeout
        while True:
            got = self.spans()
            if len(got) >= n or time.monotonic() > deadline:
                return got
            time.sleep(0.5)

    def stop(self) -> None:
        self.proc.stop()
