"""The compiled core on every install path: a wheel (``pip install .``, pipx,
deploy/install.sh, the image) carries it where a C compiler is found (setup.py), says so
in one line where none is, ``streamfix core`` tells which core runs (``--check`` for
scripts), the startup line of an installed copy says how to get it (not scripts/bootstrap,
which an installed user does not have), and ``streamfix_build_info`` has the core.

The wheels here are built from a copy of the checkout's tracked files with
``--no-build-isolation`` (this venv has setuptools and mypy): quick, and the compiled case
reuses the checkout's own build of these very sources (the hook's cache, as a second
install would). Compiling from scratch at install is tests/e2e/test_operator_deploy.py's
fresh clone (the image's build stage).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import streamfix.wire._core as core
from support import ROOT, child_env, tracked_copy

from streamfix import compiled


def wheel(src: Path, out: Path, env: dict[str, str]) -> tuple[Path, subprocess.CompletedProcess]:
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=900, env=env, cwd=out,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = out.glob("streamfix-*.whl")
    return whl, r


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", core.PURE_ENV, "CC")}
    return {**env, **extra}


@pytest.mark.e2e
def test_without_a_compiler_the_wheel_is_pure_and_says_so(tmp_path: Path) -> None:
    src = tracked_copy(tmp_path / "src")
    nothing = tmp_path / "empty-path"
    nothing.mkdir()
    whl, r = wheel(src, tmp_path, clean_env(PATH=str(nothing)))  # no cc, gcc or clang on it
    said = [line.strip() for line in (r.stdout + r.stderr).splitlines() if line.strip().startswith("streamfix:")]
    assert said == [
        (
            "streamfix: no C compiler (cc, gcc, clang): the wheel holds the pure-Python core "
            "(same rules, slower; streamfix core says so)"
        )
    ], said
    assert whl.name.endswith("-py3-none-any.whl"), whl.name
    assert not [n for n in zipfile.ZipFile(whl).namelist() if n.endswith(".so")]


@pytest.mark.e2e
def test_with_a_compiler_the_wheel_carries_the_core(tmp_path: Path) -> None:
    d = core.BUILDS / core.key()
    if compiled.compiler() is None or not (d / "wire").is_dir():
        pytest.skip("no C compiler or no compiled core of these sources here (scripts/bootstrap builds it)")
    src = tracked_copy(tmp_path / "src")
    shutil.copytree(d, src / "build" / "compiled" / d.name)  # the hook's cache: the same sources' build
    whl, _ = wheel(src, tmp_path, clean_env())
    assert whl.name.endswith(f"-cp{sys.version_info.major}{sys.version_info.minor}-"
                             f"cp{sys.version_info.major}{sys.version_info.minor}-linux_x86_64.whl"), whl.name  # fmt: skip
    names = zipfile.ZipFile(whl).namelist()
    so = [n for n in names if n.endswith(".so")]
    prefix = f"streamfix/build/compiled/{core.key()}/"
    for m in (*core.COMPILED, *core.NATIVE):
        assert any(n.startswith(prefix + f"wire/{m}.") for n in so), (m, so)
    assert any(n.startswith(prefix + "runtime/") for n in so), so
    # installed into a venv (its dependencies from this venv's site-packages, after its own), it
    # runs the compiled core
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
                    "--disable-pip-version-check", str(whl)], check=True, timeout=300, env=clean_env())  # fmt: skip
    sp = next((venv / "lib").glob("python3.*/site-packages"))
    import orjson

    (sp / "deps-from-the-test-venv.pth").write_text(str(Path(orjson.__file__).parent.parent) + "\n")
    r = subprocess.run([str(venv / "bin" / "streamfix"), "core", "--check"], capture_output=True, text=True,
                       timeout=120, env=clean_env(), cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0 and r.stdout.startswith(f"compiled (mypyc, {sp}/streamfix/build/compiled/"), r.stdout


def test_streamfix_core_and_check() -> None:
    r = subprocess.run([sys.executable, "-m", "streamfix.cli", "core", "--check"], capture_output=True, text=True,
                       timeout=120, env=child_env(), cwd=ROOT)  # fmt: skip
    said = r.stdout.strip()
    assert said.startswith(("compiled (", "pure (")), said
    assert r.returncode == (0 if said.startswith("compiled") else 1), (r.returncode, said)
    pure = subprocess.run([sys.executable, "-m", "streamfix.cli", "core", "--check"], capture_output=True, text=True,
                          timeout=120, env=child_env(STREAMFIX_PURE="1"), cwd=ROOT)  # fmt: skip
    assert pure.returncode == 1 and pure.stdout.strip() == "pure (STREAMFIX_PURE=1)", pure.stdout
    info = subprocess.run([sys.executable, "-m", "streamfix.cli", "core"], capture_output=True, text=True,
                          timeout=120, env=child_env(STREAMFIX_PURE="1"), cwd=ROOT)  # fmt: skip
    assert info.returncode == 0  # without --check it only tells


def test_an_installed_copy_without_the_core_says_how_to_get_it(tmp_path: Path) -> None:
    """The installed layout (site-packages/streamfix/wire, no compiled build): the reason
    names ``streamfix core --build``, never scripts/bootstrap, which an installed user lacks."""
    pkg = tmp_path / "site" / "streamfix"
    shutil.copytree(ROOT / "wire", pkg / "wire", ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "__init__.py").write_text("")
    r = subprocess.run(
        [sys.executable, "-c", "import streamfix.wire._core as c; print(c.state)"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env=clean_env(PYTHONPATH=str(tmp_path / "site")),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    said = r.stdout.strip()
    assert said.startswith("pure (no compiled build: `streamfix core --build` builds it"), said
    assert "scripts/bootstrap" not in said
    # a checkout says scripts/bootstrap (it has one)
    assert "scripts/bootstrap" in core.HOW and not core.INSTALLED


def test_build_info_has_the_core() -> None:
    from streamfix.addons import metrics

    reg = metrics.Registry(metrics.Bounded("model", 1), metrics.Bounded("key", 1), lambda: False)
    text = reg.exposition().decode()
    (line,) = [x for x in text.splitlines() if x.startswith("streamfix_build_info{")]
    want = core.describe().split(" (", 1)[0]
    assert f'core="{want}"' in line and want in ("compiled", "pure", "mixed"), line
