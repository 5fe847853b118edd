"""A real CPA's provider calls through the sidecar's regular listener (docs/upstream-leg.md).

    real CPA (Claude executor, proxy-url = the sidecar's regular listener, SSL_CERT_FILE = bundle)
        --CONNECT--> mitmdump --mode regular (addons/upstream.py, tests/support/e2e_hostmap.py)
        --> HTTPS fake Anthropic (tests/support/standins/fake_providers.py) under a test host name

The host names exist only inside mitmdump (tests/support/e2e_hostmap.py), so a request that
succeeds went through the sidecar. ``other.test`` is not an upstream-leg host: its TLS must
pass through untouched (CPA trusts only the system roots and the fake's own test CA, not
mitmproxy's: an interception would fail the handshake). ``tls.devin.test`` is listed in
``streamfix_upstream_hosts``: it is intercepted, which works only when CPA's
``SSL_CERT_FILE`` holds the system roots *and* mitmproxy's CA.
"""

from __future__ import annotations

import json
import re
import ssl
from pathlib import Path

import orjson
import pytest
import realcpa
from chain import HOSTMAP, make_certs
from standins.fake_providers import Running
from streamfix.wire.invariants import json_events
from support import ROOT, Proc, child_env, fetch, free_port, show_logs_on_failure, tool

pytestmark = pytest.mark.e2e

SYSTEM_ROOTS = Path("/etc/ssl/certs/ca-certificates.crt")
VERSIONS = ("v7.2.89", "v7.2.140")


@pytest.fixture(scope="module")
def leg(tmp_path_factory):
    d = tmp_path_factory.mktemp("upstream-leg")
    ca, cert, key = make_certs(d)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    fakes = Running(delay_ms=0, ssl_context=ctx)
    hosts = d / "hosts.json"
    hosts.write_text(json.dumps({"other.test": fakes.port, "tls.devin.test": fakes.port}))
    reg = free_port()
    mitm = Proc([tool("mitmdump"), "--set", f"confdir={d / 'conf'}", "--set", "flow_detail=1",
                 "--mode", f"regular@127.0.0.1:{reg}",
                 "-s", str(ROOT / "addons" / "repair.py"), "-s", str(ROOT / "addons" / "upstream.py"),
                 "-s", str(HOSTMAP), "--set", f"e2e_hostmap_file={hosts}",
                 "--set", "streamfix_upstream_hosts=*.devin.test",
                 "--set", f"ssl_verify_upstream_trusted_ca={ca}"], env=child_env())  # fmt: skip
    try:
        mitm.wait_for(rf"HTTP\(S\) proxy listening at 127\.0\.0\.1:{reg}\b", 60)
        mitm_ca = d / "conf" / "mitmproxy-ca-cert.pem"
        with_mitm = d / "bundle-with-mitmproxy.pem"
        with_mitm.write_bytes(SYSTEM_ROOTS.read_bytes() + ca.read_bytes() + mitm_ca.read_bytes())
        without = d / "bundle-without-mitmproxy.pem"
        without.write_bytes(SYSTEM_ROOTS.read_bytes() + ca.read_bytes())
        yield {"fakes": fakes, "mitm": mitm, "proxy": f"http://127.0.0.1:{reg}", "with": with_mitm, "without": without}
    finally:
        mitm.stop()
        fakes.stop()


def _turn(leg, request, version: str, host: str, bundle: Path, flow: bool = False) -> tuple[int, bytes, int]:
    """One turn through CPA, its status, body (empty if the fake never saw it) and the
    flows mitmdump logged for ``host``; with ``flow``, mitmdump's line is waited for (it
    may come just after the client has the whole body)."""
    if realcpa.binary(version) is None:
        pytest.skip(realcpa.missing_reason(version))
    if not SYSTEM_ROOTS.exists():
        pytest.skip(f"no system CA bundle at {SYSTEM_ROOTS}")
    cpa = realcpa.start(
        version, "claude", f"https://{host}", proxy_url=leg["proxy"], env={"SSL_CERT_FILE": str(bundle)}
    )
    show_logs_on_failure(request, {f"CPA {version}": cpa.proc, "mitmdump": leg["mitm"]})
    try:
        n = len(leg["mitm"].lines)
        seen = len(leg["fakes"].fake.requests)
        body = {"model": realcpa.MODEL, "stream": True,
                "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "[script:text]"}]}]}  # fmt: skip
        r = fetch(cpa.url + "/v1/responses", body=orjson.dumps(body), headers={
            "authorization": f"Bearer {realcpa.CLIENT_KEY}", "content-type": "application/json"})  # fmt: skip
        url = f"https://{host}/v1/messages"
        if flow:
            try:
                leg["mitm"].wait_count(re.escape(url), 1, timeout=10, start=n)
            except TimeoutError:
                pass  # counted as it is: the test's assertion says what was missing
        flows = sum(1 for ln in leg["mitm"].lines[n:] if url in ln)
        return r.status, r.body if len(leg["fakes"].fake.requests) > seen else b"", flows
    finally:
        cpa.stop()


@pytest.mark.parametrize("version", VERSIONS)
def test_other_host_passes_through_untouched(leg, request, version):
    """A provider host the upstream leg does not list: CPA's TLS reaches the fake's own
    certificate through the tunnel (CPA does not trust mitmproxy's CA here), no flow."""
    status, body, flows = _turn(leg, request, version, "other.test", leg["without"])
    assert status == 200 and b"Hello from the fake model." in body
    assert json_events(body)[-1]["type"] == "response.completed"
    assert flows == 0


@pytest.mark.parametrize("version", VERSIONS)
def test_listed_host_is_intercepted_with_the_bundle(leg, request, version):
    """A listed host is intercepted: with SSL_CERT_FILE = system roots + mitmproxy's CA (+
    the fake's CA, for mitmproxy's own upstream check) the turn goes through as one flow;
    without mitmproxy's CA, CPA refuses the certificate and the fake is never reached."""
    status, body, flows = _turn(leg, request, version, "tls.devin.test", leg["with"], flow=True)
    assert status == 200 and b"Hello from the fake model." in body and flows == 1
    n = len(leg["mitm"].lines)
    status, body, flows = _turn(leg, request, version, "tls.devin.test", leg["without"])
    assert status != 200 and body == b"" and flows == 0
    assert "does not trust the proxy's certificate for tls.devin.test" in "\n".join(leg["mitm"].lines[n:])
