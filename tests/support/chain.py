"""The full chain the end-to-end tests run: client -> sidecar -> CPA stand-in -> sidecar -> fake Devin
(real processes; test_full_chain.py describes it), its requests and how a turn ended."""

from __future__ import annotations

import datetime
import json
import sys
import time
from pathlib import Path

import httpx
import orjson
from streamfix.wire.sse import SseParser
from support import ROOT, Proc, child_env, tool

REPAIR = ROOT / "addons" / "repair.py"


HOSTMAP = Path(__file__).with_name("e2e_hostmap.py")


STANDINS = Path(__file__).with_name("standins")


TIMEOUT = 60.0


# --- certificates for the TLS fake Devin ----------------------------------------------
def make_certs(d: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for tls.devin.test and other.test: (ca, cert, key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "streamfix test CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tls.devin.test")]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("tls.devin.test"), x509.DNSName("other.test")]),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    paths = d / "ca.pem", d / "server.pem", d / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Chain:
    def __init__(self, d: Path) -> None:
        self.dir = d
        self.procs: dict[str, Proc] = {}
        """Name -> process, in start order."""
        self.extra: list[str] = []
        """More mitmdump arguments (other test modules: a turn log, -w)."""
        self.flow_detail = 0

    def start(self, name: str, cmd: list[str], pattern: str) -> tuple[Proc, str]:
        p = Proc(cmd, env=child_env())
        self.procs[name] = p
        return p, p.wait_for(pattern, TIMEOUT).group(1)

    def up(self) -> Chain:
        d = self.dir
        confdir = d / "conf"
        self.ca, cert, key = make_certs(d)
        self.hostmap = d / "hosts.json"
        self.hostmap.write_text("{}")
        # mitmproxy refuses two listeners on 127.0.0.1:0, so the regular one gets a port
        # picked here; a lost race (port taken meanwhile) is retried with another one
        for attempt in range(3):
            reg = free_port()
            cmd = [tool("mitmdump"), "--set", f"confdir={confdir}", "--set", f"flow_detail={self.flow_detail}",
                   "--mode", "reverse:http://standin.test:9@127.0.0.1:0",
                   "--mode", f"regular@127.0.0.1:{reg}",
                   "-s", str(REPAIR), "-s", str(ROOT / "addons" / "upstream.py"),
                   "-s", str(ROOT / "addons" / "views.py"), "-s", str(HOSTMAP),
                   "--set", f"e2e_hostmap_file={self.hostmap}",
                   "--set", "streamfix_upstream_hosts=*.devin.test",
                   "--set", f"ssl_verify_upstream_trusted_ca={self.ca}", *self.extra]  # fmt: skip
            self.mitm = Proc(cmd, env=child_env())
            try:
                m = self.mitm.wait_for(r"reverse proxy to \S+ listening at 127\.0\.0\.1:(\d+)", TIMEOUT)
                self.mitm.wait_for(rf"HTTP\(S\) proxy listening at 127\.0\.0\.1:{reg}\b", TIMEOUT)
                break
            except RuntimeError:
                self.mitm.stop()
                if attempt == 2 or "address already in use" not in self.mitm.output.lower():
                    raise
        self.procs["mitmdump"] = self.mitm
        if "error in script" in self.mitm.output or "Traceback" in self.mitm.output:
            raise RuntimeError(f"an addon failed to load:\n{self.mitm.tail()}")
        self.client_port = int(m.group(1))
        self.proxy = f"http://127.0.0.1:{reg}"
        self.mitm_ca = confdir / "mitmproxy-ca-cert.pem"
        py = sys.executable
        devin = [py, str(STANDINS / "fake_devin.py"), "--port", "0", "--delay-ms", "3", "--log-requests"]
        standin = [py, str(STANDINS / "cpa_standin.py"), "--proxy", self.proxy, "--port", "0", "--log-requests"]
        _, self.devin = self.start("fake Devin", devin, r"fake Devin listening on (\S+)")
        _, self.devin_tls = self.start("fake Devin (TLS)", [*devin, "--tls-cert", str(cert), "--tls-key", str(key)],
                                       r"fake Devin listening on (\S+)")  # fmt: skip
        _, standin_url = self.start("CPA stand-in", [*standin, "--devin", "http://plain.devin.test:80"],
                                    r"CPA stand-in listening on (\S+)")  # fmt: skip
        _, self.standin_tls = self.start("CPA stand-in (TLS)",
                                         [*standin, "--devin", "https://tls.devin.test:443", "--ca", str(self.mitm_ca)],
                                         r"CPA stand-in listening on (\S+)")  # fmt: skip
        port = lambda url: int(url.rsplit(":", 1)[1])
        self.hostmap.write_text(json.dumps({
            "standin.test": port(standin_url), "plain.devin.test": port(self.devin),
            "tls.devin.test": port(self.devin_tls), "other.test": port(self.devin_tls),
        }))  # fmt: skip
        time.sleep(0.05)  # a fresh mtime for the map
        return self

    def down(self) -> None:
        for p in reversed(self.procs.values()):
            p.stop()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    def seen(self, devin: str | None = None) -> list[dict]:
        return httpx.get(f"{devin or self.devin}/_requests", verify=False, timeout=10, trust_env=False).json()


# --- requests and terminals -----------------------------------------------------------
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages",
         "gemini": "/v1beta/models/devin-swe-2:streamGenerateContent?alt=sse"}  # fmt: skip


GEMINI_JSON = "/v1beta/models/devin-swe-2:generateContent"


def request_body(api: str, prompt: str, cap: int | None = None, stream: bool = True) -> dict:
    if api == "responses":
        body: dict = {"model": "devin/swe-2", "stream": stream, "input": [{"role": "user", "content": prompt}]}
        if cap:
            body["max_output_tokens"] = cap
    elif api == "chat":
        body = {"model": "devin/swe-2", "stream": stream, "messages": [{"role": "user", "content": prompt}]}
        if cap:
            body["max_tokens"] = cap
    elif api == "gemini":
        body = {"contents": [{"role": "user", "parts": [{"text": prompt}]}]}
        if cap:
            body["generationConfig"] = {"maxOutputTokens": cap}
    else:
        body = {"model": "devin/swe-2", "stream": stream, "max_tokens": cap or 32000,
                "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}]}  # fmt: skip
    return body


def terminal(api: str, body: bytes):
    """What the client learns about how the turn ended."""
    p = SseParser()
    events = p.feed(body) + p.close()
    datas = []
    for ev in events:
        if ev.data and ev.data != b"[DONE]":
            try:
                datas.append((ev.event, orjson.loads(ev.data)))
            except orjson.JSONDecodeError:
                pass
    if api == "chat":
        finishes = [c["finish_reason"] for _, d in datas for c in d.get("choices", []) if c.get("finish_reason")]
        return finishes[-1] if finishes else None
    if api == "responses":
        for name, d in datas:
            t = d.get("type")
            if t in ("response.completed", "response.incomplete", "response.failed"):
                det = d["response"].get("incomplete_details")
                return t, (det or {}).get("reason")
        return None
    stops = [d["delta"].get("stop_reason") for _, d in datas if d.get("type") == "message_delta"]
    return stops[-1] if stops else None


EXPECT = {
    "chat": {"max_tokens": "length", "max_tokens_text": "length", "content_filter": "content_filter",
             "tool": "tool_calls", "stop": "stop"},
    "responses": {"max_tokens": ("response.incomplete", "max_output_tokens"),
                  "max_tokens_text": ("response.incomplete", "max_output_tokens"),
                  "content_filter": ("response.incomplete", "content_filter"),
                  "tool": ("response.completed", None), "stop": ("response.completed", None)},
    "messages": {"max_tokens": "max_tokens", "max_tokens_text": "max_tokens", "content_filter": "refusal",
                 "tool": "tool_use", "stop": "end_turn"},
}  # fmt: skip


def client_usage(api: str, body: bytes, stream: bool = True) -> tuple[int, int, int, int] | None:
    """(input, output, cached, total) as the client gets them, in Devin's terms: for
    messages, input is ``input_tokens + cache_read_input_tokens`` (Anthropic counts the
    cache read apart), read from ``message_delta`` (``message_start`` goes out before Devin
    has finished: it keeps the gateway's zeros)."""
    if stream:
        p = SseParser()
        objs = [orjson.loads(e.data) for e in p.feed(body) + p.close() if e.data and e.data != b"[DONE]"]
    else:
        objs = [orjson.loads(body)]
    usage = None
    for o in objs:
        if api == "responses":
            u = o.get("response", o).get("usage") if o.get("type", "response").startswith("response") else None
        elif api == "messages":
            u = o.get("usage") if o.get("type") in ("message_delta", "message") else None
        elif api == "gemini":
            u = o.get("usageMetadata")
        else:
            u = o.get("usage")
        if isinstance(u, dict):
            usage = u
    if usage is None:
        return None
    n = lambda v: v if isinstance(v, int) else 0
    if api == "responses":
        cached = n((usage.get("input_tokens_details") or {}).get("cached_tokens"))
        return n(usage.get("input_tokens")), n(usage.get("output_tokens")), cached, n(usage.get("total_tokens"))
    if api == "chat":
        cached = n((usage.get("prompt_tokens_details") or {}).get("cached_tokens"))
        return n(usage.get("prompt_tokens")), n(usage.get("completion_tokens")), cached, n(usage.get("total_tokens"))
    if api == "gemini":
        u = usage
        return (n(u.get("promptTokenCount")), n(u.get("candidatesTokenCount")), n(u.get("cachedContentTokenCount")),
                n(u.get("totalTokenCount")))  # fmt: skip
    cached = n(usage.get("cache_read_input_tokens"))
    inp = n(usage.get("input_tokens")) + cached
    return inp, n(usage.get("output_tokens")), cached, inp + n(usage.get("output_tokens"))
