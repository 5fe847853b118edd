"""The gateway matrix: every real gateway x provider family x client API x turn kind, raw,
through the sidecar's client leg and through both of its legs.

A *cell* is (gateway, provider, client API, turn): the fake provider
(tests/support/standins/fake_providers.py) plays the turn's script, a client asks the gateway
(tests/support/realgateways.py: LiteLLM's proxy, Portkey's gateway) for it on that API, and
what the gateway sends back is the cell's raw stream. The same request is sent twice more:

- ``client``: through a sidecar in front of the gateway, its client leg alone
  (``mitmdump -s addons/repair.py`` in reverse mode), as README's quick start runs it;
- ``both``: through a sidecar with both legs (``streamfix.sidecar``'s command: the reverse
  listener and a regular one, ``streamfix_upstream_hosts=127.0.0.1``) in front of a second
  instance of the gateway whose provider calls go through that regular listener (its proxy
  environment, realgateways.py).

- gateways: :data:`realgateways.GATEWAYS`; client APIs (:data:`APIS`) where the gateway
  serves them for the provider (:data:`realgateways.SERVES`);
- turns (:data:`TURNS`): the real-CPA matrix's, but the Codex backend's own events, and two
  more: ``done_no_finish`` (the provider's end marker, chat's ``[DONE]``, with no finish
  before it) and ``cap_call`` (the budget ran out right after a whole tool call), where the
  provider has a word for them (``fake_providers.unsupported``).

``python tests/support/gateway_matrix.py show GATEWAY`` prints the outcomes of a live run;
``capture`` writes ``recordings/gateways/`` (tests/support/gateway_recordings.py), ``docs``
docs/gateways.md's matrix from it.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import realcpa_matrix as m
import realgateways as rg
from standins.fake_providers import TURN_CAPS, unsupported
from standins.fake_providers import TURNS as CPA_TURNS

GATEWAYS = rg.GATEWAYS
PROVIDERS = rg.PROVIDERS
APIS = ("chat", "responses", "messages", "gemini")
TURNS = tuple(t for t in CPA_TURNS if t != "vendor") + ("done_no_finish", "cap_call")
LEGS = ("raw", "client", "both")
TRUTH_PATH = {"chat": "openai", "responses": "codex", "anthropic": "claude", "gemini": "gemini"}
"""The provider API a gateway calls -> the real-CPA matrix's path whose truth it shares
(matrix_truth.truth: an OpenAI refusal ends normally in OpenAI's own APIs; a Responses
provider fails a turn whose input overflows the context window, as the Codex backend does)."""


def cells(gateways=GATEWAYS, providers=PROVIDERS, apis=APIS, turns=TURNS) -> Iterator[tuple[str, str, str, str]]:
    """Every (gateway, provider, api, turn) of the matrix."""
    for g in gateways:
        for p in providers:
            for a in apis:
                if p not in rg.SERVES[g].get(a, ()):
                    continue
                for t in turns:
                    if unsupported(rg.provider_api(g, p, a), t) is None:
                        yield g, p, a, t


def nonce(gateway: str, provider: str, api: str, turn: str, leg: str) -> str:
    return f"gw {gateway} {provider} {api} {turn} {leg}"


def request_body(gw: rg.Gateway | str, provider: str, api: str, turn: str, text_nonce: str) -> dict[str, Any]:
    """The real-CPA matrix's request for the turn (realcpa_matrix.request_body), asking the
    gateway's model for ``provider``."""
    body = m.request_body(api, turn, text_nonce)
    if api != "gemini":
        body["model"] = model(gw, provider)
    return body


def model(gw: rg.Gateway | str, provider: str) -> str:
    name = gw if isinstance(gw, str) else gw.name
    return f"gw-{provider}" if name == "litellm" else rg.UPSTREAM_MODELS[provider]


def path(gw: rg.Gateway | str, provider: str, api: str) -> str:
    if api == "gemini":
        return f"/v1beta/models/{model(gw, provider)}:streamGenerateContent?alt=sse"
    return m.HTTP_PATHS[api]


def send(
    base: str, gw: rg.Gateway, provider: str, api: str, turn: str, text_nonce: str
) -> tuple[dict[str, Any], m.Got]:
    body = request_body(gw, provider, api, turn, text_nonce)
    headers = {"content-type": "application/json", **gw.headers(provider)}
    return body, m.post(base, api, body, headers, path(gw, provider, api))


# --- running the cells live --------------------------------------------------------------


@dataclass
class Stack:
    """One gateway, three ways: raw (``plain``), behind the client leg (``client``), and a
    second instance whose provider calls go through a sidecar with both legs (``both``)."""

    name: str
    plain: rg.Gateway
    client_mitm: Any
    client: str
    proxied: rg.Gateway
    both_mitm: Any
    both: str

    def procs(self) -> dict[str, Any]:
        return {f"{self.name}": self.plain.proc, f"{self.name} (its calls through the sidecar)": self.proxied.proc,
                "sidecar (client leg)": self.client_mitm, "sidecar (both legs)": self.both_mitm}  # fmt: skip

    def stop(self) -> None:
        for p in (self.client_mitm, self.both_mitm):
            p.stop()
        self.plain.stop()
        self.proxied.stop()


def start_stack(name: str, fakes_url: str, tmp: Path) -> Stack:
    from support import Proc, child_env, free_port, start_mitmdump

    from streamfix.sidecar import mitm_command

    started: list[Any] = []
    try:
        plain = rg.start(name, fakes_url)
        started.append(plain)
        conf = tmp / f"conf-{name}-client"
        conf.mkdir(parents=True, exist_ok=True)
        client_mitm, cport = start_mitmdump(plain.url, conf)
        started.append(client_mitm)
        reg, gport = free_port(), free_port()
        conf2 = tmp / f"conf-{name}-both"
        conf2.mkdir(parents=True, exist_ok=True)
        cmd = mitm_command(f"http://127.0.0.1:{gport}", "127.0.0.1:0", f"127.0.0.1:{reg}", False, False,
                           ["--set", f"confdir={conf2}", "--set", "streamfix_upstream_hosts=127.0.0.1"])  # fmt: skip
        both_mitm = Proc(cmd, env=child_env())
        started.append(both_mitm)
        mm = both_mitm.wait_for(r"reverse proxy to \S+ listening at 127\.0\.0\.1:(\d+)", 60)
        both_mitm.wait_for(rf"HTTP\(S\) proxy listening at 127\.0\.0\.1:{reg}\b", 60)
        proxied = rg.start(name, fakes_url, proxy=f"http://127.0.0.1:{reg}", port=gport)
        return Stack(name, plain, client_mitm, f"http://127.0.0.1:{cport}", proxied, both_mitm,
                     f"http://127.0.0.1:{mm.group(1)}")  # fmt: skip
    except BaseException:
        for s in reversed(started):
            s.stop()
        raise


@dataclass
class Live:
    """The stacks of a live run, started on first use, in front of one fake provider server."""

    tmp: Path
    stacks: dict[str, Stack] = field(default_factory=dict)
    fakes: Any = None

    def __post_init__(self) -> None:
        from standins.fake_providers import Running

        self.fakes = Running(delay_ms=0)

    def get(self, name: str) -> Stack:
        if name not in self.stacks:
            self.stacks[name] = start_stack(name, self.fakes.url, self.tmp)
        return self.stacks[name]

    def provider_calls(self, text_nonce: str) -> list[dict[str, Any]]:
        """The fake's records of the calls the gateway made for the request with ``text_nonce``
        (each once its body was sent)."""
        deadline = time.monotonic() + 2
        while True:
            got = [r for r in self.fakes.fake.requests if text_nonce.encode() in r["raw"]]
            if all(r["done"] for r in got) or time.monotonic() > deadline:
                return got
            time.sleep(0.02)

    def close(self) -> None:
        for st in self.stacks.values():
            st.stop()
        self.stacks.clear()
        self.fakes.stop()


def run_cell(live: Live, gateway: str, provider: str, api: str, turn: str) -> dict[str, Any]:
    """One cell live on its three legs. Returns what a recording of it keeps
    (gateway_recordings.write)."""
    st = live.get(gateway)
    t0 = time.monotonic()
    out: dict[str, Any] = {"gateway": gateway, "provider": provider, "api": api, "turn": turn}
    for leg, base, gw in (
        ("raw", st.plain.url, st.plain),
        ("client", st.client, st.plain),
        ("both", st.both, st.proxied),
    ):
        req, got = send(base, gw, provider, api, turn, nonce(gateway, provider, api, turn, leg))
        out[leg] = got
        if leg == "raw":
            out["request"] = req
            out["calls"] = live.provider_calls(nonce(gateway, provider, api, turn, leg))
    out["seconds"] = round(time.monotonic() - t0, 2)
    return out


def outcomes(c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {leg: m.outcome(c["api"], c[leg].body, c[leg].status, c["request"]) for leg in LEGS}


def told(gateway: str, provider: str, api: str, turn: str, outcome: dict[str, Any], ended: str = "clean") -> bool:
    import matrix_truth

    return matrix_truth.told(TRUTH_PATH[rg.provider_api(gateway, provider, api)], api, turn, outcome, ended)


def cap(turn: str) -> int | None:
    return TURN_CAPS.get(turn)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python tests/support/gateway_matrix.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    show = sub.add_parser("show", help="run cells live and print their outcomes on every leg")
    show.add_argument("gateway", choices=GATEWAYS)
    show.add_argument("--providers", nargs="*", default=list(PROVIDERS))
    show.add_argument("--apis", nargs="*", default=list(APIS))
    show.add_argument("--turns", nargs="*", default=list(TURNS))
    show.add_argument("--body", action="store_true", help="print the raw bodies too")
    cap_ = sub.add_parser("capture", help="run every cell live and write recordings/gateways/")
    cap_.add_argument("--gateways", nargs="*", default=list(GATEWAYS))
    cap_.add_argument("--out", type=Path, default=None, help="default: recordings/gateways")
    sub.add_parser("docs", help="write docs/gateways.md's matrix from recordings/gateways/")
    a = ap.parse_args(argv)
    if a.cmd == "docs":
        import gateway_recordings

        return gateway_recordings.write_docs()
    if a.cmd == "capture":
        import gateway_recordings

        missing = [g for g in a.gateways if not rg.installed(g)]
        if missing:
            for g in missing:
                print(rg.missing_reason(g), file=sys.stderr)
            return 2
        return gateway_recordings.capture(a.gateways, a.out)
    tmp = Path(tempfile.mkdtemp(prefix="gw-matrix-"))
    live = Live(tmp)
    try:
        for g, p, api, t in cells([a.gateway], a.providers, a.apis, a.turns):
            c = run_cell(live, g, p, api, t)
            o = outcomes(c)
            marks = "".join("+" if told(g, p, api, t, o[leg], c[leg].ended) else "-" for leg in LEGS)
            print(f"{marks} {g} {p:9} {api:9} {t:15} " + "  ".join(f"{leg} {o[leg]['ending']}" for leg in LEGS),
                  flush=True)  # fmt: skip
            for leg in LEGS:
                if o[leg]["violations"]:
                    print(f"{'':>6}{leg} breaks {o[leg]['violations']}")
            if a.body:
                print(c["raw"].body.decode("utf-8", "replace"))
    finally:
        live.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
