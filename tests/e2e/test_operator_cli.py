"""The ``streamfix`` command as an operator meets it: ``--version``, every
subcommand's help under its own name, ``addon-path --help``, ``--set`` before ``--``
explained, a port in use said before any banner claims it, and the values in mitmproxy's
config.yaml checked before anything listens. Run through ``python -m streamfix.cli``, the
``streamfix`` entry point's module (tests/e2e/test_install.py runs the installed command).
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support import ROOT, child_env


def streamfix(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "streamfix.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(),
        cwd=ROOT,
    )


@contextmanager
def busy_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A port something else listens on."""
    with socket.socket() as s:
        s.bind((host, 0))
        s.listen()
        yield s.getsockname()[1]


def test_version() -> None:
    r = streamfix("--version")
    assert r.returncode == 0, r.stderr
    import mitmproxy.version

    line = r.stdout.strip()
    assert line.startswith("streamfix 0.1.0 (mitmproxy "), line
    assert f"mitmproxy {mitmproxy.version.VERSION}," in line and "protocol core " in line, line
    assert streamfix("-V").stdout == r.stdout


def test_addon_path_help_exits_0_and_a_wrong_argument_2() -> None:
    r = streamfix("addon-path", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: streamfix addon-path [--all]"), r.stdout + r.stderr
    assert "streamfix mitmweb" in r.stdout  # what a pipx install uses
    bad = streamfix("addon-path", "--every")
    assert bad.returncode == 2 and "unexpected --every" in bad.stderr and "usage: streamfix addon-path" in bad.stderr


@pytest.mark.parametrize("sub", ["sidecar", "demo", "check", "usage", "capture", "recordings", "replay", "core"])
def test_subcommand_help_names_streamfix_x(sub: str) -> None:
    r = streamfix(sub, "--help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"usage: streamfix {sub} "), r.stdout[:200]
    assert "python -m streamfix" not in r.stdout.split("\n\n", 1)[0]


def test_a_subcommand_error_names_streamfix_x() -> None:
    r = streamfix("usage")  # PATH is required
    assert r.returncode == 2 and "streamfix usage: error:" in r.stderr, r.stderr


def test_mitmdump_through_streamfix() -> None:
    """``streamfix mitmdump``/``mitmweb``: mitmproxy's own tools from streamfix's environment."""
    r = streamfix("mitmdump", "--version")
    assert r.returncode == 0 and r.stdout.startswith("Mitmproxy: "), r.stdout + r.stderr


def test_set_before_the_double_dash_is_explained() -> None:
    r = streamfix("sidecar", "--set", "streamfix_log=turns.jsonl", "-w", "x.flow")
    assert r.returncode == 2
    assert "unrecognized arguments: --set streamfix_log=turns.jsonl -w x.flow" in r.stderr, r.stderr
    assert "mitmdump's options (--set NAME=VALUE, -w FILE, ...) go after --" in r.stderr, r.stderr
    assert "e.g. streamfix sidecar -- --set streamfix_log=turns.jsonl -w x.flow" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == "", r.stdout


def test_a_misspelt_option_is_named() -> None:
    r = streamfix("sidecar", "--listn", "127.0.0.1:1")
    assert r.returncode == 2 and r.stdout == ""
    assert "unrecognized arguments: --listn 127.0.0.1:1; did you mean --listen (for --listn)?" in r.stderr, r.stderr
    assert "go after --" not in r.stderr  # no mitmdump option was meant
    from streamfix import sidecar

    helped = streamfix("sidecar", "--help").stdout.split("options:", 1)[1].split("mitmdump's own options")[0]
    assert set(re.findall(r"^  (--[a-z][a-z-]+)", helped, re.MULTILINE)) - {"--help"} == set(sidecar.OWN_OPTIONS)


@pytest.mark.e2e
@pytest.mark.parametrize("where", ["--listen", "--upstream-proxy", "streamfix_metrics", "web_port"])
def test_a_port_in_use_is_said_before_any_banner(where: str, tmp_path: Path) -> None:
    """Before the banner, which would claim the port, and before mitmdump's own "address
    already in use": exit 2, one line, which port and what to do."""
    with busy_port() as port:
        args = ["--upstream", "http://127.0.0.1:9"]
        if where == "--listen":
            args += ["--listen", f"127.0.0.1:{port}"]
        elif where == "--upstream-proxy":
            args += ["--upstream-proxy", f"127.0.0.1:{port}"]
        elif where == "web_port":
            args += ["--web", "--", "--set", f"web_port={port}"]
        else:
            args += ["--", "--set", f"streamfix_metrics=127.0.0.1:{port}"]
        if "--" not in args:
            args.append("--")
        args += ["--set", f"confdir={tmp_path}"]
        r = streamfix("sidecar", *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"port {port} is in use on 127.0.0.1 (Address already in use): stop what listens there" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "streamfix sidecar:" not in r.stdout and "Traceback" not in r.stderr, r.stdout + r.stderr
    if where.startswith("--"):
        assert f"e.g. {where} 127.0.0.1:{port + 1}" in r.stderr, r.stderr


@pytest.mark.e2e
def test_config_yaml_values_are_checked_by_the_launcher(tmp_path: Path) -> None:
    """mitmproxy's config.yaml (the confdir the sidecar is given): each bad streamfix value
    is a line naming the file, exit 2, before anything listens; a --set of the same option
    wins over the file, so its file value is not held against it."""
    conf = tmp_path / "conf"
    conf.mkdir()
    f = conf / "config.yaml"
    f.write_text("streamfix_drain_timeout: -5\nstreamfix_status: maybe\nstreamfix_metrcs: 9464\nstreamfix_log: /\n")
    r = streamfix("sidecar", "--", "--set", f"confdir={conf}", "--set", "streamfix_log=")
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 3, lines
    assert f"{f}: streamfix_drain_timeout=-5: give the seconds to wait" in lines[0], lines
    assert f"{f}: streamfix_status=maybe: not a boolean" in lines[1], lines
    assert f"{f}: unknown option streamfix_metrcs; did you mean streamfix_metrics?" in lines[2], lines
    assert "streamfix sidecar:" not in r.stdout


def test_a_turn_log_under_home_is_where_the_check_looked(tmp_path: Path, monkeypatch) -> None:
    """``streamfix_log=~/turns.jsonl``: the check expands ``~`` and so does the writer (a
    check that passed and a writer that then failed would be the traceback again)."""
    from mitmproxy.test import taddons
    from streamfix.addons import turnlog

    monkeypatch.setenv("HOME", str(tmp_path))
    turnlog.check_log("~/turns.jsonl")
    t = turnlog.TurnLog()
    with taddons.context(t) as tctx:
        tctx.configure(t, streamfix_log="~/turns.jsonl")
        t.write({"time": "x"})
        t.done()
    assert (tmp_path / "turns.jsonl").read_text() == '{"time":"x"}\n'


@pytest.mark.parametrize("argv", [["demo"], ["check", "--rules"]])
def test_a_closed_pipe_ends_the_command_quietly(argv):
    """``streamfix demo | head -1``: the reader goes away; no traceback, the status a shell
    gives a program SIGPIPE ended (or 0 when all was written before the reader left)."""
    from streamfix import cli

    p = subprocess.Popen([sys.executable, "-m", "streamfix.cli", *argv], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=ROOT, env=child_env())  # fmt: skip
    assert p.stdout is not None and p.stderr is not None
    p.stdout.readline()
    p.stdout.close()  # as head does after its line
    err = p.stderr.read().decode()
    rc = p.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert rc in (0, cli.SIGPIPE_EXIT)
    if argv == ["demo"]:  # far more than a pipe's buffer: the reader leaves before the end
        assert rc == cli.SIGPIPE_EXIT


@pytest.mark.e2e
def test_a_turn_log_that_cannot_be_opened_is_said_before_anything_listens(tmp_path: Path) -> None:
    """``/proc/turns.jsonl`` passes every look at the path (the folder exists and says it
    is writable) and only refuses the open: the launcher opens it in its check, so the
    operator gets one line and exit 2, not the banner, a Traceback and ``listening at``."""
    r = streamfix("sidecar", "--", "--set", f"confdir={tmp_path}", "--set", "streamfix_log=/proc/turns.jsonl")
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "streamfix_log=/proc/turns.jsonl: cannot open it" in lines[0], r.stderr
    assert "streamfix sidecar:" not in r.stdout and "listening at" not in r.stdout + r.stderr, r.stdout + r.stderr
