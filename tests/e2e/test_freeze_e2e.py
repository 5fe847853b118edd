"""addons/freeze.py in a real mitmdump: the startup state is frozen once it runs."""

from __future__ import annotations

from pathlib import Path

import support


def test_a_real_mitmdump_freezes_its_startup_once_running(tmp_path: Path):
    """The repair addon loads it (after the others, so their startup state is frozen too)."""
    proc, _ = support.start_mitmdump("http://127.0.0.1:9", tmp_path / "conf", "--set", "termlog_verbosity=debug")
    try:
        m = proc.wait_for(r"streamfix: (\d+) objects of the startup frozen for the garbage collector")
        assert int(m.group(1)) > 20_000  # mitmproxy's modules, classes and functions, and ours
    finally:
        proc.stop()
    off, _ = support.start_mitmdump(
        "http://127.0.0.1:9",
        tmp_path / "conf2",
        "--set",
        "termlog_verbosity=debug",
        "--set",
        "streamfix_gc_freeze=false",
    )
    try:
        # the addon's own line for this case: its running hook has run (the repair's
        # startup line comes before it, so waiting for that would check too early)
        off.wait_for(r"streamfix: garbage collector left as it is \(streamfix_gc_freeze off\)")
    finally:
        off.stop()
    assert "frozen for the garbage collector" not in off.output
