"""Options are checked before anything is served.

mitmproxy converts a ``--set`` for a script's option only after the script registered it,
inside its script loader; a value it cannot convert (``streamfix_status=off``: its bools
take only true/false) used to unload the whole addon without a word, and a misspelled
name is ignored (mitmproxy/mitmproxy#5371). Here real mitmdump (``-n -r`` of an empty
file: no listener, it exits once the file is read) and the real launcher meet each way
of getting it wrong, and each way of getting it right.
"""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from streamfix.addons.options import RULE_OPTIONS
from support import REPAIR_ADDON, ROOT, child_env, tool

from streamfix import sidecar

UPSTREAM_ADDON = ROOT / "addons" / "upstream.py"
STARTUP = r"streamfix: repair mode, (\d+) of (\d+) rules on"


def mitmdump(tmp: Path, *sets: str, addons: tuple[Path, ...] = (REPAIR_ADDON,)) -> subprocess.CompletedProcess:
    empty = tmp / "empty.flow"
    empty.touch()
    cmd = [tool("mitmdump"), "-n", "-r", str(empty), "--set", f"confdir={tmp / 'confdir'}"]
    for a in addons:
        cmd += ["-s", str(a)]
    for s in sets:
        cmd += ["--set", s]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=child_env(), cwd=ROOT)


def runs(tmp: Path, cases: dict[str, tuple]) -> dict[str, subprocess.CompletedProcess]:
    """Several mitmdump runs at once (each its own confdir)."""

    def one(item):
        key, (sets, addons) = item
        d = tmp / re.sub(r"\W", "_", key)
        d.mkdir()
        return key, mitmdump(d, *sets, addons=addons)

    with ThreadPoolExecutor(4) as pool:
        return dict(pool.map(one, cases.items()))


@pytest.mark.e2e
def test_bools_as_users_write_them(tmp_path: Path) -> None:
    """Every spelling of false switches its rule off, every spelling of true (and the bare
    ``--set name``) keeps it on, and the addon runs: the startup line says so."""
    false = [
        "streamfix_status=off",
        "streamfix_item_id=0",
        "streamfix_sequence=False",
        "streamfix_usage=no",
        "streamfix_replay=OFF",
        "streamfix_tool_index=false",
    ]
    true = [
        "streamfix_status",
        "streamfix_item_id=on",
        "streamfix_sequence=yes",
        "streamfix_usage=1",
        "streamfix_replay=TRUE",
        "streamfix_tool_index=true",
    ]
    got = runs(tmp_path, {"false": (false, (REPAIR_ADDON,)), "true": (true, (REPAIR_ADDON,))})
    for key, r in got.items():
        out = r.stdout + r.stderr
        assert r.returncode == 0, out
        assert "Traceback" not in out and "error" not in out.lower(), out
        m = re.search(STARTUP, out)
        assert m, f"no startup line ({key}): the addon did not run\n{out}"
    m = re.search(STARTUP + r" \(off: ([^)]*)\)", got["false"].stdout)
    assert m, got["false"].stdout
    assert sorted(m.group(3).split(", ")) == ["item_id", "replay", "sequence", "status", "tool_index", "usage"]
    n = re.search(STARTUP, got["true"].stdout)
    assert n.group(1) == n.group(2), got["true"].stdout  # all on


WRONG = {
    "bad bool": (
        ["streamfix_status=maybe"],
        "streamfix_status=maybe: not a boolean; use true/false, on/off, yes/no or 1/0",
    ),
    "typo": (["streamfix_stauts=false"], "unknown option streamfix_stauts; did you mean streamfix_status?"),
    "bad choice": (["streamfix_truncation=of"], "streamfix_truncation=of: must be one of incomplete, completed, off"),
    "choice without value": (["streamfix_mode"], "streamfix_mode without a value: must be one of repair, check"),
    "websocket choice": (["streamfix_websocket=refused"], "must be one of repair, refuse, pass"),
    "evidence": (
        ["streamfix_evidence=usage,stop_reason"],
        "unknown streamfix_evidence source(s) 'stop_reason'; known: ",
    ),
    # values of the right type that an addon's configure refused later, with a traceback
    # and exit 1 after the listener was up
    "metrics": (["streamfix_metrics=notaport"], "streamfix_metrics=notaport: give HOST:PORT or PORT, e.g. "),
    "drain": (["streamfix_drain_timeout=-5"], "streamfix_drain_timeout=-5: give the seconds to wait, 0 or more"),
    "labels": (["streamfix_key_labels=nolabel"], "streamfix_key_labels=nolabel: give PATTERN=NAME, e.g. "),
    "log folder": (
        ["streamfix_log=/nonexistent-streamfix/turns.jsonl"],
        "the folder /nonexistent-streamfix does not exist; create it (mkdir -p /nonexistent-streamfix)",
    ),
    "log is a folder": (["streamfix_log=/"], "streamfix_log=/: that is a folder; give a file in it"),
    "max keys": (["streamfix_metrics_max_keys=-1"], "streamfix_metrics_max_keys=-1: give 0 or more"),
    "max models": (["streamfix_metrics_max_models=-2"], "streamfix_metrics_max_models=-2: give 0 or more"),
    "ready window": (["streamfix_ready_window=-1"], "streamfix_ready_window=-1: give 0 or more"),
    "proxyauth": (["streamfix_upstream_proxyauth=nocolon"], "streamfix_upstream_proxyauth: give USER:PASS"),
    "int": (["streamfix_drain_timeout=soon"], "streamfix_drain_timeout: Failed to parse option"),
    "traces": (["streamfix_traces=127.0.0.1:4318"], "streamfix_traces=127.0.0.1:4318: give the OTLP/HTTP traces "),
}


@pytest.mark.e2e
def test_each_mistake_stops_mitmdump_with_its_message(tmp_path: Path) -> None:
    """``mitmdump -s addons/repair.py`` used directly: exits non-zero, saying what was wrong
    (not a traceback, not a silent unload)."""
    cases = {k: (sets, (REPAIR_ADDON,)) for k, (sets, _) in WRONG.items()}
    # an option of the other script (addons/upstream.py), and a typo of one of its options
    cases["upstream bool"] = (["streamfix_upstream=maybe"], (REPAIR_ADDON, UPSTREAM_ADDON))
    cases["upstream typo"] = (["streamfix_upstream_host=a.example"], (REPAIR_ADDON, UPSTREAM_ADDON))
    cases["upstream hosts"] = (["streamfix_upstream_hosts=not a host!"], (REPAIR_ADDON, UPSTREAM_ADDON))
    got = runs(tmp_path, cases)
    want = {k: msg for k, (_, msg) in WRONG.items()}
    want["upstream bool"] = "streamfix_upstream=maybe: not a boolean"
    want["upstream typo"] = "unknown option streamfix_upstream_host; did you mean streamfix_upstream_hosts?"
    want["upstream hosts"] = "streamfix_upstream_hosts=not a host!: give host names (server.codeium.com)"
    for key, r in got.items():
        out = r.stdout + r.stderr
        assert r.returncode != 0, f"{key}: mitmdump kept running\n{out}"
        assert want[key] in out, f"{key}:\n{out}"
        assert "Traceback" not in out, f"{key}:\n{out}"


@pytest.mark.e2e
def test_the_right_spelling_of_another_scripts_option_is_no_error(tmp_path: Path) -> None:
    """A name that only the second script registers is not reported as unknown while the
    first one loads."""
    r = mitmdump(
        tmp_path,
        "streamfix_upstream=off",
        "streamfix_upstream_patch_max_tokens=no",
        addons=(REPAIR_ADDON, UPSTREAM_ADDON),
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0 and re.search(STARTUP, out), out
    assert "unknown option" not in out, out


def launcher(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "streamfix.sidecar", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env(),
        cwd=ROOT,
    )


LAUNCHER_WRONG = {
    "no scheme": (["--upstream", "127.0.0.1:8317"], "give the scheme, e.g. --upstream http://127.0.0.1:8317"),
    "base URL": (
        ["--upstream", "http://127.0.0.1:8317/v1"],
        "the gateway's address has no path: use --upstream http://127.0.0.1:8317",
    ),
    "listen": (["--listen", "8318"], "--listen 8318: give HOST:PORT"),
    **{k: (["--", "--set", sets[0]], msg) for k, (sets, msg) in WRONG.items()},
    "--set=": (["--", "--set=streamfix_status=nein"], "streamfix_status=nein: not a boolean"),
    "upstream typo": (["--", "--set", "streamfix_upstream_host=x"], "did you mean streamfix_upstream_hosts?"),
    "upstream hosts": (
        ["--", "--set", "streamfix_upstream_hosts=a b"],
        "streamfix_upstream_hosts=a b: give host names",
    ),
    "proxy auth flag": (["--upstream-proxy-auth", "nocolon"], "streamfix_upstream_proxyauth: give USER:PASS"),
}


@pytest.mark.e2e
@pytest.mark.parametrize("case", LAUNCHER_WRONG)
def test_launcher_exits_2_before_starting_anything(case: str) -> None:
    args, msg = LAUNCHER_WRONG[case]
    r = launcher(*args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert msg in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr  # one line
    assert "streamfix sidecar:" not in r.stdout  # the banner: nothing was started


def test_scripts_sidecar_is_the_same_launcher() -> None:
    """The README's command itself (bootstrap, then the launcher) exits 2 on a typo."""
    r = subprocess.run(
        [str(ROOT / "scripts" / "sidecar"), "--", "--set", "streamfix_truncaton=off"],
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env(),
        cwd=ROOT,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "did you mean streamfix_truncation?" in r.stderr


def test_every_option_is_registered_with_tidy_help_and_in_the_readme() -> None:
    """Every streamfix option of every script the sidecar loads: help without runs of
    spaces (mitmproxy keeps a triple-quoted text's indentation), listed in the README's
    option table, and shown by ``scripts/sidecar --options``."""
    registered = {n: o for n, o in sidecar.registered_options().items() if n.startswith("streamfix")}
    assert {
        "streamfix_status",
        "streamfix_upstream",
        "streamfix_upstream_hosts",
        "streamfix_upstream_patch_max_tokens",
        "streamfix_websocket",
    } <= set(registered)
    for name, o in registered.items():
        assert "  " not in o.help, (name, o.help)
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Options", 1)[1].split("\n## ", 1)[0]
    missing = [n for n in registered if f"`{n}`" not in table]
    assert not missing, f"not in the README's option table: {missing}"
    listed = launcher("--options")
    assert listed.returncode == 0
    for name in registered:
        assert re.search(rf"^{name}  \(", listed.stdout, re.MULTILINE), name
    helps = [line.strip() for line in listed.stdout.splitlines() if line.startswith("    ")]
    assert helps and not [h for h in helps if "  " in h]


@pytest.mark.e2e
def test_mitmdump_options_help_has_no_runs_of_spaces(tmp_path: Path) -> None:
    """``mitmdump -s addons/repair.py -s addons/upstream.py --options``, as the README says."""
    r = subprocess.run(
        [
            tool("mitmdump"),
            "--set",
            f"confdir={tmp_path}",
            "-s",
            str(REPAIR_ADDON),
            "-s",
            str(UPSTREAM_ADDON),
            "--options",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env(),
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    blocks = re.split(r"\n(?=\S)", r.stdout)
    ours = [b for b in blocks if re.search(r"^streamfix\w*:", b, re.MULTILINE)]
    assert any("streamfix_upstream_hosts:" in b for b in ours)
    for b in ours:
        text = " ".join(line.lstrip("# ").rstrip() for line in b.splitlines() if line.startswith("#"))
        assert "  " not in text, b


def test_help_says_how_to_reach_mitmdump() -> None:
    r = launcher("--help")
    assert r.returncode == 0
    for needle in (" -- ", "--set NAME=VALUE", "--options", "token", "web_password"):
        assert needle in r.stdout, needle


@pytest.mark.e2e
def test_config_file_values_are_checked_too(tmp_path: Path) -> None:
    """``~/.mitmproxy/config.yaml`` (confdir): a bool written as a word is understood, a bad
    one stops mitmdump with its message (mitmproxy defers these values the same way)."""
    good, bad = tmp_path / "good", tmp_path / "bad"
    for d, text in ((good, 'streamfix_status: "off"\nstreamfix_item_id: no\n'), (bad, "streamfix_status: maybe\n")):
        (d / "confdir").mkdir(parents=True)
        (d / "confdir" / "config.yaml").write_text(text)
    ok = mitmdump(good)
    assert (
        ok.returncode == 0
        and f"{len(RULE_OPTIONS) - 2} of {len(RULE_OPTIONS)} rules on (off: status, item_id)" in ok.stdout
    ), ok.stdout + ok.stderr
    no = mitmdump(bad)
    assert no.returncode != 0 and "streamfix_status=maybe: not a boolean" in no.stdout + no.stderr
