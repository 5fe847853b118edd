"""``pipx install .``: pipx puts only ``streamfix`` on PATH, not mitmproxy's
``mitmweb``/``mitmdump``, so the README's ``mitmweb -s "$(streamfix addon-path)"`` had no
mitmweb; ``streamfix mitmweb`` and ``streamfix mitmdump`` run the ones in streamfix's own
environment. From a copy of the tracked files, into a temporary PIPX_HOME; the wheel's
compiled core reuses the checkout's build of these sources (the hook's cache: quick; the
compile itself is tests/e2e/test_operator_deploy.py's), so the installed copy runs compiled.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import streamfix.wire._core as core
from support import Proc, free_port, tracked_copy

from streamfix import compiled

pytestmark = pytest.mark.e2e
PIPX = shutil.which("pipx")


@pytest.fixture(scope="module")
def pipx_home(tmp_path_factory):
    if PIPX is None:
        pytest.skip("no pipx (Debian: apt-get install pipx; scripts/install-deploy-tools)")
    tmp = tmp_path_factory.mktemp("pipx")
    src = tracked_copy(tmp / "src")
    built = core.BUILDS / core.key()
    if built.is_dir():
        shutil.copytree(built, src / "build" / "compiled" / built.name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", core.PURE_ENV)}
    env.update(PIPX_HOME=str(tmp / "pipx"), PIPX_BIN_DIR=str(tmp / "bin"), PIPX_MAN_DIR=str(tmp / "man"))
    py = Path(sys.base_prefix) / "bin" / "python3"  # pipx's own Python may be older than 3.12
    r = subprocess.run([PIPX, "install", "--python", str(py), str(src)], env=env, capture_output=True, text=True,
                       timeout=900, cwd=tmp)  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    env["PATH"] = f"{tmp / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin"  # nothing of this checkout's venv
    assert sorted(p.name for p in (tmp / "bin").iterdir()) == ["streamfix"]  # what pipx exposes: no mitmweb
    return tmp, env, built.is_dir()


def sf(env: dict, *args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["streamfix", *args], env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def test_pipx_install_runs_the_compiled_core(pipx_home) -> None:
    tmp, env, seeded = pipx_home
    r = sf(env, "core", "--check", cwd=tmp)
    if compiled.compiler() is None and not seeded:
        pytest.skip("no C compiler here: the pipx install holds the pure core")
    assert r.returncode == 0 and r.stdout.startswith(f"compiled (mypyc, {tmp / 'pipx'}/venvs/streamfix/"), r.stdout


def test_mitmdump_and_mitmweb_through_streamfix(pipx_home) -> None:
    tmp, env, _ = pipx_home
    assert shutil.which("mitmweb", path=env["PATH"]) is None
    v = sf(env, "mitmweb", "--version", cwd=tmp)
    assert v.returncode == 0 and v.stdout.startswith("Mitmproxy: "), v.stdout + v.stderr
    addon = sf(env, "addon-path", cwd=tmp).stdout.strip()
    assert addon.startswith(str(tmp / "pipx" / "venvs" / "streamfix")), addon
    (tmp / "empty.flow").touch()
    d = sf(env, "mitmdump", "-n", "-r", str(tmp / "empty.flow"), "-s", addon, "--set", f"confdir={tmp / 'conf'}",
           cwd=tmp)  # fmt: skip
    assert d.returncode == 0 and re.search(r"streamfix: repair mode, \d+ of \d+ rules on", d.stdout), d.stdout
    # the README's mitmweb line, as a pipx user types it
    port, web = free_port(), free_port()
    web_proc = Proc(["streamfix", "mitmweb", "--mode", f"reverse:http://127.0.0.1:9@127.0.0.1:{port}", "-s", addon,
                     "--set", f"web_port={web}", "--set", "web_open_browser=false", "--set", f"confdir={tmp / 'conf'}"],
                    cwd=tmp, env=env)  # fmt: skip
    try:
        web_proc.wait_for(rf"Web server listening at http://127\.0\.0\.1:{web}/", 120)
        web_proc.wait_for(r"streamfix: repair mode", 60)
    finally:
        web_proc.stop()
