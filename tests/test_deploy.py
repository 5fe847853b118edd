"""Deployment files (deploy/): what can be checked without a container engine.

* deploy/streamfix.service passes ``systemd-analyze verify`` (with its paths pointed at
  this checkout, whose venv exists), and a broken copy does not (the check can fail);
* deploy/compose.yaml parses and has what docs/operations.md promises: a ``streamfix``
  service in front of ``cpa`` (``--upstream http://cpa:8317``), ports published on
  loopback only, the upstream-proxy port not published, a drain-sized stop grace period,
  CPA trusting the CA bundle through ``SSL_CERT_FILE``, CPA's ``proxy-url`` pointing at
  the sidecar's upstream listener with credentials; the sidecar command line is accepted
  by the real launcher and builds the two listeners;
* the image's install step (deploy/install.sh, which the Dockerfile runs) works the same
  in a fresh venv: runtime dependencies only, the addons load in mitmdump;
* streamfix options in mitmproxy's own config.yaml (confdir) take effect.
"""

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


def load_yaml(path: Path):
    from ruamel.yaml import YAML  # mitmproxy's own YAML library

    return YAML(typ="safe").load(path.read_text())


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


def test_compose_file_has_streamfix_beside_cpa():
    from streamfix import sidecar

    c = load_yaml(DEPLOY / "compose.yaml")
    svc = c["services"]
    assert {"streamfix", "cpa", "ca-bundle"} <= set(svc)
    sf, cpa = svc["streamfix"], svc["cpa"]
    cmd = sf["command"]
    assert cmd[cmd.index("--upstream") + 1] == "http://cpa:8317"
    # every published port is on the host's loopback; CPA's proxy port is not published
    for p in sf["ports"]:
        assert p.startswith("127.0.0.1:"), p
    assert not any(p.endswith(":8080") for p in sf["ports"])
    assert "ports" not in cpa
    grace = sf["stop_grace_period"]
    assert grace.endswith("s") and int(grace[:-1]) > 300
    assert "test" in sf["healthcheck"] and "/livez" in " ".join(sf["healthcheck"]["test"])
    # CPA trusts the bundle (system roots + mitmproxy's CA) the ca-bundle job writes
    bundle = cpa["environment"]["SSL_CERT_FILE"]
    assert any(v.endswith(":" + str(Path(bundle).parent) + ":ro") for v in cpa["volumes"])
    assert "mitmproxy-ca-cert.pem" in " ".join(svc["ca-bundle"]["entrypoint"])
    assert "ca-certificates.crt" in " ".join(svc["ca-bundle"]["entrypoint"])
    assert cpa["depends_on"]["ca-bundle"]["condition"] == "service_completed_successfully"
    # CPA's proxy-url: the sidecar's upstream listener on the compose network, with credentials
    conf = load_yaml(DEPLOY / "cpa-config.example.yaml")
    proxy = httpx.URL(conf["proxy-url"])
    listen = cmd[cmd.index("--upstream-proxy") + 1]
    assert proxy.host == "streamfix" and proxy.port == int(listen.rsplit(":", 1)[1]) and proxy.username
    mitm_conf = load_yaml(DEPLOY / "mitmproxy-config.example.yaml")
    assert mitm_conf["streamfix_upstream_proxyauth"] == f"{proxy.username}:{proxy.password}"
    # the launcher takes this command line and builds the listeners from it
    i = cmd.index("--")
    mitm = sidecar.mitm_command("http://cpa:8317", cmd[cmd.index("--listen") + 1], listen, False, False, cmd[i + 1 :])
    assert mitm[mitm.index("--mode") + 1] == "reverse:http://cpa:8317@0.0.0.0:8318"
    assert "regular@0.0.0.0:8080" in mitm
    # the Dockerfile's CMD and the compose command agree, and it runs deploy/install.sh
    docker = (DEPLOY / "Dockerfile").read_text()
    assert "RUN deploy/install.sh" in docker and "STOPSIGNAL SIGTERM" in docker
    dcmd = orjson.loads(re.search(r"^CMD (\[.*?\])$", docker.replace("\\\n", ""), re.MULTILINE | re.DOTALL).group(1))
    assert dcmd == cmd


def test_the_launcher_accepts_the_compose_command_only_with_credentials(tmp_path):
    cmd = load_yaml(DEPLOY / "compose.yaml")["services"]["streamfix"]["command"]
    i = cmd.index("--")
    from streamfix import sidecar

    assert sidecar._has_proxyauth(cmd[i + 1 :]) is False
    conf = tmp_path / "mitmproxy"
    conf.mkdir()
    shutil.copy(DEPLOY / "mitmproxy-config.example.yaml", conf / "config.yaml")
    args = [a.replace("confdir=/data/mitmproxy", f"confdir={conf}") for a in cmd[i + 1 :]]
    assert sidecar._has_proxyauth(args) is True


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
        # from-scratch compile is tests/test_operator_deploy.py's fresh clone)
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
