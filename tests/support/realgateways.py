"""The real gateways beside CPA: LiteLLM's proxy and Portkey's open-source gateway, started
by the tests in front of tests/support/standins/fake_providers.py.

Both install from the registries at the versions their pin files name
(``scripts/install-gateways``: ``tests/support/gateways/litellm/requirements.txt``,
``tests/support/gateways/portkey/package-lock.json``) into ``.cache/gateways/``; one not
installed makes its tests skip with one line saying why (:func:`missing_reason`), except
in CI (``CI=true``), where it fails them.

Each gateway routes one model per provider family (:data:`PROVIDERS`) to the fake:

- **LiteLLM** (``python -m litellm.proxy.proxy_cli --config``): a ``model_list`` entry per
  family (``openai/`` with ``api_base`` ``{fake}/v1``, ``anthropic/`` with ``{fake}``,
  ``gemini/`` with ``{fake}/v1beta``), the client's model is the entry's name
  (``gw-openai``...), its key the proxy's master key. It serves chat, Responses, Anthropic
  messages and Gemini ``generateContent`` for every family.
- **Portkey** (``node build/start-server.js --port=N --headless``): no config; each request
  names its provider and the fake's address in headers (``x-portkey-provider``,
  ``x-portkey-custom-host``) and carries the provider's key; the model is the provider's
  own. It serves chat for every family, Responses for OpenAI and messages for Anthropic
  (each passed through to the provider's own API).

Neither makes an outbound call but to the fake: LiteLLM reads its model cost map from its
package (``LITELLM_LOCAL_MODEL_COST_MAP``), telemetry is off, and every other proxy
variable is dropped from their environment. With ``proxy`` set, their provider calls go
through that HTTP proxy (the sidecar's upstream listener): LiteLLM reads the standard
``HTTP_PROXY`` / ``HTTPS_PROXY`` (its aiohttp and httpx clients trust the environment);
Portkey runs on Node, whose ``fetch`` reads no proxy variable, so it is started with
``--import`` of ``deploy/portkey-proxy.mjs`` (copied beside its node_modules), which installs undici's
``EnvHttpProxyAgent`` as the global dispatcher (the same variables, then). Neither skips
loopback unless ``NO_PROXY`` says so, and none is set.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from support import ROOT, Proc, free_port

CACHE = ROOT / ".cache" / "gateways"
PINS = Path(__file__).resolve().parent / "gateways"
GATEWAYS = ("litellm", "portkey")
VERSIONS = {"litellm": "1.108.7", "portkey": "1.15.2"}
PACKAGES = {"litellm": "litellm[proxy] (PyPI)", "portkey": "@portkey-ai/gateway (npm)"}
PROVIDERS = ("openai", "anthropic", "gemini")
"""The provider families a gateway routes to the fake, each a provider API of
fake_providers.py: an OpenAI-compatible chat API, Anthropic messages, Gemini."""
PROVIDER_API = {"openai": "chat", "anthropic": "anthropic", "gemini": "gemini"}
UPSTREAM_MODELS = {"openai": "fake-gpt", "anthropic": "claude-sonnet-4-5-20250929", "gemini": "gemini-2.5-flash"}
PROVIDER_KEYS = {"openai": "fake-openai-key", "anthropic": "fake-anthropic-key", "gemini": "fake-gemini-key"}
"""The keys the gateways send the fake (nothing real; never kept in a recording)."""
CLIENT_KEY = "sk-streamfix-test"
"""LiteLLM's master key, the client's key (LiteLLM asks for an ``sk-`` prefix)."""
PORTKEY_PROVIDER = {"openai": "openai", "anthropic": "anthropic", "gemini": "google"}
SERVES: dict[str, dict[str, tuple[str, ...]]] = {
    # gateway -> client API -> the provider families it serves it for
    "litellm": {"chat": PROVIDERS, "responses": PROVIDERS, "messages": PROVIDERS, "gemini": PROVIDERS},
    "portkey": {"chat": PROVIDERS, "responses": ("openai",), "messages": ("anthropic",)},
}
CALLS: dict[tuple[str, str, str], str] = {
    # (gateway, provider family, client API) -> the provider API it calls, where not the family's own
    ("litellm", "openai", "responses"): "responses",
    ("litellm", "openai", "messages"): "responses",
    ("portkey", "openai", "responses"): "responses",
}
"""Which of the fake's APIs a gateway calls (measured in the fake's request log): LiteLLM asks
an OpenAI model for a Responses or an Anthropic messages turn through OpenAI's Responses API
(and for chat and Gemini turns through chat), Portkey passes Responses through; every other
turn goes to the family's own API (:data:`PROVIDER_API`)."""


def provider_api(gateway: str, provider: str, api: str) -> str:
    """The fake's API the gateway calls for a client's ``api`` turn on ``provider``."""
    return CALLS.get((gateway, provider, api), PROVIDER_API[provider])


NOT_SERVED = {
    "portkey": {
        "responses": "Portkey 1.15.2 serves /v1/responses only for providers with a Responses API of their own "
        "(an Anthropic or Gemini request answers HTTP 500)",
        "messages": "Portkey 1.15.2 serves /v1/messages only for Anthropic (an OpenAI or Gemini request answers HTTP 500)",
        "gemini": "Portkey has no Gemini-shaped client API",
    },
}
"""Why a gateway serves no such client API for a provider family (docs/gateways.md)."""


def home(name: str) -> Path:
    return CACHE / name


def installed(name: str) -> bool:
    if name == "litellm":
        return (home(name) / "bin" / "python").exists() and (home(name) / ".streamfix-installed").exists()
    return (home(name) / "node_modules" / "@portkey-ai" / "gateway" / "build" / "start-server.js").exists()


def missing_reason(name: str) -> str:
    return (
        f"{name} {VERSIONS[name]} is not installed in {home(name)} "
        f"(scripts/install-gateways installs it; scripts/test runs that)"
    )


@dataclass
class Gateway:
    """One running gateway in front of the fake providers at ``fakes``."""

    name: str
    proc: Proc
    port: int
    fakes: str
    proxy: str | None = None
    dir: Path | None = None
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def model(self, provider: str) -> str:
        """The model a client asks this gateway for to reach ``provider``."""
        return f"gw-{provider}" if self.name == "litellm" else UPSTREAM_MODELS[provider]

    def headers(self, provider: str) -> dict[str, str]:
        """What a client sends (beside content-type) to reach ``provider``."""
        if self.name == "litellm":
            return {"authorization": f"Bearer {CLIENT_KEY}"}
        host = self.fakes + ("/v1" if provider != "gemini" else "")
        return {"x-portkey-provider": PORTKEY_PROVIDER[provider], "x-portkey-custom-host": host,
                "authorization": f"Bearer {PROVIDER_KEYS[provider]}"}  # fmt: skip

    def stop(self) -> None:
        self.proc.stop()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)


def litellm_config(fakes: str) -> str:
    """LiteLLM's config.yaml: one model per provider family, routed to the fake."""
    bases = {"openai": f"{fakes}/v1", "anthropic": fakes, "gemini": f"{fakes}/v1beta"}
    prefix = {"openai": "openai", "anthropic": "anthropic", "gemini": "gemini"}
    lines = ["model_list:"]
    for p in PROVIDERS:
        lines += [f"  - model_name: gw-{p}", "    litellm_params:", f"      model: {prefix[p]}/{UPSTREAM_MODELS[p]}",
                  f"      api_base: {bases[p]}", f"      api_key: {PROVIDER_KEYS[p]}"]  # fmt: skip
    lines += ["general_settings:", f"  master_key: {CLIENT_KEY}", "litellm_settings:", "  telemetry: false"]
    return "\n".join(lines) + "\n"


def _env(proxy: str | None, extra: dict[str, str]) -> dict[str, str]:
    """A clean environment: no proxy but ``proxy`` (then for every host, loopback too)."""
    drop = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("LITELLM_", "PORTKEY_"))}
    env.pop("PYTHONPATH", None)
    if proxy:
        env.update({"HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "http_proxy": proxy, "https_proxy": proxy})
    env.update(extra)
    return env


def start(
    name: str, fakes: str, proxy: str | None = None, port: int | None = None, timeout: float = 90.0,
    extra_env: dict[str, str] | None = None,
) -> Gateway:  # fmt: skip
    """Start gateway ``name`` in front of the fakes at ``fakes``; ``proxy``: its provider
    calls go through that HTTP proxy; ``port``: listen there (else on a free one). Ready
    when it answers HTTP; a free port taken meanwhile by another process is retried on a
    new one (3 tries)."""
    if not installed(name):
        raise FileNotFoundError(missing_reason(name))
    extra = dict(extra_env or {})
    fixed = port
    for attempt in range(3):
        port = fixed or free_port()
        d = Path(tempfile.mkdtemp(prefix=f"gw-{name}-"))
        if name == "litellm":
            (d / "config.yaml").write_text(litellm_config(fakes))
            env = _env(proxy, {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False",
                               "NO_DOCS": "True", "NO_REDOC": "True", "DISABLE_ADMIN_UI": "True", "HOME": str(d),
                               **extra})  # fmt: skip
            cmd = [str(home(name) / "bin" / "python"), "-m", "litellm.proxy.proxy_cli", "--config",
                   str(d / "config.yaml"), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"]  # fmt: skip
            probe = "/health/liveliness"
        else:
            node_env = {"HOME": str(d), "NODE_ENV": "production", **extra}
            cmd = ["node"]
            if proxy:  # installed beside node_modules (scripts/install-gateways), where it finds undici
                cmd += ["--import", (home(name) / "proxy.mjs").as_uri()]
            cmd += [str(home(name) / "node_modules" / "@portkey-ai" / "gateway" / "build" / "start-server.js"),
                    f"--port={port}", "--headless"]  # fmt: skip
            env = _env(proxy, node_env)
            probe = "/"
        proc = Proc(cmd, cwd=home(name), env=env)
        try:
            _ready(port, probe, proc, timeout)
            return Gateway(name, proc, port, fakes, proxy, d)
        except (RuntimeError, TimeoutError):
            proc.stop()
            busy = "address already in use" in proc.output.lower() or "eaddrinuse" in proc.output.lower()
            shutil.rmtree(d, ignore_errors=True)
            if not busy or attempt == 2 or fixed:
                raise
    raise AssertionError("unreachable")


def _ready(port: int, path: str, proc: Proc, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            r = httpx.get(f"http://127.0.0.1:{port}{path}", timeout=2, trust_env=False)
            if r.status_code < 500:
                return
        except httpx.HTTPError:
            pass
        if proc.p.poll() is not None:
            raise RuntimeError(f"{proc.cmd[0]} exited ({proc.p.returncode}):\n{proc.tail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} on port {port} not ready after {timeout}s:\n{proc.tail()}")
        time.sleep(0.2)


def require(name: str) -> None:
    """Skip the running test, saying why, when gateway ``name`` is not installed; in CI
    (``CI=true``), where scripts/test installs it, fail instead."""
    import pytest

    if installed(name):
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(missing_reason(name) + "; in CI the test command must install it")
    pytest.skip(missing_reason(name))
