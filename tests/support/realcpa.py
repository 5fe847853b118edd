"""A real CLIProxyAPI ("CPA") binary started by the tests, in front of tests/support/standins/fake_providers.py.

Binaries are built outside this project (from CPA's public repository, router-for-me/
CLIProxyAPI, at the commits :data:`COMMITS` names) and found in ``$STREAMFIX_CPA_BIN_DIR``
only, as ``cpa-<version>`` or ``<version>/server``. A version found nowhere makes its
tests skip with one line saying what is missing (:func:`missing_reason`).

:func:`start` runs one CPA with a generated config.yaml in its own temp directory (its
working directory: CPA reads ``.env`` and writes ``logs/`` there) and a clean
environment, configured so that it makes no outbound call (docs/real-cpa.md, "How the
tests start CPA"): ``-local-model``, management panel disabled and no secret, empty
``auth-dir``, ``disable-claude-cloak-mode``, every provider entry ``proxy-url: direct``
to the local fake, ``HTTPS_PROXY`` pointing at a closed local port (the Antigravity
version fetch, which has no switch, fails at once). CPA has no port 0: a free port is
picked and the start retried when another process took it meanwhile. Ready when
``GET /healthz`` answers 200.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from support import ROOT, Proc, free_port

CLIENT_KEY = "test-key"
"""The client key every runner in tests/clients sends (``Authorization: Bearer test-key``)."""
MODEL = "test-model"
"""The model alias the clients ask for; each CPA routes it to one provider."""
UPSTREAM_MODELS = {"claude": "claude-sonnet-4-5-20250929", "interactions": "gemini-2.5-flash", "openai": "fake-gpt",
                   "gemini": "gemini-2.5-flash", "vertex": "gemini-2.5-flash", "codex": "gpt-5-codex",
                   "antigravity": "gemini-3-flash"}  # fmt: skip
PROVIDER_API = {"claude": "anthropic", "interactions": "interactions", "openai": "chat", "gemini": "gemini",
                "vertex": "gemini", "codex": "responses", "antigravity": "antigravity"}  # fmt: skip
"""CPA's provider path (its config entry) -> the provider API the fake speaks there
(tests/support/standins/fake_providers.py): ``claude-api-key``, ``interactions-api-key``,
``openai-compatibility``, ``gemini-api-key`` (AI Studio), ``vertex-api-key`` and
``codex-api-key`` (with a ``base-url``: CPA posts ``{base}/responses``), and Antigravity,
an OAuth credential file in ``auth-dir`` (:func:`antigravity_auth`) whose ``base_url`` CPA
honours (it posts ``{base}/v1internal:streamGenerateContent?alt=sse``, the Gemini Code
Assist envelope); the client's model is an ``oauth-model-alias`` of a catalog model."""


def antigravity_auth(upstream: str) -> dict[str, str]:
    """An Antigravity credential CPA uses as it is: an access token that does not expire
    before 2099 (no refresh call), a project id (no onboarding call), the fake as its
    ``base_url``, no proxy. Nothing in it is a real secret."""
    return {"type": "antigravity", "access_token": "fake-antigravity-token", "refresh_token": "fake-refresh",
            "expired": "2099-01-01T00:00:00Z", "project_id": "fake-project", "email": "fake@example.com",
            "base_url": upstream, "proxy_url": "direct"}  # fmt: skip


VERSIONS = ("v7.2.89", "v7.2.140", "v7.3.4", "v8.0.78")
"""Every version a test may ask for: v7.2.89 (last with the Claude item-order bug #4429),
v7.2.140 (the newest tag of the public repository: #4429 fixed), v7.3.4 (the Devin
report's build, #5851) and v8.0.78 (a fixed v8), which no public tag holds: their tests
skip unless a binary is provided."""
COMMITS = {
    "v7.2.89": "7c61e982e490f028d295d69e22e372b29cd2db8c",
    "v7.2.140": "a7e3596b7e351d800e58ed29529fbca3d1c18737",
    "pr5111": "98fbaedf9370056f6d22a9ef35197df7647b3745",
}
"""The commit of CPA's public repository each build the tests were run with was compiled
from (v7.2.89 and v7.2.140: the tags; pr5111: ``refs/pull/5111/head``)."""


def binary(version: str) -> Path | None:
    bin_dir = os.environ.get("STREAMFIX_CPA_BIN_DIR")
    if not bin_dir:
        return None
    for c in (Path(bin_dir) / f"cpa-{version}", Path(bin_dir) / version / "server"):
        if c.is_file() and os.access(c, os.X_OK):
            return c
    return None


def missing_reason(version: str) -> str:
    """One line: which binary is missing, and where the tests look for it."""
    commit = f", commit {COMMITS[version][:12]}" if version in COMMITS else ""
    where = os.environ.get("STREAMFIX_CPA_BIN_DIR")
    looked = f"no cpa-{version} in STREAMFIX_CPA_BIN_DIR={where}" if where else "STREAMFIX_CPA_BIN_DIR is not set"
    return f"CPA {version} not available ({looked}): a build of CPA {version}{commit}, made outside this project"


def config_head(port: int, auth_dir: Path, proxy_url: str = "") -> str:
    """The part of CPA's config.yaml every test's shares: loopback only, the client key, no
    outbound call of CPA's own (no panel, no retries or cooling), ``proxy_url`` global."""
    return f"""\
host: "127.0.0.1"
port: {port}
auth-dir: "{auth_dir}"
api-keys: ["{CLIENT_KEY}"]
debug: true
logging-to-file: false
request-log: false
usage-statistics-enabled: false
remote-management: {{allow-remote: false, secret-key: "", disable-control-panel: true, disable-auto-update-panel: true}}
proxy-url: "{proxy_url}"
disable-claude-cloak-mode: true
request-retry: 0
disable-cooling: true
transient-error-cooldown-seconds: -1
"""


def config(port: int, auth_dir: Path, provider: str, upstream: str, proxy_url: str = "", alias: str = MODEL) -> str:
    """CPA's config.yaml: one provider entry whose model alias is ``alias`` (:data:`MODEL`)."""
    name = UPSTREAM_MODELS[provider]
    head = config_head(port, auth_dir, proxy_url)
    entry_proxy = "direct" if not proxy_url else proxy_url
    if provider == "claude":
        body = f"""\
claude-api-key:
  - api-key: "fake-anthropic"
    base-url: "{upstream}"
    proxy-url: "{entry_proxy}"
    models: [{{name: "{name}", alias: "{alias}"}}]
"""
    elif provider == "interactions":
        body = f"""\
interactions-api-key:
  - api-key: "fake-goog"
    base-url: "{upstream}"
    proxy-url: "{entry_proxy}"
    models: [{{name: "{name}", alias: "{alias}"}}]
"""
    elif provider in ("gemini", "vertex", "codex"):
        key = {"gemini": "gemini-api-key", "vertex": "vertex-api-key", "codex": "codex-api-key"}[provider]
        body = f"""\
{key}:
  - api-key: "fake-{provider}"
    base-url: "{upstream}"
    proxy-url: "{entry_proxy}"
    models: [{{name: "{name}", alias: "{alias}"}}]
"""
    elif provider == "antigravity":  # the credential is a file (antigravity_auth); the alias here
        body = f"""\
oauth-model-alias:
  antigravity:
    - name: "{name}"
      alias: "{alias}"
      fork: true
"""
    elif provider == "openai":
        body = f"""\
openai-compatibility:
  - name: "fakeoai"
    base-url: "{upstream}/v1"
    api-key-entries: [{{api-key: "fake-openai", proxy-url: "{entry_proxy}"}}]
    models: [{{name: "{name}", alias: "{alias}"}}]
"""
    else:
        raise ValueError(provider)
    return head + body


@dataclass
class Cpa:
    version: str
    provider: str
    proc: Proc
    port: int
    dir: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """No HOME_JWT, PGSTORE_DSN, MANAGEMENT_PASSWORD, WRITABLE_PATH...: only PATH, a HOME
    of its own, and a dead proxy for the calls no config switch turns off."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
           "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1,localhost"}  # fmt: skip
    env.update(extra or {})
    return env


def start(
    version: str, provider: str, upstream: str, proxy_url: str = "", env: dict[str, str] | None = None,
    timeout: float = 30.0, alias: str = MODEL,
) -> Cpa:  # fmt: skip
    exe = binary(version)
    if exe is None:
        raise FileNotFoundError(missing_reason(version))

    def write(d: Path, port: int) -> dict[str, str]:
        (d / "config.yaml").write_text(config(port, d / "auths", provider, upstream, proxy_url, alias))
        if provider == "antigravity":
            (d / "auths" / "antigravity-fake.json").write_text(json.dumps(antigravity_auth(upstream)))
        return env or {}

    proc, port, d = launch(exe, f"{version}-{provider}", write, timeout)
    return Cpa(version, provider, proc, port, d)


def launch(exe: Path, name: str, write, timeout: float) -> tuple[Proc, int, Path]:
    """Run a CPA binary in a temp dir of its own (``auths/``, ``home/``; ``write(dir, port)``
    writes its config and returns extra environment) until ``/healthz`` answers; a port
    taken meanwhile by another process is retried on a new one (3 tries)."""
    for attempt in range(3):
        d = Path(tempfile.mkdtemp(prefix=f"cpa-{name}-"))
        (d / "auths").mkdir()
        (d / "home").mkdir()
        port = free_port()
        extra = write(d, port)
        proc = Proc([str(exe), "-config", str(d / "config.yaml"), "-local-model"], cwd=d,
                    env=clean_env({"HOME": str(d / "home"), **extra}))  # fmt: skip
        try:
            proc.wait_for(r"API server started successfully on", timeout)
            _healthz(port, proc, timeout)
            return proc, port, d
        except (RuntimeError, TimeoutError):
            proc.stop()
            busy = "address already in use" in proc.output.lower()
            shutil.rmtree(d, ignore_errors=True)
            if not busy or attempt == 2:
                raise
    raise AssertionError("unreachable")


def _healthz(port: int, proc: Proc, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            r = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2, trust_env=False)
            if r.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc.p.poll() is not None:
            raise RuntimeError(f"CPA exited ({proc.p.returncode}):\n{proc.tail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"CPA /healthz not ready after {timeout}s:\n{proc.tail()}")
        time.sleep(0.1)


# --- re-capturing a recording from the real CPA ---------------------------------------


def capture(version: str, provider: str, script: str, recording: Path, name: str, out: Path) -> Path:
    """Play ``script`` on the fake, send ``recording``'s request (its model as CPA's alias)
    through a real CPA with the sidecar in front (``--keep-bodies``, ``-w``), and turn the
    flow into ``out/name`` with ``python -m streamfix.capture``. Returns the recording's dir."""
    import json
    import subprocess
    import sys

    from standins.fake_providers import Running
    from support import child_env, fetch, start_mitmdump

    meta = json.loads((recording / "recording.json").read_text())
    req = meta["request"]
    body = dict(req["body"])
    body.setdefault("input", [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}])
    fakes = Running(delay_ms=0)
    fakes.fake.default = script
    cpa = start(version, provider, fakes.url, alias=str(body["model"]))
    tmp = Path(tempfile.mkdtemp(prefix="capture-"))
    flow = tmp / "turn.flow"
    try:
        mitm, port = start_mitmdump(cpa.url, tmp / "conf", "--set", "streamfix_keep_bodies=true", "-w", str(flow))
        try:
            headers = {
                k: v
                for k, v in req.get("headers", {}).items()
                if k in ("content-type", "accept", "user-agent", "originator")
            }
            headers["authorization"] = f"Bearer {CLIENT_KEY}"
            r = fetch(f"http://127.0.0.1:{port}{req['path']}", body=json.dumps(body).encode(), headers=headers)
            assert r.status == 200, r.body[:300]
        finally:
            mitm.stop()
        subprocess.run([sys.executable, "-m", "streamfix.capture", str(flow), name, "--out", str(out), "--force"],
                       check=True, env=child_env(), cwd=ROOT)  # fmt: skip
    finally:
        cpa.stop()
        fakes.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return out / name


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    ap = argparse.ArgumentParser(
        prog="python tests/support/realcpa.py", description="re-capture a recording from a real CPA"
    )
    ap.add_argument("version")
    ap.add_argument("provider", choices=sorted(UPSTREAM_MODELS))
    ap.add_argument("script", help="a script of tests/support/standins/fake_providers.py")
    ap.add_argument("recording", type=Path, help="the recording whose request is sent (recordings/NAME)")
    ap.add_argument("--name", help="the new recording's name (default: the recording's)")
    ap.add_argument("--out", type=Path, default=ROOT / "recordings")
    a = ap.parse_args(argv)
    print(capture(a.version, a.provider, a.script, a.recording, a.name or a.recording.name, a.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
