"""scripts/install-cpa without CPA: a stand-in ``go`` on PATH (realcpa.py's discovery: tests/support/test_realcpa.py).

The stand-in ``go`` (a shell script written here) logs each call and either "installs"
a server (writes ``$GOBIN/server``) or answers as the module proxy does when it refuses a
module (403 "not available"), per version.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support import ROOT

SCRIPT = ROOT / "scripts" / "install-cpa"

FAKE_GO = r"""#!/bin/sh
echo "$*" >> "$FAKE_GO_LOG"
if [ "$1" = env ]; then echo "https://proxy.golang.org,direct"; exit 0; fi
case "$*" in
  *@v7.2.89*) mkdir -p "$GOBIN"; printf '#!/bin/sh\necho cpa\n' > "$GOBIN/server"; chmod +x "$GOBIN/server" ;;
  *) echo "go: $3: reading https://proxy.golang.org/x/@v/y.info: 403 Forbidden" >&2
     echo "	server response: This module version is not available." >&2; exit 1 ;;
esac
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the script in a tree of its own (it installs into <tree>/.cache/cpa)."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(SCRIPT, tmp_path / "scripts" / "install-cpa")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "go").write_text(FAKE_GO)
    (bindir / "go").chmod(0o755)
    return tmp_path


def run(tree: Path, path: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    e = {"PATH": path if path is not None else f"{tree / 'bin'}:/usr/bin:/bin", "FAKE_GO_LOG": str(tree / "go.log"),
         "STREAMFIX_CPA_VERSIONS": "v7.2.89 v7.3.4 v8.0.78", **env}  # fmt: skip
    return subprocess.run([str(tree / "scripts" / "install-cpa")], env=e, capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip


def installs(tree: Path) -> list[str]:
    log = tree / "go.log"
    return [ln for ln in log.read_text().splitlines() if ln.startswith("install")] if log.exists() else []


def test_installs_then_caches_and_reports_refusals(tree):
    r = run(tree)
    assert r.returncode == 0, r.stderr
    assert (tree / ".cache" / "cpa" / "v7.2.89" / "server").exists()
    assert installs(tree) == [
        "install github.com/router-for-me/CLIProxyAPI/v7/cmd/server@v7.2.89",
        "install github.com/router-for-me/CLIProxyAPI/v7/cmd/server@v7.3.4",
        "install github.com/router-for-me/CLIProxyAPI/v8/cmd/server@v8.0.78",
    ]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 3 and lines[0].startswith("streamfix: installed CPA v7.2.89")
    for v, mod in (("v7.3.4", "v7"), ("v8.0.78", "v8")):
        line = next(ln for ln in lines if f"CPA {v} not installed" in ln)
        assert f"refused github.com/router-for-me/CLIProxyAPI/{mod}@{v} (403 Forbidden)" in line
        assert "STREAMFIX_CPA_BIN_DIR" in line
        assert "refused" in (tree / ".cache" / "cpa" / f"{v}.not-installed").read_text()
    # the second run installs nothing that is there (and asks again for the refused ones)
    (tree / "go.log").unlink()
    r = run(tree)
    assert r.returncode == 0
    assert not any("@v7.2.89" in ln for ln in installs(tree))


def test_nothing_to_do_when_every_version_is_there(tree):
    r = run(tree, STREAMFIX_CPA_VERSIONS="v7.2.89")
    assert r.returncode == 0
    (tree / "go.log").unlink()
    r = run(tree, STREAMFIX_CPA_VERSIONS="v7.2.89")
    assert r.returncode == 0 and r.stderr == "" and not (tree / "go.log").exists()


def test_binaries_from_elsewhere(tree, tmp_path):
    bins = tmp_path / "mybins"
    (bins / "v7.3.4").mkdir(parents=True)
    for p in (bins / "cpa-v8.0.78", bins / "v7.3.4" / "server"):
        p.write_text("#!/bin/sh\n")
        p.chmod(0o755)
    r = run(tree, STREAMFIX_CPA_BIN_DIR=str(bins))
    assert r.returncode == 0
    assert installs(tree) == ["install github.com/router-for-me/CLIProxyAPI/v7/cmd/server@v7.2.89"]


def test_without_go(tree):
    nogo = tree / "nogo"
    nogo.mkdir()
    for t in ("bash", "dirname", "mkdir", "cat", "rm", "grep"):  # what the script needs before it looks for go
        if w := shutil.which(t):
            (nogo / t).symlink_to(w)
    r = run(tree, path=str(nogo))
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("\n") == 1 and "go not found" in r.stderr and "https://go.dev/dl/" in r.stderr
    r = run(tree, path=str(nogo), CI="true")
    assert r.returncode == 1 and "failing because CI=true" in r.stderr


def test_skip_switch(tree):
    r = run(tree, STREAMFIX_CPA="skip")
    assert r.returncode == 0 and "STREAMFIX_CPA=skip" in r.stderr and not (tree / "go.log").exists()
