"""``pip install .`` as a user does it: the built wheel into a fresh venv, run
from outside the checkout. It gives a ``streamfix`` command whose demo and sidecar work
with the recordings that come with it, an addon path for ``mitmdump -s``, runtime
dependencies only, and nothing under a generic top-level name in site-packages (the
checkout's wire/, addons/, recordings/ are streamfix.wire, streamfix.addons,
streamfix/_recordings there). pip's cache makes the install quick after bootstrap.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from streamfix.addons.options import RULE_OPTIONS
from support import ROOT, Proc, assert_same, fetch, free_port, live_expected

from streamfix import compiled
from streamfix.recordings import load

pytestmark = pytest.mark.e2e

DEMO = "chat-devin-index1"


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{cmd}: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("install")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["HOME"] = str(tmp / "home")
    env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    (tmp / "home").mkdir()
    wheels = tmp / "wheels"
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--disable-pip-version-check",
            "-w",
            str(wheels),
            str(ROOT),
        ],
        cwd=tmp,
        env=env,
    )
    (wheel,) = wheels.glob("streamfix-*.whl")
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=tmp, env=env)
    run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        cwd=tmp,
        env=env,
    )
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return tmp, venv, env


def site_packages(venv: Path) -> Path:
    (sp,) = (venv / "lib").glob("python3.*/site-packages")
    return sp


def test_nothing_generic_at_top_level(installed) -> None:
    _, venv, env = installed
    sp = site_packages(venv)
    tops = {p.name for p in sp.iterdir()}
    assert "streamfix" in tops
    for generic in ("wire", "addons", "recordings", "tests"):
        assert generic not in tops, f"site-packages/{generic} installed"
    assert (sp / "streamfix" / "wire" / "devin.proto").is_file()
    assert (sp / "streamfix" / "_recordings" / DEMO / "response.body").is_file()
    # runtime dependencies only: none of the test extras came along
    names = run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"], cwd=venv, env=env).stdout
    for extra in ("pytest", "hypothesis", "playwright", "atheris", "grpcio-tools", "openai"):
        assert not re.search(rf"^{extra}==", names, re.MULTILINE | re.IGNORECASE), extra


def test_the_command(installed) -> None:
    tmp, venv, env = installed
    r = run(["streamfix", "--help"], cwd=tmp, env=env)
    for sub in ("sidecar", "demo", "check", "usage", "capture", "addon-path"):
        assert sub in r.stdout
    path = Path(run(["streamfix", "addon-path"], cwd=tmp, env=env).stdout.strip())
    assert path == site_packages(venv) / "streamfix" / "addons" / "repair.py" and path.is_file()
    every = run(["streamfix", "addon-path", "--all"], cwd=tmp, env=env).stdout.split()
    assert [Path(p).name for p in every] == ["repair.py", "upstream.py", "views.py", "sseview.py"]
    # the user's own mitmdump with the installed addon (no checkout on sys.path)
    (tmp / "empty.flow").touch()
    r = run(
        ["mitmdump", "-n", "-r", str(tmp / "empty.flow"), "-s", str(path), "--set", "streamfix_status=off"],
        cwd=tmp,
        env=env,
        timeout=120,
    )
    assert f"{len(RULE_OPTIONS) - 1} of {len(RULE_OPTIONS)} rules on (off: status)" in r.stdout, r.stdout
    assert str(ROOT) not in r.stdout + r.stderr


def test_demo(installed) -> None:
    tmp, _, env = installed
    r = run(["streamfix", "demo", DEMO], cwd=tmp, env=env, timeout=300)
    assert f"=== {DEMO}" in r.stdout and "tool_index" in r.stdout, r.stdout
    assert "Traceback" not in r.stdout + r.stderr


def test_sidecar_repairs(installed) -> None:
    tmp, _, env = installed
    port = free_port()
    proc = Proc(["streamfix", "sidecar", "--listen", f"127.0.0.1:{port}"], cwd=tmp, env=env)
    try:
        proc.wait_for(rf"listening at 127\.0\.0\.1:{port}", timeout=120)
        rec = load(DEMO)
        got = fetch(
            f"http://127.0.0.1:{port}{rec.request['path']}",
            body=rec.request_body,
            headers={
                "content-type": "application/json",
                "accept-encoding": "identity",
                "x-streamfix-recording": rec.name,
            },
        )
        assert got.status == 200
        assert_same(got.body, live_expected(rec, got))
        assert got.body != rec.body
    finally:
        proc.stop()
    assert str(ROOT) not in proc.output, proc.output  # nothing came from the checkout
    if compiled.compiler() is not None:  # the wheel carries the compiled core (setup.py), and the sidecar runs it
        assert "build compiled;" in proc.output and "protocol core: compiled (mypyc, " in proc.output, proc.output


def test_streamfix_core_check(installed) -> None:
    tmp, venv, env = installed
    r = subprocess.run(["streamfix", "core", "--check"], cwd=tmp, env=env, capture_output=True, text=True, timeout=120)
    if compiled.compiler() is None:
        assert r.returncode == 1 and r.stdout.startswith("pure (no compiled build: `streamfix core --build`"), r.stdout
    else:
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.startswith(f"compiled (mypyc, {site_packages(venv)}/streamfix/build/compiled/"), r.stdout
