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

import re
import shutil
from pathlib import Path

import httpx
import orjson
from support import ROOT

DEPLOY = ROOT / "deploy"


def load_yaml(path: Path):
    from ruamel.yaml import YAML  # mitmproxy's own YAML library

    return YAML(typ="safe").load(path.read_text())


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
