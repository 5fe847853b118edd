"""Run the sidecar: mitmdump (or mitmweb) with streamfix's addons in front of a gateway.

    python -m streamfix.sidecar                       # demo: in front of the replay upstream
    python -m streamfix.sidecar --upstream http://127.0.0.1:8317   # in front of a real CPA
    python -m streamfix.sidecar --upstream http://127.0.0.1:8317 --upstream-proxy 127.0.0.1:8080
    python -m streamfix.sidecar --web                 # mitmweb, bodies kept for the views

Everything after ``--`` goes to mitmdump as it is (``-- --set streamfix_truncation=completed``).
SIGTERM drains (the streams in flight finish first, see docs/operations.md); Ctrl-C stops at once.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys

from .procs import ROOT, child_env, start_replay, stop, tool


def mitm_command(
    upstream: str, listen: str, upstream_proxy: str | None, web: bool, keep_bodies: bool, extra: list[str]
) -> list[str]:
    host, _, port = listen.rpartition(":")
    cmd = [tool("mitmweb" if web else "mitmdump"), "--mode", f"reverse:{upstream}@{host or '127.0.0.1'}:{port}"]
    if upstream_proxy:
        phost, _, pport = upstream_proxy.rpartition(":")
        cmd += ["--mode", f"regular@{phost or '127.0.0.1'}:{pport}"]
    cmd += ["-s", str(ROOT / "addons" / "repair.py")]
    for extra_addon in ("upstream.py", "views.py", "sseview.py"):
        if (ROOT / "addons" / extra_addon).exists():
            cmd += ["-s", str(ROOT / "addons" / extra_addon)]
    if keep_bodies or web:
        cmd += ["--set", "streamfix_keep_bodies=true"]
    if web:
        cmd += ["--set", "web_host=127.0.0.1", "--set", "web_open_browser=false"]
        # the receipt (verdict, rules fired) in the flow list: mitmweb hides comments by default
        for column in WEB_COLUMNS:  # a list option: one --set per value
            cmd += ["--set", f"web_columns={column}"]
    return cmd + extra


WEB_COLUMNS = ("icon", "method", "path", "status", "size", "time", "comment")

BANNER = """\
streamfix sidecar: clients -> http://{listen} -> {upstream}{demo}
Try:
  curl -sN http://{listen}/v1/responses -H 'content-type: application/json' \\
       -d '{{"model":"responses-devin-toolcall","stream":true,"input":"hi"}}'
  curl -sN http://{listen}/v1/chat/completions -H 'content-type: application/json' \\
       -d '{{"model":"chat-devin-truncated-toolcall","stream":true,"messages":[]}}'
Point a client's base URL at http://{listen}/v1 . Ctrl-C stops; SIGTERM drains the streams in flight first.
"""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser(prog="scripts/sidecar", description=__doc__.split("\n")[0])
    ap.add_argument("--upstream", help="the gateway (CPA) base URL, e.g. http://127.0.0.1:8317; "
                    "default: a built-in upstream replaying recordings/")
    ap.add_argument("--listen", default="127.0.0.1:8318", help="where clients connect (default %(default)s)")
    ap.add_argument("--upstream-proxy", metavar="HOST:PORT",
                    help="also listen as the regular proxy CPA uses for its upstream (docs/upstream-leg.md)")
    ap.add_argument("--web", action="store_true", help="run mitmweb instead of mitmdump")
    ap.add_argument("--keep-bodies", action="store_true", help="keep original and repaired bodies on each flow")
    ap.add_argument("--upstream-proxy-auth", metavar="USER:PASS",
                    help="credentials the --upstream-proxy listener requires (streamfix_upstream_proxyauth; "
                    "required beyond loopback; also USER:PASS from config.yaml, or @HTPASSWD)")
    a = ap.parse_args(argv)
    if a.upstream_proxy_auth:
        extra = ["--set", f"streamfix_upstream_proxyauth={a.upstream_proxy_auth}", *extra]
    if a.upstream_proxy and not _loopback(a.upstream_proxy.rpartition(":")[0] or "127.0.0.1") \
            and not _has_proxyauth(extra):  # fmt: skip
        print(f"scripts/sidecar: refusing to start: --upstream-proxy {a.upstream_proxy} is reachable beyond "
              "loopback and would forward anything for anyone; give it credentials (--upstream-proxy-auth "
              "USER:PASS, or streamfix_upstream_proxyauth in mitmproxy's config.yaml; CPA's proxy-url then "
              "is http://USER:PASS@HOST:PORT) or bind it to 127.0.0.1 (docs/operations.md)", file=sys.stderr)
        return 2

    replay = None
    upstream = a.upstream
    if not upstream:
        replay, upstream = start_replay()
    print(BANNER.format(listen=a.listen, upstream=upstream,
                        demo=" (built-in replay of recordings/)" if replay else ""), flush=True)
    cmd = mitm_command(upstream, a.listen, a.upstream_proxy, a.web, a.keep_bodies, extra)
    # its own process group: a terminal's Ctrl-C reaches only us, and mitmdump gets exactly
    # one SIGINT (ours); a second one during its shutdown kills it (exit -2, no done hooks)
    mitm = subprocess.Popen(cmd, cwd=ROOT, env=child_env(), process_group=0)

    def on_term(signum, frame):
        # SIGTERM (systemd, docker stop): passed on; mitmdump drains (addons/drain.py: no new
        # connections, the streams in flight finish, at most streamfix_drain_timeout), then
        # exits, and so do we; a second SIGTERM makes it exit at once
        mitm.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
    try:
        return mitm.wait()  # a signal handler runs in between; the wait goes on (PEP 475)
    except KeyboardInterrupt:  # Ctrl-C: stop now
        mitm.send_signal(signal.SIGINT)
        try:
            return mitm.wait(10)
        except subprocess.TimeoutExpired:
            stop(mitm)
            return 1
    finally:
        if replay is not None:
            stop(replay)

def _loopback(host: str) -> bool:
    import ipaddress

    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _has_proxyauth(extra: list[str]) -> bool:
    """``streamfix_upstream_proxyauth`` given after ``--`` or in the confdir's config.yaml."""
    from pathlib import Path

    if any("streamfix_upstream_proxyauth=" in x and not x.endswith("=") for x in extra):
        return True
    confdir = next((x.split("=", 1)[1] for x in extra if x.startswith("confdir=")), "~/.mitmproxy")
    for name in ("config.yaml", "config.yml"):
        f = Path(confdir).expanduser() / name
        try:
            if any(line.split(":", 1)[0].strip() == "streamfix_upstream_proxyauth" and line.split(":", 1)[1].strip()
                   for line in f.read_text().splitlines() if ":" in line):  # fmt: skip
                return True
        except OSError:
            pass
    return False


if __name__ == "__main__":
    sys.exit(main())
