"""Run the sidecar: mitmdump (or mitmweb) with streamfix's addons in front of a gateway.

    python -m streamfix.sidecar                       # demo: in front of the replay upstream
    python -m streamfix.sidecar --upstream http://127.0.0.1:8317   # in front of a real CPA
    python -m streamfix.sidecar --upstream http://127.0.0.1:8317 --upstream-proxy 127.0.0.1:8080
    python -m streamfix.sidecar --web                 # mitmweb, bodies kept for the views
    python -m streamfix.sidecar --workers 2 --redis local --upstream http://127.0.0.1:8317 --upstream-proxy 127.0.0.1:8080
                                                      # 2 workers behind HAProxy, the legs matched in Redis

Everything after ``--`` goes to mitmdump as it is (``-- --set streamfix_truncation=completed``).
SIGTERM drains (the streams in flight finish first, see docs/operations.md); Ctrl-C stops at once.
Before anything starts, the ``--set`` values for streamfix's options are checked (names,
booleans, choices): a mistake exits 2 with what was wrong, never a sidecar that silently
repairs nothing.
"""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from .cli import SCRIPTS  # the -s scripts it loads: client leg, CPA's upstream leg, mitmweb's views
from .procs import CHECKOUT, ROOT, addons_dir, child_env, start_replay, stop, tool


def mitm_command(
    upstream: str, listen: str, upstream_proxy: str | None, web: bool, keep_bodies: bool, extra: list[str]
) -> list[str]:
    host, _, port = listen.rpartition(":")
    cmd = [tool("mitmweb" if web else "mitmdump"), "--mode", f"reverse:{upstream}@{host or '127.0.0.1'}:{port}"]
    if upstream_proxy:
        phost, _, pport = upstream_proxy.rpartition(":")
        cmd += ["--mode", f"regular@{phost or '127.0.0.1'}:{pport}"]
    for script in SCRIPTS:
        if (addons_dir() / script).exists():
            cmd += ["-s", str(addons_dir() / script)]
    # connect to the gateway per request, not when a client connects: a gateway that does
    # not answer is then an HTTP 502 in the client's API's error shape (addons/gateway.py),
    # not a connection closed without a reply
    cmd += ["--set", "connection_strategy=lazy"]
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
{try_}Point a client's base URL at http://{listen}/v1 . Ctrl-C stops; SIGTERM drains the streams in flight first.
"""
TRY_DEMO = """\
Try:
  curl -sN http://{listen}/v1/responses -H 'content-type: application/json' \\
       -d '{{"model":"responses-devin-toolcall","stream":true,"input":"hi"}}'
  curl -sN http://{listen}/v1/chat/completions -H 'content-type: application/json' \\
       -d '{{"model":"chat-devin-truncated-toolcall","stream":true,"messages":[]}}'
"""
TRY_GATEWAY = """\
Try (with your gateway's key and one of its models):
  curl -sN http://{listen}/v1/chat/completions -H 'content-type: application/json' \\
       -H "authorization: Bearer $KEY" -d '{{"model":"MODEL","stream":true,"messages":[{{"role":"user","content":"hi"}}]}}'
"""
"""The banner's example: the demo's models for the built-in replay; for a real gateway
(``--upstream``), a request that needs the operator's key and model (a gateway answers the
demo's keyless request with an error)."""


EPILOG = """\
mitmdump's own options go after --, as they are:
  %(prog)s -- --set streamfix_truncation=completed --set streamfix_log=turns.jsonl
  %(prog)s -- -w flows.flow              (save the flows)
--set NAME=VALUE sets an option (booleans: true/false, on/off, yes/no, 1/0; --set NAME alone
is true). %(prog)s --options lists streamfix's options with their help and defaults.
--web: mitmweb prints its UI's address with a random ?token=... (open that URL; set a fixed
one with -- --set web_password=SECRET). The upstream leg: docs/upstream-leg.md.
--workers N (N > 1): N mitmdump workers behind HAProxy on the same addresses, one core
each; with --upstream-proxy it needs --redis (docs/scaling.md).
"""


def _fail(ap: argparse.ArgumentParser, msg: str) -> None:
    ap.exit(2, f"{ap.prog}: error: {msg}\n")


def check_upstream(url: str) -> str | None:
    """Why ``--upstream`` is not a gateway's address (scheme://host:port), with the fix."""
    u = urlsplit(url)
    if u.scheme not in ("http", "https") or not u.netloc:
        bare = url.split("://", 1)[-1]
        return (
            f"--upstream {url}: give the scheme, e.g. --upstream http://{bare} (CPA serves plain "
            f"HTTP on 8317; without a scheme mitmproxy would speak HTTPS to it)"
        )
    if u.path not in ("", "/") or u.query or u.fragment:
        base = f"{u.scheme}://{u.netloc}"
        return (
            f"--upstream {url}: the gateway's address has no path: use --upstream {base} "
            f"(clients keep {u.path.rstrip('/') or '/'} in their base URL, http://LISTEN{u.path.rstrip('/')})"
        )
    try:
        _ = u.port  # urllib checks the port only when it is read
    except ValueError:
        return f"--upstream {url}: the port is not a number"
    return None


def check_listen(listen: str) -> str | None:
    _host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        return f"--listen {listen}: give HOST:PORT, e.g. --listen 127.0.0.1:8318"
    return None


def answers(url: str, timeout: float = 1.0) -> str | None:
    """None when something accepts a TCP connection at the gateway's address, else why not."""
    u = urlsplit(url)
    port = u.port or (443 if u.scheme == "https" else 80)
    try:
        with socket.create_connection((u.hostname, port), timeout=timeout):
            return None
    except OSError as e:
        return e.strerror or str(e) or type(e).__name__


def wrong_scheme(url: str, timeout: float = 2.0) -> str | None:
    """The fix when the gateway answers, but not in the scheme ``url`` names (HTTPS to a
    plain-HTTP port, or plain HTTP to a TLS one); None when it does, or when it cannot tell."""
    import ssl

    u = urlsplit(url)
    host, port = u.hostname or "", u.port or (443 if u.scheme == "https" else 80)
    other = f"{'http' if u.scheme == 'https' else 'https'}://{u.netloc}"
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            if u.scheme == "http":
                sock.sendall(f"HEAD / HTTP/1.1\r\nHost: {u.netloc}\r\nConnection: close\r\n\r\n".encode())
                first = sock.recv(5)
                if first[:1] in (b"\x15", b"\x16"):  # a TLS alert or handshake record
                    return f"answers with TLS, not plain HTTP: use --upstream {other}"
                return None
            ctx = ssl.create_default_context()
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # only: does it speak TLS?
            try:
                with ctx.wrap_socket(sock, server_hostname=host or None):
                    return None
            except ssl.SSLError as e:
                if "WRONG_VERSION_NUMBER" in str(e) or "record layer failure" in str(e) or "packet length" in str(e):
                    return f"speaks plain HTTP, not TLS: use --upstream {other}"
                return None
    except OSError:
        return None


def registered_options() -> dict:
    """Every option mitmdump knows once the sidecar's scripts are loaded (name -> mitmproxy
    ``_Option``): the scripts' addons register theirs here as they do in mitmdump."""
    from mitmproxy import addonmanager, options

    from streamfix.addons import options as sfoptions
    from streamfix.addons import repair, upstream

    opts = options.Options()

    class Loader:
        def add_option(self, name, typespec, default, help, choices=None) -> None:
            opts.add_option(name, typespec, default, help, choices)

        def add_command(self, path, func) -> None:
            pass

    for script in (repair, upstream):
        for a in addonmanager.traverse(script.addons):
            if hasattr(a, "load") and not isinstance(a, sfoptions.Guard):
                a.load(Loader())
    sfoptions.tidy_help(opts)
    return dict(opts.items())


def set_specs(extra: list[str]) -> list[str]:
    """The ``--set`` specs among mitmdump's arguments (``--set a=b``, ``--set=a=b``)."""
    specs = []
    for i, arg in enumerate(extra):
        if arg == "--set" and i + 1 < len(extra):
            specs.append(extra[i + 1])
        elif arg.startswith("--set="):
            specs.append(arg[len("--set=") :])
    return specs


def print_options() -> None:
    import signal
    import textwrap

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # | head
    for name, o in sorted(registered_options().items()):
        if not name.startswith("streamfix"):
            continue
        kind = getattr(o.typespec, "__name__", "str, repeatable")
        if o.choices:
            kind = " | ".join(o.choices)
        print(f"{name}  ({kind}, default {o.default!r})")
        print(textwrap.indent(textwrap.fill(o.help, 88), "    "))


def sfoptions_errors(specs: list[str]) -> list[str]:
    """What is wrong with the ``--set`` specs for streamfix's options ([] if nothing)."""
    if not any(sp.startswith("streamfix") for sp in specs):
        return []
    from streamfix.addons import options as sfoptions

    return sfoptions.check_specs(registered_options(), specs)


def confdir(extra: list[str]) -> Path:
    """mitmproxy's confdir as mitmdump will see it (``--set confdir=DIR``, else ~/.mitmproxy)."""
    given = [sp.split("=", 1)[1] for sp in set_specs(extra) if sp.startswith("confdir=")]
    return Path(given[-1] if given else "~/.mitmproxy").expanduser()


def config_errors(extra: list[str]) -> list[str]:
    """What is wrong with streamfix's options in the confdir's config.yaml (those that no
    ``--set`` overrides), each line naming the file ([] if nothing)."""
    from streamfix.addons import options as sfoptions

    overridden = {sp.partition("=")[0] for sp in set_specs(extra)}
    return sfoptions.check_config_file(registered_options(), confdir(extra), skip=overridden)


def port_errors(a: argparse.Namespace, extra: list[str]) -> list[str]:
    """A listener's port already in use (or not bindable), said before any banner claims it."""
    from streamfix.addons.metrics import cannot_listen

    wanted = [("--listen", a.listen)]
    if a.upstream_proxy:
        wanted.append(("--upstream-proxy", a.upstream_proxy))
    if a.web:
        sets = dict(sp.partition("=")[::2] for sp in set_specs(extra))
        wanted.append(
            ("mitmweb's web_host:web_port", f"{sets.get('web_host', '127.0.0.1')}:{sets.get('web_port', 8081)}")
        )
    errors = []
    for what, spec in wanted:
        host, _, port = spec.rpartition(":")
        if not port.isdigit():
            continue
        why = cannot_listen(host.strip("[]") or "127.0.0.1", int(port))
        if why is not None:
            hint = f"e.g. {what} {host or '127.0.0.1'}:{int(port) + 1}" if what.startswith("--") else ""
            errors.append(f"{what} {spec}: {why}{(', ' + hint) if hint else ''}")
    return errors


def main(argv: list[str] | None = None, prog: str = "scripts/sidecar") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser(
        prog=prog,
        description=__doc__.split("\n")[0],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--upstream",
        help="the gateway (CPA) address, scheme://host:port without a path, e.g. "
        "http://127.0.0.1:8317; default: a built-in upstream replaying recordings/ on a free port "
        "(the banner says which: requests sent there directly show the unrepaired streams)",
    )
    ap.add_argument("--listen", default="127.0.0.1:8318", help="where clients connect (default %(default)s)")
    ap.add_argument(
        "--upstream-proxy",
        metavar="HOST:PORT",
        help="also listen as the regular proxy CPA uses for its upstream (docs/upstream-leg.md)",
    )
    ap.add_argument("--web", action="store_true", help="run mitmweb instead of mitmdump")
    ap.add_argument("--keep-bodies", action="store_true", help="keep original and repaired bodies on each flow")
    ap.add_argument(
        "--upstream-proxy-auth",
        metavar="USER:PASS",
        help="credentials the --upstream-proxy listener requires (streamfix_upstream_proxyauth; "
        "required beyond loopback; also USER:PASS from config.yaml, or @HTPASSWD)",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="run N mitmdump workers behind HAProxy on the same addresses (one core each; docs/scaling.md); "
        "default 1: one process, no balancer",
    )
    ap.add_argument(
        "--redis",
        metavar="URL",
        help="redis://HOST:PORT/DB where the workers (or several sidecars) match the two legs (needed with "
        "--workers N > 1 and --upstream-proxy); local: start a redis-server here",
    )
    ap.add_argument("--options", action="store_true", help="list streamfix's options (--set NAME=VALUE) and exit")
    a, unknown = ap.parse_known_args(argv)
    if unknown:
        _fail(ap, unrecognized(ap.prog, unknown))
    if a.options:
        print_options()
        return 0
    for problem in (check_listen(a.listen), a.upstream and check_upstream(a.upstream)):
        if problem:
            _fail(ap, problem)
    if a.upstream_proxy and check_listen(a.upstream_proxy):
        _fail(ap, f"--upstream-proxy {a.upstream_proxy}: give HOST:PORT, e.g. --upstream-proxy 127.0.0.1:8080")
    from . import workers

    upstream_leg = bool(a.upstream_proxy) and not any(
        sp.split("=", 1)[0] == "streamfix_upstream" and sp.split("=", 1)[1].lower() in ("false", "off", "no", "0")
        for sp in set_specs(extra)
        if "=" in sp
    )
    redis_set = any(sp.startswith("streamfix_redis=") and sp != "streamfix_redis=" for sp in set_specs(extra))
    problem = workers.preflight(a.workers, a.web, upstream_leg, a.redis or ("given" if redis_set else None))
    if problem:
        return workers.refuse(ap.prog, problem)
    if a.upstream_proxy_auth:
        extra = ["--set", f"streamfix_upstream_proxyauth={a.upstream_proxy_auth}", *extra]
    errors = sfoptions_errors(set_specs(extra)) or config_errors(extra)
    if errors:
        _fail(ap, "\n".join(errors))
    if a.upstream_proxy and not _loopback(a.upstream_proxy.rpartition(":")[0] or "127.0.0.1") \
            and not _has_proxyauth(extra):  # fmt: skip
        print(
            f"scripts/sidecar: refusing to start: --upstream-proxy {a.upstream_proxy} is reachable beyond "
            "loopback and would forward anything for anyone; give it credentials (--upstream-proxy-auth "
            "USER:PASS, or streamfix_upstream_proxyauth in mitmproxy's config.yaml; CPA's proxy-url then "
            "is http://USER:PASS@HOST:PORT) or bind it to 127.0.0.1 (docs/operations.md)",
            file=sys.stderr,
        )
        return 2
    if errors := port_errors(a, extra):
        _fail(ap, "\n".join(errors))

    # SIGTERM (systemd, docker stop) is handled from here on: one that comes before
    # mitmdump runs is passed on as soon as it does, so it can never leave mitmdump
    # running without us (its own process group, below, would not get the signal)
    children: list[subprocess.Popen] = []
    pending: list[int] = []

    def on_term(signum, frame):
        # passed on; mitmdump drains (addons/drain.py: no new connections, the streams in
        # flight finish, at most streamfix_drain_timeout), then exits, and so do we; a
        # second SIGTERM makes it exit at once
        if children:
            children[0].send_signal(signal.SIGTERM)
        else:
            pending.append(signum)

    signal.signal(signal.SIGTERM, on_term)
    replay = None
    upstream = a.upstream
    if upstream:
        why = answers(upstream)
        if why is not None:
            print(
                f"streamfix: warning: nothing answers at {upstream} ({why}); starting anyway: clients get "
                "HTTP 502 until the gateway is up",
                file=sys.stderr,
                flush=True,
            )
        elif (fix := wrong_scheme(upstream)) is not None:
            print(
                f"streamfix: warning: the gateway at {upstream} {fix}; every request will fail",
                file=sys.stderr,
                flush=True,
            )
    else:
        replay, upstream = start_replay()
    print(
        BANNER.format(
            listen=a.listen,
            upstream=upstream,
            demo=f" (built-in replay of recordings/; unrepaired streams straight from {upstream})" if replay else "",
            try_=(TRY_DEMO if replay else TRY_GATEWAY).format(listen=a.listen),
        ),
        flush=True,
    )
    if a.workers > 1:
        try:
            return workers.run(
                a.workers,
                lambda listen, up, more: mitm_command(upstream, listen, up, False, a.keep_bodies, more),
                a.listen,
                a.upstream_proxy,
                extra,
                a.redis,
                "",
            )
        finally:
            if replay is not None:
                stop(replay)
    redis = None
    if a.redis == "local":
        redis, url = workers.start_local_redis()
        extra = ["--set", f"streamfix_redis={url}", *extra]
    elif a.redis:
        extra = ["--set", f"streamfix_redis={a.redis}", *extra]
    cmd = mitm_command(upstream, a.listen, a.upstream_proxy, a.web, a.keep_bodies, extra)
    # its own process group: a terminal's Ctrl-C reaches only us, and mitmdump gets exactly
    # one SIGINT (ours); a second one during its shutdown kills it (exit -2, no done hooks)
    mitm = subprocess.Popen(cmd, cwd=ROOT if CHECKOUT else None, env=child_env(), process_group=0)
    children.append(mitm)
    if pending:  # a SIGTERM before mitmdump ran (the handler runs between our statements)
        mitm.send_signal(signal.SIGTERM)
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
        if redis is not None:
            stop(redis)


OWN_OPTIONS = ("--upstream", "--listen", "--upstream-proxy", "--upstream-proxy-auth", "--web", "--keep-bodies",
               "--workers", "--redis", "--options")  # fmt: skip


def unrecognized(prog: str, args: list[str]) -> str:
    """argparse's "unrecognized arguments", with the option meant when one is misspelt
    (``--listn``: did you mean ``--listen``?), and where mitmdump's options go."""
    import difflib

    msg = f"unrecognized arguments: {' '.join(args)}"
    meant = [(x, m[0]) for x in args if x.startswith("--")
             for m in [difflib.get_close_matches(x.split("=", 1)[0], OWN_OPTIONS, n=1, cutoff=0.75)] if m]  # fmt: skip
    if meant:
        msg += "; did you mean " + ", ".join(f"{m} (for {x.split('=', 1)[0]})" for x, m in meant) + "?"
    if any(x.startswith("-") and x not in dict(meant) for x in args):
        msg += (
            f"; {prog}'s own options are {', '.join(OWN_OPTIONS[:-1])} and {OWN_OPTIONS[-1]}: "
            f"mitmdump's options (--set NAME=VALUE, -w FILE, ...) go after --, "
            f"e.g. {prog} -- {' '.join(args)}"
        )
    return msg


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
    if any("streamfix_upstream_proxyauth=" in x and not x.endswith("=") for x in extra):
        return True
    folder = confdir(extra)
    for name in ("config.yaml", "config.yml"):
        f = folder / name
        try:
            if any(line.split(":", 1)[0].strip() == "streamfix_upstream_proxyauth" and line.split(":", 1)[1].strip()
                   for line in f.read_text().splitlines() if ":" in line):  # fmt: skip
                return True
        except OSError:
            pass
    return False


if __name__ == "__main__":
    sys.exit(main())
