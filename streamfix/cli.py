"""The ``streamfix`` command (``pip install .``, pipx): one entry for what a user runs.

streamfix sidecar [--upstream URL] [-- MITMDUMP ARGS]   the sidecar (scripts/sidecar in a checkout)
streamfix demo [NAME ...]          each recording raw and repaired, event by event
streamfix check FILE ...           the offline checker
streamfix usage PATH ...           the turn log summed per key, model and day
streamfix capture FLOW NAME        a saved flow into a recording
streamfix recordings list          the recordings that come with it
streamfix replay [--port N]        the replay upstream alone (unrepaired streams)
streamfix core [--check|--build]   which protocol core runs (compiled or pure), or build it
streamfix addon-path [--all]       the -s script(s) for your own mitmdump/mitmweb
streamfix mitmweb|mitmdump ARGS    mitmproxy's own tools from streamfix's environment (pipx)
streamfix --version
"""

from __future__ import annotations

import importlib
import os
import sys

COMMANDS = {
    "sidecar": ("streamfix.sidecar", "run the sidecar (mitmdump with the addons) in front of a gateway"),
    "demo": ("streamfix.demo", "show each recording raw and repaired, event by event"),
    "check": ("streamfix.check", "check saved streams against the stream contract, offline"),
    "usage": ("streamfix.usage", "sum a turn log (--set streamfix_log=PATH) per key, model and day"),
    "capture": ("streamfix.capture", "turn a saved flow into a recording"),
    "recordings": ("streamfix.recordings", "list the recordings, or write one as a flow"),
    "replay": ("streamfix.replay", "the replay upstream alone: the recordings, unrepaired"),
    "core": ("streamfix.compiled:core", "say which protocol core runs (compiled or pure); --build builds it"),
}
TOOLS = ("mitmweb", "mitmdump")
"""mitmproxy's commands, run from streamfix's own environment: ``pipx install .`` puts only
``streamfix`` on PATH, not the tools of the packages it depends on."""
SCRIPTS = ("repair.py", "upstream.py", "views.py", "sseview.py")

_via_cli = False
"""Set when a subcommand runs through this command, so its help names ``streamfix X``."""


def prog(name: str) -> str:
    """The name a subcommand's usage and errors show: ``streamfix X`` when it runs through the
    ``streamfix`` command, else the module it was started as (``python -m streamfix.X``)."""
    module = COMMANDS.get(name, (f"streamfix.{name}",))[0].split(":", 1)[0]
    return f"streamfix {name}" if _via_cli else f"python -m {module}"


ADDON_PATH_USAGE = """\
usage: streamfix addon-path [--all]

The -s script for your own mitmdump or mitmweb (the client leg's addons/repair.py, from
where streamfix is installed); --all prints every script the sidecar loads, one per line
(client leg, CPA's upstream leg, mitmweb's views).

  mitmweb --mode reverse:http://127.0.0.1:8317@127.0.0.1:8318 -s "$(streamfix addon-path)"
  (installed with pipx: streamfix mitmweb ... runs the mitmweb streamfix came with)
"""


def addon_path(argv: list[str]) -> int:
    """``-s`` script paths: the client leg's (``repair.py``), or with ``--all`` every script the
    sidecar loads (client leg, CPA's upstream leg, mitmweb's views), one per line."""
    from .procs import addons_dir

    if argv and argv[0] in ("-h", "--help"):
        print(ADDON_PATH_USAGE, end="")
        return 0
    if argv not in ([], ["--all"]):
        print(f"streamfix addon-path: unexpected {' '.join(argv)}\n\n{ADDON_PATH_USAGE}", end="", file=sys.stderr)
        return 2
    for script in SCRIPTS if argv else SCRIPTS[:1]:
        print(addons_dir() / script)
    return 0


def run_tool(name: str, argv: list[str]) -> int:
    """mitmproxy's ``name`` (mitmweb, mitmdump) from the environment streamfix runs in, with
    ``argv`` as it is: what a pipx install, which exposes only ``streamfix``, lacks on PATH."""
    from .procs import tool

    path = tool(name)
    if not os.path.isabs(path):
        print(f"streamfix {name}: no {name} beside {sys.executable} or on PATH", file=sys.stderr)
        return 1
    os.execv(path, [path, *argv])
    return 1  # not reached


def version() -> str:
    """``streamfix X (mitmproxy Y, protocol core compiled|pure)``."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    def v(name: str) -> str:
        try:
            return dist_version(name)
        except PackageNotFoundError:
            return "unknown"

    import streamfix.wire.apis  # noqa: F401 - imports every compiled module
    from streamfix.wire import _core

    return f"streamfix {v('streamfix')} (mitmproxy {v('mitmproxy')}, protocol core {_core.describe()})"


def usage() -> str:
    lines = ["usage: streamfix COMMAND [ARGS]  (streamfix COMMAND --help for each; streamfix --version)", ""]
    lines += [f"  {name:12} {help}" for name, (_, help) in COMMANDS.items()]
    lines.append(f"  {'addon-path':12} print the -s script for your own mitmdump/mitmweb (--all: every script)")
    lines.append(f"  {'mitmweb':12} mitmproxy's mitmweb (and mitmdump) from streamfix's environment, e.g. after pipx")
    lines += [
        "",
        '  mitmweb --mode reverse:http://127.0.0.1:8317@127.0.0.1:8318 -s "$(streamfix addon-path)"',
        '  streamfix mitmweb --mode reverse:http://127.0.0.1:8317@127.0.0.1:8318 -s "$(streamfix addon-path)"  # pipx',
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    global _via_cli
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        print(version())
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd == "addon-path":
        return addon_path(rest)
    if cmd in TOOLS:
        return run_tool(cmd, rest)
    if cmd not in COMMANDS:
        print(f"streamfix: unknown command {cmd!r}\n\n{usage()}", file=sys.stderr)
        return 2
    _via_cli = True
    module_name, _, func = COMMANDS[cmd][0].partition(":")
    module = importlib.import_module(module_name)
    sys.argv[0] = f"streamfix {cmd}"
    try:
        if cmd == "sidecar":
            return module.main(rest, prog="streamfix sidecar")
        rc = getattr(module, func or "main")(rest)
        sys.stdout.flush()  # here, not at exit, so that a closed pipe is caught below
        return rc
    except BrokenPipeError:
        return _pipe_closed()


SIGPIPE_EXIT = 141
"""The exit status of a command whose reader went away (``streamfix check ... | head -3``):
128 + SIGPIPE, as a shell reports a program the signal ended."""


def _pipe_closed() -> int:
    """The reader of standard output closed it: stop quietly (no traceback, and none at
    exit when Python flushes stdout again: it now points at /dev/null)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return SIGPIPE_EXIT


if __name__ == "__main__":  # python -m streamfix.cli: the subcommands see this module as streamfix.cli
    from streamfix.cli import main as _main

    sys.exit(_main())
