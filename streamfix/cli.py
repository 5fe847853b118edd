"""The ``streamfix`` command (``pip install .``, pipx): one entry for what a user runs.

streamfix sidecar [--upstream URL] [-- MITMDUMP ARGS]   the sidecar (scripts/sidecar in a checkout)
streamfix demo [NAME ...]          each recording raw and repaired, side by side
streamfix check FILE ...           the offline checker
streamfix usage PATH ...           the turn log summed per key, model and day
streamfix capture FLOW NAME        a saved flow into a recording
streamfix recordings list          the recordings that come with it
streamfix replay [--port N]        the replay upstream alone (unrepaired streams)
streamfix addon-path [--all]       the -s script(s) for your own mitmdump/mitmweb
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "sidecar": ("streamfix.sidecar", "run the sidecar (mitmdump with the addons) in front of a gateway"),
    "demo": ("streamfix.demo", "show each recording raw and repaired"),
    "check": ("streamfix.check", "check saved streams against the stream contract, offline"),
    "usage": ("streamfix.usage", "sum a turn log (--set streamfix_log=PATH) per key, model and day"),
    "capture": ("streamfix.capture", "turn a saved flow into a recording"),
    "recordings": ("streamfix.recordings", "list the recordings, or write one as a flow"),
    "replay": ("streamfix.replay", "the replay upstream alone: the recordings, unrepaired"),
}
SCRIPTS = ("repair.py", "upstream.py", "views.py", "sseview.py")


def addon_path(argv: list[str]) -> int:
    """``-s`` script paths: the client leg's (``repair.py``), or with ``--all`` every script the
    sidecar loads (client leg, CPA's upstream leg, mitmweb's views), one per line."""
    from .procs import addons_dir

    if argv not in ([], ["--all"]):
        print("usage: streamfix addon-path [--all]", file=sys.stderr)
        return 2
    for script in SCRIPTS if argv else SCRIPTS[:1]:
        print(addons_dir() / script)
    return 0


def usage() -> str:
    lines = ["usage: streamfix COMMAND [ARGS]  (streamfix COMMAND --help for each)", ""]
    lines += [f"  {name:12} {help}" for name, (_, help) in COMMANDS.items()]
    lines.append(f"  {'addon-path':12} print the -s script for your own mitmdump/mitmweb (--all: every script)")
    lines += ["", '  mitmdump --mode reverse:http://127.0.0.1:8317@127.0.0.1:8318 -s "$(streamfix addon-path)"']
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "addon-path":
        return addon_path(rest)
    if cmd not in COMMANDS:
        print(f"streamfix: unknown command {cmd!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[cmd][0])
    sys.argv[0] = f"streamfix {cmd}"
    if cmd == "sidecar":
        return module.main(rest, prog="streamfix sidecar")
    return module.main(rest)


if __name__ == "__main__":
    sys.exit(main())
