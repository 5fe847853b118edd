"""A real Prometheus beside the sidecar (Debian's ``prometheus``, installed by
``scripts/install-prometheus``): started on a scrape config with docs/prometheus-rules.yml
loaded, and queried; the metrics tests (tests/e2e/test_metrics_prometheus.py) and the
workers' (tests/e2e/test_workers.py) share it."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import httpx
import pytest
from chain import TIMEOUT
from support import ROOT, Proc, child_env, free_port

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
RULES = ROOT / "docs" / "prometheus-rules.yml"
DASHBOARD = ROOT / "docs" / "grafana-dashboard.json"
KEYS = ["sk-one-SECRET-1", "sk-two-SECRET-2", "sk-three-SECRET-3"]
MODELS = ["devin/swe-2", "made-up-model-a", "made-up-model-b"]
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None,
    reason="no prometheus on PATH (scripts/install-prometheus installs Debian's with apt-get; it could not here)",
)


def metrics_url(mitm: Proc) -> str:
    return mitm.wait_for(r"streamfix: metrics at (http://\S+)/metrics", TIMEOUT).group(1)


class Prom:
    def __init__(self, d: Path, target: str) -> None:
        self.port = free_port()
        cfg = d / "prometheus.yml"
        shutil.copy(RULES, d / "rules.yml")
        cfg.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "rule_files: [rules.yml]\n"
            "scrape_configs:\n"
            f"  - job_name: streamfix\n    static_configs: [{{targets: ['{target}']}}]\n"
        )
        self.proc = Proc([PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={d / 'tsdb'}",
                          f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=info"],
                         cwd=d, env=child_env())  # fmt: skip
        self.proc.wait_for(r"Server is ready to receive web requests", TIMEOUT)
        self.base = f"http://127.0.0.1:{self.port}"

    def query(self, q: str) -> list[dict]:
        r = httpx.get(f"{self.base}/api/v1/query", params={"query": q}, timeout=10, trust_env=False)
        body = r.json()
        assert r.status_code == 200 and body["status"] == "success", (q, body)
        return body["data"]["result"]

    def values(self, q: str, *labels: str) -> dict[tuple, float]:
        return {tuple(s["metric"].get(n, "") for n in labels): float(s["value"][1]) for s in self.query(q)}

    def wait(self, q: str, want: float, timeout: float = TIMEOUT) -> None:
        end = time.monotonic() + timeout
        got = None
        while time.monotonic() < end:
            res = self.query(q)
            got = float(res[0]["value"][1]) if res else None
            if got == want:
                return
            time.sleep(0.5)
        raise AssertionError(f"{q}: {got}, want {want}")
