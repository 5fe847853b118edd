"""No open proxy (addons/listeners.py).

* A regular-mode listener beyond loopback without credentials: mitmdump refuses to start
  (exit 1) and says why; so does mitmproxy's own ``proxyauth`` beside a reverse listener
  (it would take the clients' keys on the reverse listener). Nothing is bound: the check
  runs before mitmproxy listens (servers here may only listen on 127.0.0.1).
* With ``streamfix_upstream_proxyauth`` on the full chain (tests/e2e/test_full_chain.py): a
  request through the upstream listener without credentials, or with wrong ones, gets
  407 with ``Proxy-Authenticate``, for plain HTTP and for CONNECT; CPA stand-ins whose
  ``proxy-url`` carries ``USER:PASS@`` (plain and TLS Devin) get their turns through, with
  Devin's StopReason on the client leg, and the credentials never reach Devin; the reverse
  listener is unaffected (the clients' own ``Authorization`` is not asked for or taken).
"""

from __future__ import annotations

import base64
import subprocess
import sys

import httpx
import pytest
from chain import PATHS, STANDINS, TIMEOUT, Chain, request_body, terminal
from support import REPAIR_ADDON, child_env, mitmdump_args, show_logs_on_failure

pytestmark = pytest.mark.e2e

USER, PASSWORD = "cpa", "s3cret:with-colon"


def start(tmp_path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        mitmdump_args(tmp_path / "conf", *args, addons=(REPAIR_ADDON,)),
        capture_output=True, text=True, timeout=60, env=child_env(), stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_an_open_regular_listener_refuses_to_start(tmp_path):
    # 192.0.2.1 (TEST-NET-1) is beyond loopback and never this machine's: nothing can bind
    # it here (tests listen on 127.0.0.1 only), the refusal comes first and says why
    r = start(tmp_path, "--mode", "reverse:http://127.0.0.1:9@127.0.0.1:0", "--mode", "regular@192.0.2.1:0")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "streamfix: refusing to start: the regular proxy listener on 192.0.2.1 is reachable beyond loopback" in out
    assert "streamfix_upstream_proxyauth=USER:PASS" in out


def test_all_interfaces_and_other_addresses_are_beyond_loopback():
    from streamfix.addons.listeners import is_loopback

    assert [is_loopback(h) for h in ("127.0.0.1", "127.0.0.5", "::1", "[::1]", "localhost")] == [True] * 5
    assert [is_loopback(h) for h in ("", "0.0.0.0", "::", "172.17.0.1", "10.0.0.2", "streamfix")] == [False] * 6


def test_the_launcher_refuses_an_open_upstream_proxy_before_starting_anything(tmp_path):
    r = subprocess.run([sys.executable, "-m", "streamfix.sidecar", "--upstream", "http://127.0.0.1:9",
                        "--listen", "127.0.0.1:0", "--upstream-proxy", "0.0.0.0:8080"],
                       capture_output=True, text=True, timeout=60, env=child_env(),
                       stdin=subprocess.DEVNULL)  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    assert "streamfix_upstream_proxyauth" in r.stderr and "listening" not in r.stdout + r.stderr


def test_mitmproxys_proxyauth_beside_a_reverse_listener_refuses_to_start(tmp_path):
    from support import free_port

    r = start(tmp_path, "--mode", "reverse:http://127.0.0.1:9@127.0.0.1:0",
              "--mode", f"regular@127.0.0.1:{free_port()}",
              "--set", "proxyauth=a:b")  # fmt: skip
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "also applies to the reverse listener" in out, out


def test_bad_credentials_spec_is_refused(tmp_path):
    r = start(tmp_path, "--mode", "regular@127.0.0.1:0", "--set", "streamfix_upstream_proxyauth=nopassword")
    assert r.returncode != 0 and "USER:PASS" in r.stdout + r.stderr


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    c = Chain(tmp_path_factory.mktemp("auth"))
    c.extra = ["--set", f"streamfix_upstream_proxyauth={USER}:{PASSWORD}"]
    try:
        c.up()
        # CPA stand-ins whose proxy-url carries the credentials, as CPA's would
        cred = c.proxy.replace("http://", f"http://{USER}:{PASSWORD.replace(':', '%3A')}@", 1)
        py = sys.executable
        standin = [py, str(STANDINS / "cpa_standin.py"), "--proxy", cred, "--port", "0"]
        _, plain = c.start("CPA stand-in (credentials)", [*standin, "--devin", "http://plain.devin.test:80"],
                           r"CPA stand-in listening on (\S+)")  # fmt: skip
        _, tls = c.start("CPA stand-in (credentials, TLS)",
                         [*standin, "--devin", "https://tls.devin.test:443", "--ca", str(c.mitm_ca)],
                         r"CPA stand-in listening on (\S+)")  # fmt: skip
        c.with_cred = {"plain": plain, "tls": tls}
        yield c
    finally:
        c.down()


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_without_credentials_the_upstream_listener_answers_407(guarded, request):
    show_logs_on_failure(request, guarded.procs)
    port = int(guarded.proxy.rsplit(":", 1)[1])
    for auth in (None, _basic(USER, "wrong"), _basic("other", PASSWORD)):
        h = {"proxy-authorization": auth} if auth else {}
        with httpx.Client(proxy=guarded.proxy, trust_env=False, timeout=10) as c:
            r = c.get("http://plain.devin.test/_requests", headers=h)
        assert r.status_code == 407 and r.headers["proxy-authenticate"].startswith("Basic"), (auth, r.status_code)
        # CONNECT (what CPA does for an https Devin)
        import socket

        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"CONNECT tls.devin.test:443 HTTP/1.1\r\nHost: tls.devin.test:443\r\n"
                      + (f"Proxy-Authorization: {auth}\r\n".encode() if auth else b"") + b"\r\n")  # fmt: skip
            head = s.recv(4096)
        assert head.startswith(b"HTTP/1.1 407"), head[:100]
    with httpx.Client(proxy=guarded.proxy.replace("http://", f"http://{USER}:{PASSWORD}@", 1),
                      trust_env=False, timeout=10) as c:  # fmt: skip
        r = c.get("http://plain.devin.test/_requests")
    assert r.status_code == 200
    assert "proxy request from 127.0.0.1 without valid credentials refused with 407" in guarded.mitm.output


@pytest.mark.parametrize("leg", ["plain", "tls"])
async def test_cpa_with_credentials_in_its_proxy_url_gets_through(guarded, request, leg):
    show_logs_on_failure(request, guarded.procs)
    base = guarded.with_cred[leg]
    async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as c:
        body = request_body("responses", f"Please do it. [scenario:max_tokens_text] [conv:auth-{leg}]")
        r = await c.post(base + PATHS["responses"], json=body)  # straight to the stand-in: only its Devin leg
        assert r.status_code == 200, r.text
        # and through the whole chain: the sidecar's reverse listener in front of that stand-in
        hostmap = guarded.hostmap
        import json
        import time

        m = json.loads(hostmap.read_text())
        m["standin.test"] = int(base.rsplit(":", 1)[1])
        hostmap.write_text(json.dumps(m))
        time.sleep(0.05)
        body = request_body("responses", f"Please do it. [scenario:max_tokens_text] [conv:auth2-{leg}]")
        r = await c.post(guarded.base + PATHS["responses"], json=body, headers={"authorization": "Bearer sk-client"})
        assert r.status_code == 200, r.text
    # Devin's StopReason 3 reached the client leg through the authenticated upstream leg
    assert terminal("responses", r.content) == ("response.incomplete", "max_output_tokens")
    seen = guarded.seen(guarded.devin if leg == "plain" else guarded.devin_tls)
    mine = [x for x in seen if x["conv"] in (f"auth-{leg}", f"auth2-{leg}")]
    assert len(mine) == 2
    assert not any(x["proxy_authorization"] for x in mine), "the proxy credentials stop at the sidecar"
    assert all(x["authorization"] for x in mine)  # CPA's own Devin credential went on


def test_the_reverse_listener_and_mitmweb_say_what_protects_them(tmp_path):
    """Beyond loopback (192.0.2.1, TEST-NET-1: the bind fails here, the lines come first)."""
    from support import tool

    r = subprocess.run(
        [tool("mitmweb"), "--set", f"confdir={tmp_path / 'conf'}", "-s", str(REPAIR_ADDON),
         "--mode", "reverse:http://127.0.0.1:9@192.0.2.1:0", "--set", "web_host=192.0.2.1",
         "--set", "web_open_browser=false"],
        capture_output=True, text=True, timeout=60, env=child_env(), stdin=subprocess.DEVNULL,
    )  # fmt: skip
    out = r.stdout + r.stderr
    assert "the reverse listener on 192.0.2.1 forwards only to http://127.0.0.1:9; what protects it is that " \
           "gateway's own client keys" in out, out  # fmt: skip
    assert "mitmweb on 192.0.2.1 is protected by its token or web_password" in out, out


def test_no_listener_is_not_checked(tmp_path):
    """``mitmdump -n`` (offline, ``-nr FILE``) binds nothing: mitmproxy's default regular mode
    on all interfaces is no open proxy then."""
    empty = tmp_path / "empty.flow"
    empty.write_bytes(b"")
    r = start(tmp_path, "-n", "-r", str(empty))
    assert r.returncode == 0 and "refusing" not in r.stdout + r.stderr, r.stdout + r.stderr
