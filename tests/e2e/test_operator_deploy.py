"""The compose recipe and the image from a fresh clone, as an operator follows them.

No container engine runs here, so what can run does:

* the steps docs/operations.md gives (and deploy/compose.yaml's header repeats) run as
  they are in a copy of the tracked files (a fresh clone: no data/, no cpa/), all but the
  final ``docker compose up``; Debian's ``docker-compose config`` then resolves the file
  (compose's own path resolution, relative to deploy/), and every mounted path must exist,
  as the folder or file it is mounted as, with the image's owner (uid 10001) where the
  image writes;
* the image's build stage and its container, with the image's paths, in Linux namespaces
  (a private mount namespace with a root assembled from this machine's folders, /opt and
  /data bound in; a private network namespace for the container): the build stage's RUN
  line from exactly the files it COPYs (the compiled core built from scratch), then the
  Dockerfile's ENTRYPOINT + CMD as uid 10001 with the steps' data folder as /data and a
  stand-in ``cpa`` (the replay upstream) on the network, then the ca-bundle job's
  command; and deploy/streamfix.service's ExecStart from the same install, as that user,
  with the unit's state and log folders;
* logrotate accepts deploy/logrotate (``logrotate -d``) and the README's snippet, and a
  real rotation loses no turn-log line.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from support import ROOT, tracked_copy

DEPLOY = ROOT / "deploy"
OWNER = 10001
STEPS_MARK = "<!-- compose steps:"
COMPOSE = shutil.which("docker-compose")
LOGROTATE = shutil.which("logrotate") or ("/usr/sbin/logrotate" if Path("/usr/sbin/logrotate").exists() else None)
CPA_PINS = {"eceasy/cli-proxy-api:v7.2.140": "a7e3596", "eceasy/cli-proxy-api:v7.2.89": "7c61e98"}
"""The CPA builds streamfix's real-CPA tests ran (tag -> commit), the only pins allowed."""


def load_yaml(text: str):
    from ruamel.yaml import YAML  # mitmproxy's own YAML library

    return YAML(typ="safe").load(text)


def compose_steps() -> list[str]:
    """The shell lines docs/operations.md gives for a fresh clone (the block after the marker)."""
    doc = (ROOT / "docs" / "operations.md").read_text()
    block = doc.split(STEPS_MARK, 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return block.rstrip("\n").splitlines()


def test_the_compose_file_repeats_the_documented_steps() -> None:
    steps = compose_steps()
    assert steps[0] == "cd deploy" and steps[-1].startswith("docker compose "), steps
    header = [line[4:] for line in (DEPLOY / "compose.yaml").read_text().splitlines() if line.startswith("#   ")]
    assert header[: len(steps)] == steps, header


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A fresh clone's files, after the documented steps (all but ``docker compose up``)."""
    if os.geteuid() != 0:
        pytest.skip("the documented steps chown the data folder to uid 10001: run as root")
    if shutil.which("openssl") is None:
        pytest.skip("no openssl (the steps make the password with it)")
    root = tracked_copy(tmp_path_factory.mktemp("fresh") / "clone")
    assert not (root / "deploy" / "data").exists() and not (root / "deploy" / "cpa").exists()
    steps = compose_steps()[:-1]
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(steps)], cwd=root, capture_output=True,
                       text=True, timeout=60)  # fmt: skip
    assert r.returncode == 0, f"the documented steps failed in a fresh clone:\n{r.stdout}\n{r.stderr}"
    return root


def resolved(clone: Path) -> dict:
    if COMPOSE is None:
        pytest.skip("no docker-compose (Debian: apt-get install docker-compose; scripts/install-deploy-tools)")
    r = subprocess.run([COMPOSE, "-p", "streamfix", "config"], cwd=clone / "deploy", capture_output=True, text=True,
                       timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    return load_yaml(r.stdout)


def mounts(service: dict) -> list[tuple[Path, str]]:
    out = []
    for v in service.get("volumes", []):
        if isinstance(v, dict):  # the long syntax
            out.append((Path(v["source"]), v["target"]))
        else:
            src, dst = v.split(":")[:2]
            out.append((Path(src), dst))
    return out


def test_every_mounted_path_exists_with_its_owner(clone: Path) -> None:
    c = resolved(clone)
    svc = c["services"]
    assert set(svc) == {"streamfix", "ca-bundle", "cpa", "redis"}
    # the workers' Redis: nothing kept on disk, nothing published, started before the sidecar
    assert not svc["redis"].get("ports") and not svc["redis"].get("volumes"), svc["redis"]
    assert svc["redis"]["command"][:5] == ["redis-server", "--save", "", "--appendonly", "no"]
    assert "redis" in svc["streamfix"]["depends_on"]
    cmd = svc["streamfix"]["command"]
    assert cmd[cmd.index("--redis") + 1] == "redis://redis:6379/0"
    deploy = clone / "deploy"
    # the build context is the clone's root, relative to the compose file's folder
    build = svc["streamfix"]["build"]
    assert Path(build["context"]) == clone and (clone / build["dockerfile"]).is_file(), build
    seen = {}
    for name, s in svc.items():
        for src, dst in mounts(s):
            assert src.is_relative_to(deploy), f"{name}: {src} is not under the compose file's folder"
            assert src.exists(), f"{name}: {src} (mounted at {dst}) does not exist after the steps"
            seen[(name, dst)] = src
    # what the image writes, as uid 10001: /data and every folder in it, the config it reads
    data = seen[("streamfix", "/data")]
    assert data == deploy / "data" and seen[("ca-bundle", "/data")] == data
    for p in (data, data / "mitmproxy", data / "log", data / "ca", data / "mitmproxy" / "config.yaml"):
        st = p.stat()
        assert (st.st_uid, st.st_gid) == (OWNER, OWNER), f"{p}: owner {st.st_uid}:{st.st_gid}, not {OWNER}"
    assert (data / "mitmproxy" / "config.yaml").stat().st_mode & 0o777 == 0o600
    # CPA's: its config a file (a missing one would be mounted as an empty folder), its auth-dir, the bundle's folder
    assert seen[("cpa", "/CLIProxyAPI/config.yaml")].is_file()
    assert seen[("cpa", "/root/.cli-proxy-api")].is_dir()
    assert seen[("cpa", "/ca")] == data / "ca"
    assert svc["cpa"]["environment"]["SSL_CERT_FILE"] == "/ca/ca-bundle.pem"
    # one password, in both files
    mitm = load_yaml((data / "mitmproxy" / "config.yaml").read_text())
    cpa = load_yaml(seen[("cpa", "/CLIProxyAPI/config.yaml")].read_text())
    user, _, password = mitm["streamfix_upstream_proxyauth"].partition(":")
    assert re.fullmatch(r"[0-9a-f]{32}", password), "the steps' random password"
    assert cpa["proxy-url"] == f"http://{user}:{password}@streamfix:8080"
    assert "PASSWORD" not in (data / "mitmproxy" / "config.yaml").read_text()


def test_the_cpa_pin_is_a_build_that_ran_with_streamfix() -> None:
    image = load_yaml((DEPLOY / "compose.yaml").read_text())["services"]["cpa"]["image"]
    assert image in CPA_PINS, f"{image}: pin a CPA build the real-CPA tests ran ({', '.join(CPA_PINS)})"
    commit = CPA_PINS[image]
    text = (DEPLOY / "compose.yaml").read_text()
    assert f"commit {commit}" in text
    doc = (ROOT / "docs" / "operations.md").read_text()
    assert f"`{image}`" in doc and f"commit {commit}" in doc and "No v8 build was run with streamfix" in doc


# --- the image and the unit, with their paths, in namespaces ----------------------------


def dockerfile() -> list[list[tuple[str, str]]]:
    """The Dockerfile's stages, each a list of (INSTRUCTION, arguments), continuations joined."""
    text = re.sub(r"\\\n\s*", " ", (DEPLOY / "Dockerfile").read_text())
    stages: list[list[tuple[str, str]]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        op, _, rest = line.partition(" ")
        if op == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((op, rest.strip()))
    return stages


def unit_exec_start() -> list[str]:
    text = re.sub(r"\\\n\s*", " ", (DEPLOY / "streamfix.service").read_text())
    (line,) = [x for x in text.splitlines() if x.startswith("ExecStart=")]
    return shlex.split(line.removeprefix("ExecStart="))


def unit_value(key: str) -> str:
    (line,) = [x for x in (DEPLOY / "streamfix.service").read_text().splitlines() if x.startswith(f"{key}=")]
    return line.split("=", 1)[1]


ROOT_SH = r"""
# a root for chroot in this (private) mount namespace: this machine's top-level folders
# bound in, /opt, /data, /tmp, /root of our own; the interpreter where the image has it
R=$(mktemp -d /tmp/streamfix-root.XXXXXX)
echo "CHROOT=$R"
mount -t tmpfs tmpfs "$R"
for e in /*; do
  n=${e#/}
  case "$n" in data|opt|proc|dev|sys|tmp|root|run|lost+found) continue;; esac
  if [ -L "$e" ]; then ln -s "$(readlink "$e")" "$R/$n"
  elif [ -d "$e" ]; then mkdir "$R/$n"; mount --rbind "$e" "$R/$n"
  fi
done
mkdir -p "$R/proc" "$R/dev" "$R/sys" "$R/tmp" "$R/run" "$R/data" "$R/opt/streamfix" "$R/root" "$R/results"
chmod 1777 "$R/tmp"
mount -t proc proc "$R/proc"
mount --rbind /dev "$R/dev"
mount --rbind /sys "$R/sys"
mount --bind "$OPT" "$R/opt/streamfix"
mount --bind "$RESULTS" "$R/results"
# python:3.12's interpreter is /usr/local/bin/python3: this machine's, bound there (and at
# its own prefix, which its shared library's runpath names)
mount --bind "$PYPREFIX" "$R/usr/local"
case "$PYPREFIX" in /usr|/usr/*) ;; *) mkdir -p "$R$PYPREFIX" && mount --bind "$PYPREFIX" "$R$PYPREFIX";; esac
"""

BUILD_SH = r"""
mkdir -p "$R/root/.cache/pip" && mount --bind "$PIPCACHE" "$R/root/.cache/pip"
chroot "$R" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root $BUILD_ENV sh -c "cd $WORKDIR && $RUN"
echo "BUILD rc=$?"
"""

RUN_SH = r"""
ip link set lo up
mount --bind "$DATA" "$R/data"
printf '127.0.0.1 localhost cpa streamfix\n' > "$RESULTS/hosts" && mount --bind "$RESULTS/hosts" "$R/etc/hosts"
as_user() { chroot --userspec=$UIDGID --groups=${UIDGID#*:} "$R" env -i PATH=/usr/local/bin:/usr/bin:/bin "$@"; }
# in the background: exec, so that $! is the process itself (the signal reaches it, not a subshell)
as_user_bg() { exec chroot --userspec=$UIDGID --groups=${UIDGID#*:} "$R" env -i PATH=/usr/local/bin:/usr/bin:/bin "$@"; }
py() { chroot "$R" /usr/local/bin/python3 -c "$1"; }
HEALTH='import urllib.request,sys,time
for _ in range(240):
    try:
        sys.exit(urllib.request.urlopen("http://127.0.0.1:9464/livez", timeout=2).status != 200)
    except OSError:
        time.sleep(0.5)
sys.exit(1)'
TURN='import json,urllib.request
rec = json.load(open("/opt/streamfix/recordings/chat-devin-index1/recording.json"))
req = urllib.request.Request("http://127.0.0.1:8318" + rec["request"]["path"], data=json.dumps(rec["request"]["body"]).encode(),
    headers={"content-type": "application/json", "x-streamfix-recording": "chat-devin-index1", "x-streamfix-delay-ms": "0"})
print(urllib.request.urlopen(req, timeout=30).read().decode())'
PROXY='import urllib.request,urllib.error
h = urllib.request.ProxyHandler({"http": "http://127.0.0.1:8080"})
try:
    urllib.request.build_opener(h).open("http://cpa:8317/", timeout=10)
except urllib.error.HTTPError as e:
    print(e.code)'
# the stand-in CPA: the replay upstream, on cpa:8317
as_user_bg HOME=/tmp /opt/streamfix/.venv/bin/streamfix replay --host 127.0.0.1 --port 8317 > "$RESULTS/cpa.log" 2>&1 &
cpa=$!

# 1. the container: ENTRYPOINT + CMD as the image's user, from its WORKDIR, with its HOME
as_user_bg HOME=$IMAGE_HOME sh -c "cd $IMAGE_WORKDIR && exec $CONTAINER" > "$RESULTS/container.log" 2>&1 &
sf=$!
py "$HEALTH"; echo "CONTAINER healthy rc=$?"
py "$TURN" > "$RESULTS/container-turn.txt"; echo "CONTAINER turn rc=$?"
echo "CONTAINER proxy without credentials: $(py "$PROXY")"
as_user HOME=$IMAGE_HOME sh -c "$CA_BUNDLE"; echo "CA_BUNDLE rc=$?"
sleep 1
kill -TERM $sf; wait $sf; echo "CONTAINER exit=$?"

# 2. the systemd unit's ExecStart, as its user, in its working directory, with its folders
mount -t tmpfs tmpfs "$R/var/lib" && mount -t tmpfs tmpfs "$R/var/log"
mkdir -p "$R/var/lib/streamfix" "$R/var/log/streamfix" && chown $UIDGID "$R/var/lib/streamfix" "$R/var/log/streamfix"
as_user_bg HOME=$UNIT_HOME sh -c "cd $UNIT_WORKDIR && exec $UNIT_EXEC" > "$RESULTS/unit.log" 2>&1 &
unit=$!
py "$HEALTH"; echo "UNIT healthy rc=$?"
py "$TURN" > "$RESULTS/unit-turn.txt"; echo "UNIT turn rc=$?"
sleep 1
kill -TERM $unit; wait $unit; echo "UNIT exit=$?"
cp "$R/var/log/streamfix/turns.jsonl" "$RESULTS/unit-turns.jsonl" 2>/dev/null
kill $cpa; wait $cpa
"""


def in_namespaces(script: str, env: dict[str, str], net: bool, timeout: float) -> subprocess.CompletedProcess:
    # a PID namespace too: whatever the script leaves running ends with it
    args = ["unshare", "--mount", "--propagation", "private", "--pid", "--fork"] + (["--net"] if net else [])
    r = subprocess.run([*args, "bash", "-u", "-c", ROOT_SH + script], env={**os.environ, **env},
                       capture_output=True, text=True, timeout=timeout)  # fmt: skip
    for d in re.findall(r"^CHROOT=(\S+)$", r.stdout, re.MULTILINE):  # its mount point, empty once it is gone
        if Path(d).is_dir() and not any(Path(d).iterdir()):
            Path(d).rmdir()
    return r


def namespaces_work() -> str | None:
    if os.geteuid() != 0:
        return "needs root (mount and network namespaces, chroot, a uid 10001)"
    for tool in ("unshare", "chroot", "ip"):
        if shutil.which(tool) is None:
            return f"no {tool}"
    r = subprocess.run(["unshare", "--mount", "--pid", "--net", "--fork", "true"], capture_output=True, text=True,
                       timeout=30)  # fmt: skip
    return None if r.returncode == 0 else f"unshare refused here: {r.stderr.strip()}"


@pytest.mark.e2e
def test_the_image_build_stage_and_container_and_the_unit(clone: Path, tmp_path: Path) -> None:
    if (why := namespaces_work()) is not None:
        pytest.skip(why)
    from streamfix import compiled

    if compiled.compiler() is None:
        pytest.skip("no C compiler: the build stage has one (python:3.12-bookworm); this machine does not")
    build, final = dockerfile()
    # /opt/streamfix as the build stage has it: exactly what it COPYs from the clone
    opt = tmp_path / "opt"
    opt.mkdir()
    workdir = next(a for op, a in build if op == "WORKDIR")
    assert workdir == "/opt/streamfix"
    for op, a in build:
        if op == "COPY":
            *srcs, dest = shlex.split(a)
            target = opt / dest
            for s in srcs:
                src = clone / s
                to = target / src.name if dest.endswith("/") and not src.is_dir() else target
                if src.is_dir():
                    shutil.copytree(src, to)
                else:
                    to.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, to)
    (run,) = [a for op, a in build if op == "RUN"]
    env = dict(kv.split("=", 1) for op, a in build if op == "ENV" for kv in shlex.split(a))
    env.pop("PIP_NO_CACHE_DIR")  # the one change: this machine's pip cache instead of downloading again
    results = tmp_path / "results"
    results.mkdir()
    pip_cache = Path(os.environ.get("PIP_CACHE_DIR", Path.home() / ".cache" / "pip"))
    pip_cache.mkdir(parents=True, exist_ok=True)
    common = {"OPT": str(opt), "RESULTS": str(results), "PYPREFIX": sys.base_prefix}
    r = in_namespaces(BUILD_SH, {**common, "PIPCACHE": str(pip_cache), "WORKDIR": workdir, "RUN": run,
                                 "BUILD_ENV": " ".join(f"{k}={v}" for k, v in env.items())},
                      net=False, timeout=1500)  # fmt: skip
    out = r.stdout + r.stderr
    assert "BUILD rc=0" in r.stdout, out[-4000:]
    site = "/opt/streamfix/.venv/lib/python3.12/site-packages/streamfix/build/compiled/"
    assert f"protocol core: compiled (mypyc, {site}" in r.stdout, out[-4000:]

    # the container: the Dockerfile's ENTRYPOINT + CMD (compose's command is the same CMD)
    entry = orjson.loads(next(a for op, a in final if op == "ENTRYPOINT"))
    cmd = orjson.loads(next(a for op, a in final if op == "CMD"))
    compose_cmd = load_yaml((DEPLOY / "compose.yaml").read_text())["services"]["streamfix"]["command"]
    assert cmd == compose_cmd
    user = next(a for op, a in final if op == "USER")
    assert user == f"{OWNER}:{OWNER}"
    image_env = dict(kv.split("=", 1) for op, a in final if op == "ENV" for kv in shlex.split(a))
    ca_bundle = load_yaml((DEPLOY / "compose.yaml").read_text())["services"]["ca-bundle"]["entrypoint"]
    exec_start = unit_exec_start()
    assert exec_start[0] == "/opt/streamfix/.venv/bin/streamfix"  # the installed copy, not python -m from the clone
    r = in_namespaces(
        RUN_SH,
        {**common, "DATA": str(clone / "deploy" / "data"), "UIDGID": user,
         "IMAGE_HOME": image_env["HOME"], "IMAGE_WORKDIR": next(a for op, a in final if op == "WORKDIR"),
         "CONTAINER": shlex.join(entry + cmd), "CA_BUNDLE": shlex.join(ca_bundle),
         "UNIT_HOME": unit_value("Environment").removeprefix("HOME="), "UNIT_WORKDIR": unit_value("WorkingDirectory"),
         "UNIT_EXEC": shlex.join(exec_start)},
        net=True, timeout=600,
    )  # fmt: skip
    said = r.stdout
    logs = {n: (results / n).read_text() if (results / n).exists() else "" for n in ("container.log", "unit.log")}
    report = (
        f"{said}\n{r.stderr[-2000:]}\ncontainer:\n{logs['container.log'][-3000:]}\nunit:\n{logs['unit.log'][-3000:]}"
    )
    for step in ("CONTAINER healthy rc=0", "CONTAINER turn rc=0", "CONTAINER proxy without credentials: 407",
                 "CA_BUNDLE rc=0", "CONTAINER exit=0", "UNIT healthy rc=0", "UNIT turn rc=0", "UNIT exit=0"):  # fmt: skip
        assert step in said, f"{step}:\n{report}"
    for name in ("container", "unit"):
        log = logs[f"{name}.log"]
        assert f"streamfix: protocol core: compiled (mypyc, {site}" in log, log  # the installed copy's, compiled
        assert "Traceback" not in log and "drained in" in log, log
        turn = (results / f"{name}-turn.txt").read_text()
        # chat-devin-index1: the only tool call arrives as index 1 (the defect); repaired, 0
        assert '"tool_calls"' in turn and '"index":1' not in turn.replace(" ", ""), turn
    # what the container wrote into the steps' data folder, as its user
    data = clone / "deploy" / "data"
    for p in (
        data / "mitmproxy" / "mitmproxy-ca-cert.pem",
        data / "log" / "turns.jsonl",
        data / "ca" / "ca-bundle.pem",
    ):
        assert p.is_file() and p.stat().st_uid == OWNER, p
    (line,) = (data / "log" / "turns.jsonl").read_bytes().splitlines()
    assert orjson.loads(line)["api"] == "chat"
    ca = (data / "mitmproxy" / "mitmproxy-ca-cert.pem").read_text()
    bundle = (data / "ca" / "ca-bundle.pem").read_text()
    assert bundle.endswith(ca) and bundle.count("BEGIN CERTIFICATE") > 10  # system roots + the CA
    (line,) = (results / "unit-turns.jsonl").read_bytes().splitlines()
    assert orjson.loads(line)["api"] == "chat"


def test_the_unit_points_at_streamfix_docs() -> None:
    docs = unit_value("Documentation").split()
    assert docs, "no Documentation="
    for uri in docs:
        assert uri.startswith("file:///opt/streamfix/"), uri
        assert (ROOT / uri.removeprefix("file:///opt/streamfix/")).is_file(), uri
    assert "CLIProxyAPI" not in unit_value("Documentation")
    assert unit_value("WorkingDirectory") == "/var/lib/streamfix"  # not the clone: python -m would import it


# --- logrotate ---------------------------------------------------------------------------


def logrotate_conf(text: str, folder: Path) -> str:
    return text.replace("/var/log/streamfix", str(folder))


def readme_snippet() -> str:
    readme = (ROOT / "README.md").read_text()
    after = readme.split("Rotate it with logrotate", 1)[1]
    return after.split("```\n", 1)[1].split("```", 1)[0]


@pytest.mark.skipif(LOGROTATE is None, reason="no logrotate (Debian: apt-get install logrotate)")
def test_logrotate_accepts_the_recipe_and_rotates_without_loss(tmp_path: Path) -> None:
    from streamfix.addons.turnlog import TurnLogHandler

    recipe = (DEPLOY / "logrotate").read_text()
    body = "\n".join(x for x in recipe.splitlines() if not x.startswith("#")) + "\n"
    assert readme_snippet() == body, "the README shows deploy/logrotate's recipe"
    folder = tmp_path / "log"
    folder.mkdir()
    conf = tmp_path / "streamfix.conf"
    conf.write_text(logrotate_conf(recipe, folder))
    state = tmp_path / "state"
    r = subprocess.run([LOGROTATE, "-d", "-s", str(state), str(conf)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "error" not in (r.stdout + r.stderr).lower(), r.stdout + r.stderr
    # a real rotation between two lines of a live handler: both lines kept, the new one in a new file
    import logging

    log = folder / "turns.jsonl"
    h = TurnLogHandler(str(log))
    h.setFormatter(logging.Formatter("%(message)s"))
    try:
        h.emit(logging.makeLogRecord({"msg": "first"}))
        r = subprocess.run([LOGROTATE, "-f", "-s", str(state), str(conf)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        h.emit(logging.makeLogRecord({"msg": "second"}))
    finally:
        h.close()
    assert (folder / "turns.jsonl.1").read_text() == "first\n"  # delaycompress: plain until the next rotation
    assert log.read_text() == "second\n"


@pytest.mark.skipif(LOGROTATE is None, reason="no logrotate (Debian: apt-get install logrotate)")
def test_the_old_one_line_snippet_was_invalid(tmp_path: Path) -> None:
    """What the README had (the test can fail: logrotate does check)."""
    conf = tmp_path / "old.conf"
    conf.write_text(f"{tmp_path}/turns.jsonl {{ daily rotate 30 compress delaycompress missingok }}\n")
    r = subprocess.run([LOGROTATE, "-d", "-s", str(tmp_path / "state"), str(conf)], capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    assert "bad rotation count" in r.stdout + r.stderr
