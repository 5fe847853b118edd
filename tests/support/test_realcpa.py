"""realcpa.py without CPA: how it finds the binaries (and says why one is missing), and the
config it writes, which makes no outbound call."""

from __future__ import annotations

import os
from pathlib import Path

import realcpa


def test_discovery_and_skip_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(realcpa, "CACHE", tmp_path / "cache")
    monkeypatch.delenv("STREAMFIX_CPA_BIN_DIR", raising=False)
    assert realcpa.binary("v7.2.89") is None
    assert "not installed (scripts/install-cpa" in realcpa.missing_reason("v7.2.89")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "v7.2.89.not-installed").write_text("the Go module proxy refused it (403 Forbidden)\n")
    why = realcpa.missing_reason("v7.2.89")
    assert why.startswith("CPA v7.2.89 not available: the Go module proxy refused it (403 Forbidden);")
    assert "STREAMFIX_CPA_BIN_DIR=DIR" in why and "\n" not in why
    bins = tmp_path / "bins"
    (bins / "v7.2.140").mkdir(parents=True)
    for p in (bins / "cpa-v7.2.89", bins / "v7.2.140" / "server"):
        p.write_text("#!/bin/sh\n")
        p.chmod(0o755)
    monkeypatch.setenv("STREAMFIX_CPA_BIN_DIR", str(bins))
    assert realcpa.binary("v7.2.89") == bins / "cpa-v7.2.89"
    assert realcpa.binary("v7.2.140") == bins / "v7.2.140" / "server"
    installed = tmp_path / "cache" / "v7.2.89" / "server"
    installed.parent.mkdir()
    installed.write_text("#!/bin/sh\n")
    installed.chmod(0o755)
    assert realcpa.binary("v7.2.89") == installed  # .cache first
    assert os.access(installed, os.X_OK)


def test_config_makes_no_outbound_call():
    """What the generated config says (docs/real-cpa.md): local only, no panel, no
    secret, cloaking off, the provider entry direct to the fake."""
    cfg = realcpa.config(18399, Path("/tmp/a"), "claude", "http://127.0.0.1:1")
    for line in ('host: "127.0.0.1"', "port: 18399", 'auth-dir: "/tmp/a"', 'api-keys: ["test-key"]',
                 'secret-key: ""', "disable-control-panel: true", "disable-auto-update-panel: true",
                 "disable-claude-cloak-mode: true", 'base-url: "http://127.0.0.1:1"', 'proxy-url: "direct"',
                 'alias: "test-model"'):  # fmt: skip
        assert line in cfg, line
    assert "your-api-key" not in cfg
    env = realcpa.clean_env()
    assert set(env) == {"PATH", "LANG", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"}
