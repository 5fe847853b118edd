"""Which hosts the upstream leg decodes (``streamfix_upstream_hosts``): the defaults, the
patterns' grammar and its check. Kept apart from addons/upstream.py so that
addons/options.py runs the check without importing the addon (which imports options)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from mitmproxy import exceptions
from streamfix.wire.devin import DEFAULT_HOSTS

__all__ = ["CHECKS", "DEFAULT_UPSTREAM_HOSTS", "PROVIDER_HOSTS", "host_matches", "upstream_hosts"]

_HOST_RX = re.compile(r"^\*?[a-z0-9_.:-]+$")
PROVIDER_HOSTS = (
    "generativelanguage.googleapis.com",  # Gemini API (gemini-api-key, interactions-api-key)
    "aiplatform.googleapis.com",  # Vertex AI, global endpoint
    "*-aiplatform.googleapis.com",  # Vertex AI, regional endpoints (us-central1-aiplatform...)
    "cloudcode-pa.googleapis.com",  # Gemini CLI (the {"response": ...} envelope)
    "daily-cloudcode-pa.googleapis.com",  # Antigravity
    "daily-cloudcode-pa.sandbox.googleapis.com",  # Antigravity (sandbox)
    "api.anthropic.com",  # Claude
    "api.openai.com",  # OpenAI-compatible, Responses
    "chatgpt.com",  # Codex (OAuth): /backend-api/codex/responses
)
"""The providers' public API hosts CPA calls (besides Devin's), decoded by default."""
DEFAULT_UPSTREAM_HOSTS = DEFAULT_HOSTS + PROVIDER_HOSTS


def host_matches(host: str, patterns: Sequence[str]) -> bool:
    """``host`` is one of ``patterns``: exact, or ``*SUFFIX`` (``*.example.com``: any
    subdomain; ``*-aiplatform.googleapis.com``: any region), never the suffix alone."""
    host = host.lower().rstrip(".")
    for p in patterns:
        if p.startswith("*"):
            suffix = p[1:]
            if host.endswith(suffix) and len(host) > len(suffix) and host != suffix.lstrip(".-"):
                return True
        elif host == p:
            return True
    return False


def upstream_hosts(values: Sequence[str]) -> tuple[str, ...]:
    """``streamfix_upstream_hosts`` normalized; OptionsError for a value that is no host name."""
    hosts = [h.strip().lower() for h in values]
    bad = [h for h in hosts if not _HOST_RX.match(h) or "*" in h[1:]]
    if bad:
        raise exceptions.OptionsError(
            f"streamfix_upstream_hosts={','.join(bad)}: give host names (server.codeium.com) or *.domain / *-suffix patterns"
        )
    return tuple(hosts)


CHECKS = {"streamfix_upstream_hosts": upstream_hosts}
"""The upstream leg's value checks (addons/options.py runs them before anything listens)."""
