"""python -m streamfix.check as a command: --help and --rules."""

import subprocess
import sys


def test_help_and_rules_from_the_command_line():
    h = subprocess.run([sys.executable, "-m", "streamfix.check", "--help"], capture_output=True, text=True, check=True)
    assert "FILE" in h.stdout and "Exit status" in h.stdout and ".har" in h.stdout
    r = subprocess.run([sys.executable, "-m", "streamfix.check", "--rules"], capture_output=True, text=True, check=True)
    assert "item.order" in r.stdout and "chat.tool_index" in r.stdout
