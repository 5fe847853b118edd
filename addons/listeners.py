"""streamfix: no open proxy, and every listener says what protects it.

A regular-mode (forward proxy) listener forwards anything for anyone who reaches it. The
upstream leg (docs/upstream-leg.md) needs one, and beside a CPA container it must listen
beyond loopback. So:

* a regular (or upstream) mode listener bound beyond loopback needs proxy credentials:
  ``--set streamfix_upstream_proxyauth=USER:PASS`` (or ``@/path/htpasswd``), checked on
  that listener only (CPA's ``proxy-url: http://USER:PASS@sidecar:8080`` sends them as
  ``Proxy-Authorization``, on CONNECT and on plain-HTTP requests); without them the request
  gets ``407 Proxy Authentication Required``. Without credentials, such a listener makes
  the sidecar refuse to start, with one line saying why (an error logged before mitmproxy
  runs: mitmproxy exits 1). mitmproxy's own ``proxyauth`` would also do on a sidecar
  without a reverse listener; with one, it would answer the clients' requests on the
  reverse listener with 401 and strip their ``Authorization`` (their CPA key), so that is
  refused too, with a pointer to ``streamfix_upstream_proxyauth``.
* a reverse listener beyond loopback forwards only to its one gateway: a line says so,
  and that the gateway's own client keys (CPA's ``api-keys``) are what protects it.
* mitmweb beyond loopback: a line says it is protected by its token or ``web_password``
  and that it shows the flows (credentials redacted unless ``streamfix_redact=false``).

The credentials are read with mitmproxy's own parser (``mitmproxy.addons.proxyauth``; an
htpasswd file with its validator) and removed from the request before it goes on.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import weakref

from mitmproxy import connection, ctx, exceptions, http
from mitmproxy.proxy import mode_specs

logger = logging.getLogger("streamfix.listeners")

FORWARD_MODES = (mode_specs.RegularMode, mode_specs.UpstreamMode)


def is_loopback(host: str) -> bool:
    """``""`` (mitmproxy: all interfaces) is not."""
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _modes() -> list[mode_specs.ProxyMode]:
    out = []
    for m in ctx.options.mode:
        try:
            out.append(mode_specs.ProxyMode.parse(m))
        except ValueError:
            pass
    return out


def _host(mode: mode_specs.ProxyMode) -> str:
    return mode.listen_host(ctx.options.listen_host)


class Listeners:
    """See the module docstring."""

    def __init__(self) -> None:
        self.validator = None
        self.authenticated: weakref.WeakKeyDictionary[connection.Client, bool] = weakref.WeakKeyDictionary()
        self.refused = 0
        self.refusing = False
        """An open forward listener was found: mitmproxy exits 1 (the error is logged at
        startup), and until it does every request there is refused (mitmproxy loads
        scripts while it binds its listeners, so one may be up for a moment)."""

    def load(self, loader) -> None:
        loader.add_option(
            "streamfix_upstream_proxyauth",
            str,
            "",
            """Proxy credentials the regular-mode (upstream-leg) listener requires, as
            USER:PASS or @/path/to/htpasswd; CPA sends them from proxy-url
            (http://USER:PASS@HOST:PORT). Required when that listener is bound beyond
            loopback (the sidecar refuses to start otherwise); the reverse listener is not
            affected.""",
        )

    def configure(self, updated: set[str]) -> None:
        opts = ctx.options
        if "streamfix_upstream_proxyauth" in updated:
            self.validator = _validator(opts.streamfix_upstream_proxyauth)
            self.authenticated.clear()
        if not updated & {"mode", "listen_host", "streamfix_upstream_proxyauth", "proxyauth", "web_host", "server"}:
            return
        if not getattr(opts, "server", True):  # mitmdump -n (-nr FILE): no listener at all
            self.refusing = False
            return
        modes = _modes()
        reverse = [m for m in modes if isinstance(m, mode_specs.ReverseMode)]
        proxyauth = getattr(opts, "proxyauth", None)
        problems = []
        if reverse and proxyauth:
            problems.append(
                "mitmproxy's proxyauth also applies to the reverse listener (clients would get 401 and "
                "lose their Authorization header); use --set streamfix_upstream_proxyauth=USER:PASS, "
                "which only the regular-mode listener checks"
            )
        for m in modes:
            if not isinstance(m, FORWARD_MODES):
                continue
            host = _host(m)
            if is_loopback(host) or self.validator is not None or (proxyauth and not reverse):
                continue
            problems.append(
                f"the {m.type_name} proxy listener on {host or 'all interfaces'} is reachable beyond loopback "
                "and would forward anything for anyone: give it credentials with --set "
                "streamfix_upstream_proxyauth=USER:PASS (CPA: proxy-url http://USER:PASS@HOST:PORT) or bind "
                "it to 127.0.0.1"
            )
        self.refusing = bool(problems)
        if problems:
            for p in problems:
                logger.error(f"streamfix: refusing to start: {p}")
            raise exceptions.OptionsError("streamfix: " + "; ".join(problems))
        for m in reverse:
            host = _host(m)
            if not is_loopback(host):
                logger.info(
                    f"streamfix: the reverse listener on {host or 'all interfaces'} forwards only to {m.data}; "
                    "what protects it is that gateway's own client keys (CPA's api-keys)"
                )
        for m in modes:
            if isinstance(m, FORWARD_MODES) and not is_loopback(_host(m)):
                logger.info(
                    f"streamfix: the {m.type_name} proxy listener on {_host(m) or 'all interfaces'} requires "
                    "proxy credentials (streamfix_upstream_proxyauth)"
                )
        web_host = getattr(opts, "web_host", None)
        if web_host is not None and "web_host" in updated and not is_loopback(web_host):
            logger.info(
                f"streamfix: mitmweb on {web_host or 'all interfaces'} is protected by its token or web_password "
                "only; it shows every flow (credentials redacted while streamfix_redact is on)"
            )

    # --- the regular-mode listener's credentials -----------------------------------
    def _guarded(self, flow: http.HTTPFlow) -> bool:
        return (self.validator is not None or self.refusing) and isinstance(flow.client_conn.proxy_mode, FORWARD_MODES)

    def http_connect(self, flow: http.HTTPFlow) -> None:
        if self._guarded(flow) and self._check(flow):
            self.authenticated[flow.client_conn] = True

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if not self._guarded(flow) or flow.response is not None or flow.is_replay:
            return
        if flow.client_conn in self.authenticated:
            return
        self._check(flow)

    def _check(self, flow: http.HTTPFlow) -> bool:
        from mitmproxy.addons.proxyauth import make_auth_required_response, parse_http_basic_auth

        ok = False
        try:
            _, user, password = parse_http_basic_auth(flow.request.headers.get("proxy-authorization", ""))
            ok = self.validator is not None and bool(self.validator(user, password))
        except (ValueError, TypeError):
            ok = False
        if ok:
            del flow.request.headers["proxy-authorization"]
            return True
        self.refused += 1
        flow.response = make_auth_required_response(is_proxy=True)
        if self.refused <= 20 or self.refused % 1000 == 0:
            peer = flow.client_conn.peername[0] if flow.client_conn.peername else "?"
            logger.warning(
                f"streamfix: proxy request from {peer} without valid credentials refused with 407 "
                f"({self.refused} so far)"
            )
        return False


def _validator(spec: str):
    if not spec:
        return None
    from mitmproxy.addons import proxyauth

    if spec.startswith("@"):
        try:
            return proxyauth.Htpasswd(spec)
        except exceptions.OptionsError as e:
            raise exceptions.OptionsError(f"streamfix_upstream_proxyauth: {e}") from e
    user, sep, password = spec.partition(":")
    if not sep or not user or not password:
        raise exceptions.OptionsError(
            "streamfix_upstream_proxyauth: give USER:PASS (both non-empty) or @/path/to/htpasswd"
        )
    return SingleUser(user, password)


CHECKS = {"streamfix_upstream_proxyauth": _validator}
"""This addon's value checks (addons/options.py runs them before anything listens)."""


class SingleUser:
    """One USER:PASS (the password may hold colons), compared in constant time."""

    def __init__(self, user: str, password: str) -> None:
        self.user, self.password = user.encode(), password.encode()

    def __call__(self, user: str, password: str) -> bool:
        return hmac.compare_digest(user.encode(), self.user) & hmac.compare_digest(password.encode(), self.password)
