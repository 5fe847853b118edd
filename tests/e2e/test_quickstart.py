"""The README's quick start, as a new user meets it: a fresh clone, its first
command (``scripts/sidecar``: installs the runtime only, then serves the demo), its curl
against the sidecar and against the replay upstream the banner names; ``just`` as the
README says to run it; README and docs cite nothing a clone does not have."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from streamfix.addons.options import RULE_OPTIONS
from streamfix.wire.contract import StreamChecker
from support import ROOT, Proc, free_port

README = ROOT / "README.md"


def sh_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, re.DOTALL)


def test_just_alone_lists_the_recipes_without_just_on_path() -> None:
    just = Path(sys.executable).parent / "just"
    if not just.exists():
        pytest.skip("rust-just is not in this venv")
    r = subprocess.run(
        [str(just)], cwd=ROOT, capture_output=True, text=True, timeout=60, env={**os.environ, "PATH": "/usr/bin:/bin"}
    )
    assert r.returncode == 0, r.stderr
    assert "Available recipes" in r.stdout and "demo" in r.stdout
    assert ".venv/bin/just" in README.read_text()  # the README says how to run it


def curl_args(block: str, port: int) -> tuple[str, dict[str, str], bytes]:
    """The README's curl command: (URL, headers, body), the listen port replaced."""
    argv = shlex.split(block.replace("\\\n", " "))
    assert argv[0] == "curl", argv
    url, headers, body = "", {}, b""
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "-H":
            k, _, v = argv[i + 1].partition(":")
            headers[k.strip()] = v.strip()
            i += 2
        elif a == "-d":
            body = argv[i + 1].encode()
            i += 2
        elif a.startswith("http"):
            url = a.replace("127.0.0.1:8318", f"127.0.0.1:{port}")
            i += 1
        else:
            i += 1
    return url, headers, body


def violations(api: str, body: bytes) -> list:
    c = StreamChecker(api)
    c.feed(body)
    c.close()
    return c.violations


@pytest.mark.e2e
def test_quick_start_from_a_fresh_clone(tmp_path: Path) -> None:
    blocks = sh_blocks(README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0])
    assert blocks[0].strip() == "scripts/sidecar", blocks[0]
    curl = next(b for b in blocks if b.lstrip().startswith("curl"))
    clone = tmp_path / "streamfix"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=300)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["HOME"] = str(home)
    env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))  # the new HOME has no pip cache
    port = free_port()
    # the README's first command (a free port instead of 8318: tests never take a fixed one)
    proc = Proc([str(clone / "scripts" / "sidecar"), "--listen", f"127.0.0.1:{port}"], cwd=clone, env=env)
    try:
        m = proc.wait_for(r"-> (http://127\.0\.0\.1:\d+) \(built-in replay of recordings/", timeout=900)
        replay = m.group(1)
        proc.wait_for(rf"listening at 127\.0\.0\.1:{port}", timeout=120)
        n = len(RULE_OPTIONS)
        proc.wait_for(rf"streamfix: repair mode, {n} of {n} rules on", timeout=60)
        url, headers, body = curl_args(curl, port)
        import httpx

        repaired = httpx.post(url, headers=headers, content=body, timeout=60)
        raw = httpx.post(url.replace(f"http://127.0.0.1:{port}", replay), headers=headers, content=body, timeout=60)
        assert repaired.status_code == raw.status_code == 200
        assert repaired.content != raw.content
        assert violations("responses", raw.content), "the demo recording is a broken stream"
        assert violations("responses", repaired.content) == []
    finally:
        proc.stop()
    # the sidecar installed the runtime only, not the test extras
    pip = subprocess.run(
        [str(clone / ".venv" / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert re.search(r"^mitmproxy==", pip.stdout, re.MULTILINE)
    for extra in ("pytest", "playwright", "atheris", "grpcio-tools"):
        assert not re.search(rf"^{extra}==", pip.stdout, re.MULTILINE | re.IGNORECASE), extra
    assert shutil.which("git")
