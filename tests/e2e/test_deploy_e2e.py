"""Deployment files (deploy/) with real tools: systemd-analyze verify, the image's install step in a
fresh venv, streamfix options in mitmproxy's own config.yaml (what the files are is checked in
process in test_deploy.py)."""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest
from support import ROOT, free_port, replay_and_proxy

DEPLOY = ROOT / "deploy"


SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


def _verify(unit: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SYSTEMD_ANALYZE, "verify", str(unit)], capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="no systemd-analyze (Debian: apt-get install systemd)")
def test_systemd_unit_verifies(tmp_path):
    text = (DEPLOY / "streamfix.service").read_text()
    assert "Restart=on-failure" in text and "KillSignal=SIGTERM" in text
    stop = int(re.search(r"^TimeoutStopSec=(\d+)$", text, re.MULTILINE).group(1))
    assert stop > 300, "systemd must wait longer than streamfix_drain_timeout's default before SIGKILL"
    unit = tmp_path / "streamfix.service"
    unit.write_text(text.replace("/opt/streamfix", str(ROOT)))
    assert (ROOT / ".venv" / "bin" / "python").exists()
    r = _verify(unit)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "streamfix.service:" not in r.stdout + r.stderr, r.stdout + r.stderr  # no line-level warning
    bad = tmp_path / "broken" / "streamfix.service"
    bad.parent.mkdir()
    bad.write_text(unit.read_text().replace(str(ROOT / ".venv"), "/nonexistent/venv").replace(
        "Restart=on-failure", "Restart=sometimes"))  # fmt: skip
    r = _verify(bad)
    assert r.returncode != 0 and "Failed to parse service restart specifier" in r.stdout + r.stderr


@pytest.mark.e2e
def test_image_install_steps_in_a_fresh_venv(tmp_path):
    """deploy/install.sh, as the Dockerfile's build stage runs it, from a copy of what that stage COPYs."""
    src = tmp_path / "src"
    src.mkdir()
    docker = re.sub(r"\\\n\s*", " ", (DEPLOY / "Dockerfile").read_text())
    build_stage = docker.split("\nFROM ", 2)[1]
    for line in build_stage.splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            *names, dest = line.split()[1:]
            for name in names:
                to = src / dest / Path(name).name if dest.endswith("/") else src / dest
                to.parent.mkdir(parents=True, exist_ok=True)
                if (ROOT / name).is_dir():
                    shutil.copytree(ROOT / name, to, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    shutil.copy(ROOT / name, to)
    assert (src / "setup.py").is_file() and (src / "deploy" / "install.sh").is_file()
    from streamfix.wire import _core

    built = _core.BUILDS / _core.key()
    if built.is_dir():  # the hook's cache: the checkout's build of these very sources (quick; the
        # from-scratch compile is tests/e2e/test_operator_deploy.py's fresh clone)
        shutil.copytree(built, src / "build" / "compiled" / built.name)
    venv = tmp_path / "venv"
    py = Path(sys.base_prefix) / "bin" / "python3"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    r = subprocess.run(["sh", str(src / "deploy" / "install.sh"), str(venv), str(src)], capture_output=True,
                       text=True, timeout=900, env={**env, "PYTHON": str(py)}, cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"streamfix installed into {venv}; protocol core: " in r.stdout
    if built.is_dir():
        assert f"protocol core: compiled (mypyc, {venv}/lib/" in r.stdout, r.stdout
    freeze = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "freeze"], capture_output=True, text=True,
                            timeout=120, env=env).stdout.lower()  # fmt: skip
    for need in ("mitmproxy==", "orjson==", "protobuf==", "prometheus_client=="):
        assert need in freeze.replace("-", "_").replace("prometheus_client", "prometheus_client"), need
    for test_only in ("pytest==", "hypothesis==", "playwright=="):
        assert test_only not in freeze, f"{test_only} is a test dependency, not the image's"
    # the installed package's addons load in mitmdump and register their options
    where = "from streamfix import addons; import os; print(os.path.dirname(addons.__file__))"
    site = subprocess.run([str(venv / "bin" / "python"), "-c", where],
                          capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path).stdout.strip()  # fmt: skip
    assert site.startswith(str(venv)), site
    opts = subprocess.run([str(venv / "bin" / "mitmdump"), "-s", f"{site}/repair.py", "--options"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)  # fmt: skip
    assert opts.returncode == 0, opts.stderr
    for name in ("streamfix_metrics:", "streamfix_drain_timeout:", "streamfix_upstream_proxyauth:", "streamfix_log:"):
        assert name in opts.stdout, name
    help_ = subprocess.run([str(venv / "bin" / "python"), "-m", "streamfix.sidecar", "--help"], capture_output=True,
                           text=True, timeout=60, env=env, cwd=tmp_path)  # fmt: skip
    assert help_.returncode == 0 and "--upstream-proxy-auth" in help_.stdout


@pytest.mark.e2e
def test_streamfix_options_in_mitmproxys_config_yaml(tmp_path):
    conf = tmp_path / "conf"
    conf.mkdir()
    log = tmp_path / "turns.jsonl"
    reg = free_port()
    text = (DEPLOY / "mitmproxy-config.example.yaml").read_text()
    text += f"streamfix_log: {log}\nstreamfix_metrics: '127.0.0.1:0'\n"
    (conf / "config.yaml").write_text(text)
    with replay_and_proxy(None, conf, "--mode", f"regular@127.0.0.1:{reg}") as (_, _, mitm, proxy):
        url = mitm.wait_for(r"streamfix: metrics at (http://\S+)/metrics", 30).group(1)
        mitm.wait_for(rf"HTTP\(S\) proxy listening at 127\.0\.0\.1:{reg}", 30)
        r = httpx.post(proxy + "/v1/responses", json={"model": "responses-devin-toolcall", "stream": True,
                       "input": "hi"}, headers={"authorization": "Bearer sk-team-a-0123456789"},
                       timeout=30, trust_env=False)  # fmt: skip
        assert r.status_code == 200
        # the regular listener asks for the credentials config.yaml gives it
        with httpx.Client(proxy=f"http://127.0.0.1:{reg}", trust_env=False, timeout=10) as c:
            assert c.get(proxy + "/v1/models").status_code == 407
        auth = "Basic " + base64.b64encode(b"cpa:PASSWORD").decode()
        with httpx.Client(proxy=f"http://127.0.0.1:{reg}", trust_env=False, timeout=10) as c:
            assert c.get(proxy + "/", headers={"proxy-authorization": auth}).status_code != 407
        deadline = time.monotonic() + 30
        while not (log.exists() and log.read_bytes().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)
        metrics = httpx.get(url + "/metrics", timeout=10, trust_env=False).text
    turn = orjson.loads(log.read_bytes().splitlines()[0])
    assert turn["key"] == "team-a"  # streamfix_key_labels from config.yaml
    assert 'key="team-a"' in metrics and "streamfix_turns_total" in metrics
