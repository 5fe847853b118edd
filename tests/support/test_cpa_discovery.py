"""tests/support/realcpa.py without CPA: where the tests find a CPA binary (``STREAMFIX_CPA_BIN_DIR``
only), the one line they skip with, and the config every real-CPA test writes."""

from __future__ import annotations

from pathlib import Path

import realcpa


def test_binaries_come_from_the_bin_dir_only(tmp_path, monkeypatch):
    monkeypatch.delenv("STREAMFIX_CPA_BIN_DIR", raising=False)
    assert realcpa.binary("v7.2.89") is None
    why = realcpa.missing_reason("v7.2.89")
    assert why == ("CPA v7.2.89 not available (STREAMFIX_CPA_BIN_DIR is not set): a build of CPA v7.2.89, "
                   "commit 7c61e982e490, made outside this project")  # fmt: skip
    bins = tmp_path / "bins"
    (bins / "v7.2.140").mkdir(parents=True)
    for p in (bins / "cpa-v7.2.89", bins / "v7.2.140" / "server", bins / "cpa-v7.3.4"):
        p.write_text("#!/bin/sh\n")
        p.chmod(0o755)
    (bins / "cpa-v7.3.4").chmod(0o644)  # not executable: not a binary
    monkeypatch.setenv("STREAMFIX_CPA_BIN_DIR", str(bins))
    assert realcpa.binary("v7.2.89") == bins / "cpa-v7.2.89"
    assert realcpa.binary("v7.2.140") == bins / "v7.2.140" / "server"
    assert realcpa.binary("v7.3.4") is None
    why = realcpa.missing_reason("v7.3.4")
    assert (
        why
        == f"CPA v7.3.4 not available (no cpa-v7.3.4 in STREAMFIX_CPA_BIN_DIR={bins}): a build of CPA v7.3.4, made outside this project"
    )
    assert "\n" not in why and "go " not in why  # one line, and no recipe


def test_the_commits_named_are_the_builds():
    assert realcpa.COMMITS["v7.2.89"].startswith("7c61e98") and realcpa.COMMITS["v7.2.140"].startswith("a7e3596")
    assert all(len(c) == 40 for c in realcpa.COMMITS.values())


def test_config_makes_no_outbound_call():
    """What the generated config says (docs/real-cpa.md, the recipe): local only, no panel,
    no secret, cloaking off, the provider entry direct to the fake."""
    cfg = realcpa.config(18399, Path("/tmp/a"), "claude", "http://127.0.0.1:1")
    for line in ('host: "127.0.0.1"', "port: 18399", 'auth-dir: "/tmp/a"', 'api-keys: ["test-key"]',
                 'secret-key: ""', "disable-control-panel: true", "disable-auto-update-panel: true",
                 "disable-claude-cloak-mode: true", 'base-url: "http://127.0.0.1:1"', 'proxy-url: "direct"',
                 'alias: "test-model"'):  # fmt: skip
        assert line in cfg, line
    assert "your-api-key" not in cfg
    assert set(realcpa.clean_env()) == {"PATH", "LANG", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"}


def test_every_provider_path_has_its_entry():
    """Each path of the matrix: its config key, the fake's address as its base URL (OpenAI-
    compatible: with /v1), direct, the alias the clients ask for mapped to the upstream model."""
    keys = {"claude": "claude-api-key", "interactions": "interactions-api-key", "openai": "openai-compatibility",
            "gemini": "gemini-api-key", "vertex": "vertex-api-key", "codex": "codex-api-key"}  # fmt: skip
    assert set(keys) | {"antigravity"} == set(realcpa.PROVIDER_API) == set(realcpa.UPSTREAM_MODELS)
    for path, key in keys.items():
        cfg = realcpa.config(18399, Path("/tmp/a"), path, "http://127.0.0.1:1")
        entries = cfg.split("\ndisable-claude-cloak-mode: true\n", 1)[1].split("\n", 1)[1]
        assert cfg.count("base-url:") == 1 and f"\n{key}:\n" in cfg, path
        base = "http://127.0.0.1:1/v1" if path == "openai" else "http://127.0.0.1:1"
        assert f'base-url: "{base}"' in entries and 'proxy-url: "direct"' in entries, path
        assert f'name: "{realcpa.UPSTREAM_MODELS[path]}", alias: "test-model"' in entries, path


def test_the_antigravity_path_is_a_credential_file():
    """Antigravity has no config entry: an auth file whose base_url is the fake, a token that
    does not expire (no refresh call), a project (no onboarding call), no proxy; the config
    maps the alias to the catalog model (oauth-model-alias). Nothing in it is a secret."""
    auth = realcpa.antigravity_auth("http://127.0.0.1:1")
    assert auth["type"] == "antigravity" and auth["base_url"] == "http://127.0.0.1:1"
    assert auth["expired"].startswith("2099") and auth["project_id"] and auth["proxy_url"] == "direct"
    assert all(v.startswith(("fake", "http://127.0.0.1", "2099", "direct", "antigravity")) for v in auth.values())
    cfg = realcpa.config(18399, Path("/tmp/a"), "antigravity", "http://127.0.0.1:1")
    assert "oauth-model-alias:\n  antigravity:\n" in cfg and 'alias: "test-model"' in cfg
    assert f'name: "{realcpa.UPSTREAM_MODELS["antigravity"]}"' in cfg and "base-url:" not in cfg
