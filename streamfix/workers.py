"""``streamfix sidecar --workers N``: N mitmdump workers behind HAProxy, one service.

mitmproxy runs one event loop per process, so one sidecar uses one core. With ``--workers
N`` (N > 1) the launcher runs N mitmdump workers, each with the whole addon set, on
127.0.0.1 ports of their own, and a real HAProxy (Debian's ``haproxy``) configured by
it, on the addresses a single sidecar would have:

* the client port (``--listen``) and the upstream-leg port (``--upstream-proxy``) are
  HAProxy frontends in TCP mode: a connection is one worker's for its whole life, so a
  keep-alive connection, a streamed response and a WebSocket stay on their worker, and
  the bytes are never buffered or rewritten; new connections go to the worker with the
  fewest (``leastconn``: streams are long);
* HAProxy checks each worker's ``/readyz`` (its own metrics listener) every second;
  a worker that is not ready (draining, dead) gets no new client connection. When no
  worker is ready but some are alive (the gateway does not answer: every worker's
  ``/readyz`` says so), the alive ones still get the clients, whom they answer with the
  502 of addons/gateway.py. A connection refused by a dead worker is dispatched to
  another one at once (``retries``, ``option redispatch``);
* the correlation of the two legs lives in Redis (``--redis URL``, or ``--redis local``:
  a redis-server started here), since a client turn and its upstream call may land on
  two workers (addons/sharedstate.py). N > 1 with the upstream leg and no Redis is
  refused with one line;
* metrics: the launcher serves ``streamfix_metrics``'s address itself, with every
  worker's series labelled ``worker="1"``..``"N"`` (Prometheus sums them: a restarted
  worker's counters start again from 0 as a counter reset of its own series, which
  ``rate()`` and ``increase()`` handle), plus ``streamfix_workers`` and
  ``streamfix_worker_restarts_total``; ``/livez`` and ``/readyz`` (ready while one worker is);
* the turn log: every worker appends to the same file, one ``write(2)`` per line on an
  ``O_APPEND`` descriptor, so each turn is one whole line (with ``"worker"``);
* SIGTERM drains every worker: the client frontend stops accepting (HAProxy's
  ``shutdown frontend``), each worker drains as a single sidecar does (addons/drain.py),
  the upstream-leg frontend stays until the last worker exited; a second SIGTERM makes
  them exit at once; Ctrl-C stops everything now;
* a worker that dies is started again on the same ports (HAProxy sends it clients once
  its ``/readyz`` answers); the connections it held are closed, so its clients see their
  streams cut (an unfinished chunked body, a WebSocket closed without a close frame): a
  failure, never a success.

With N = 1 none of this runs: the sidecar is one mitmdump, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .procs import CHECKOUT, ROOT, child_env

RESTART_MIN_S = 0.5
RESTART_MAX_S = 30.0
"""A worker that dies within 10 s of its start waits longer each time before it is
started again (doubling from RESTART_MIN_S up to this)."""
CHECK_INTER = "1s"
"""HAProxy's health checks: every second, every 250 ms once one failed; down after 2
failures, up after 1 success."""
TIMEOUT_IDLE = "1h"
"""HAProxy's inactivity timeout on a connection (client and worker side): a model may
think for minutes between two events, and a kept-alive connection may idle."""


@dataclass
class Worker:
    index: int
    client_port: int
    upstream_port: int | None
    metrics_port: int
    proc: asyncio.subprocess.Process | None = None
    started: float = 0.0
    restarts: int = 0
    backoff: float = RESTART_MIN_S
    relay: asyncio.Task | None = None

    @property
    def name(self) -> str:
        return str(self.index)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _host_port(spec: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    host, _, port = spec.rpartition(":")
    return (host.strip("[]") or default_host), int(port)


def _bind(spec: str) -> str:
    host, port = _host_port(spec)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def max_connections() -> int:
    """HAProxy's connection limit: what the open-files limit it inherits allows (two
    descriptors per proxied connection), at most 10,000."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 10_000
    return max(64, min(10_000, (soft - 200) // 2))


def haproxy_config(
    workers: list[Worker], listen: str, upstream_proxy: str | None, sock: Path, checks: bool = True
) -> str:
    """The HAProxy configuration (see the module docstring for what each part is for).
    ``checks=False`` (the benchmark's passthrough workers, which have no health
    endpoint): the same balancer without health checks."""
    conns = max_connections()
    lines = [
        "# written by streamfix sidecar --workers (streamfix/workers.py); regenerated at each start",
        "global",
        f"    stats socket {sock} mode 600 level admin",
        f"    maxconn {conns}",
        "defaults",
        "    mode tcp",
        f"    maxconn {conns}",
        "    timeout connect 2s",
        f"    timeout client {TIMEOUT_IDLE}",
        f"    timeout server {TIMEOUT_IDLE}",
        "    timeout check 2s",
        "    retries 3",
        "    option redispatch 1",
        f"    default-server inter {CHECK_INTER} fastinter 250ms downinter 500ms fall 2 rise 1",
        "frontend clients",
        f"    bind {_bind(listen)}",
        "    use_backend clients_ready if { nbsrv(clients_ready) gt 0 }",
        "    default_backend clients_alive",
        "backend clients_ready",
        "    balance leastconn",
        "    option httpchk GET /readyz",
    ]
    check = (lambda w: f" check port {w.metrics_port}") if checks else (lambda w: "")
    lines += [f"    server w{w.name} 127.0.0.1:{w.client_port}{check(w)}" for w in workers]
    lines += ["backend clients_alive", "    balance leastconn", "    option httpchk GET /livez"]
    lines += [f"    server w{w.name} 127.0.0.1:{w.client_port}{check(w)}" for w in workers]
    if upstream_proxy:
        lines += ["frontend upstream", f"    bind {_bind(upstream_proxy)}", "    default_backend upstream_leg",
                  "backend upstream_leg", "    balance leastconn"]  # fmt: skip
        lines += [f"    server w{w.name} 127.0.0.1:{w.upstream_port} track clients_alive/w{w.name}" for w in workers]
    return "\n".join(lines) + "\n"


def _strip_set(extra: list[str], name: str) -> tuple[list[str], str | None]:
    """``extra`` without ``--set NAME=...`` (and ``--set=NAME=...``), and its last value."""
    out: list[str] = []
    value = None
    i = 0
    while i < len(extra):
        arg = extra[i]
        if arg == "--set" and i + 1 < len(extra) and extra[i + 1].startswith(name + "="):
            value = extra[i + 1].split("=", 1)[1]
            i += 2
            continue
        if arg.startswith(f"--set={name}="):
            value = arg.split("=", 2)[2]
            i += 1
            continue
        out.append(arg)
        i += 1
    return out, value


def confdir_of(extra: list[str]) -> Path:
    for i, arg in enumerate(extra):
        spec = extra[i + 1] if arg == "--set" and i + 1 < len(extra) else arg.removeprefix("--set=")
        if spec.startswith("confdir="):
            return Path(spec.split("=", 1)[1]).expanduser()
    return Path("~/.mitmproxy").expanduser()


def ensure_ca(confdir: Path) -> None:
    """mitmproxy's CA, made once before the workers start (each would make its own in an
    empty confdir, and CPA trusts one)."""
    from mitmproxy.certs import CertStore

    confdir.mkdir(parents=True, exist_ok=True)
    CertStore.from_store(confdir, "mitmproxy", 2048)


class Launcher:
    """Runs the workers, HAProxy and (``--redis local``) redis-server; see the module docstring."""

    def __init__(
        self,
        n: int,
        command,
        listen: str,
        upstream_proxy: str | None,
        extra: list[str],
        redis: str | None,
        banner: str,
    ) -> None:
        self.n = n
        self.command = command
        """``command(listen, upstream_proxy, extra) -> argv`` of one worker (sidecar.mitm_command)."""
        self.listen = listen
        self.upstream_proxy = upstream_proxy
        self.extra, self.metrics = _strip_set(extra, "streamfix_metrics")
        self.redis_spec = redis
        self.redis_url: str | None = None
        self.banner = banner
        self.dir = Path(tempfile.mkdtemp(prefix="streamfix-workers-"))
        self.sock = self.dir / "haproxy.sock"
        self.workers = [
            Worker(i, _free_port(), _free_port() if upstream_proxy else None, _free_port()) for i in range(1, n + 1)
        ]
        self.haproxy: asyncio.subprocess.Process | None = None
        self.redis: asyncio.subprocess.Process | None = None
        self.redis_port: int | None = None
        self.draining = False
        self.stopping = False
        self.terms = 0
        self.done = asyncio.Event()
        self.metrics_server: asyncio.AbstractServer | None = None
        self.tasks: list[asyncio.Task] = []

    # --- output -------------------------------------------------------------------------
    @staticmethod
    def say(line: str) -> None:
        print(f"streamfix: {line}", file=sys.stderr, flush=True)

    async def _relay(self, stream: asyncio.StreamReader | None, prefix: str) -> None:
        if stream is None:
            return
        out = sys.stdout
        while True:
            line = await stream.readline()
            if not line:
                return
            out.write(prefix + line.decode("utf-8", "replace"))
            out.flush()

    # --- processes ----------------------------------------------------------------------
    async def _spawn(self, argv: list[str], prefix: str) -> asyncio.subprocess.Process:
        p = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=ROOT if CHECKOUT else None,
            env=child_env(),
            process_group=0,  # a terminal's Ctrl-C reaches only us; we pass it on
        )
        self.tasks.append(asyncio.create_task(self._relay(p.stdout, prefix)))
        return p

    def worker_argv(self, w: Worker) -> list[str]:
        extra = [*self.extra, "--set", f"streamfix_metrics=127.0.0.1:{w.metrics_port}",
                 "--set", f"streamfix_worker={w.name}"]  # fmt: skip
        if self.redis_url:
            extra += ["--set", f"streamfix_redis={self.redis_url}"]
        up = f"127.0.0.1:{w.upstream_port}" if w.upstream_port else None
        return self.command(f"127.0.0.1:{w.client_port}", up, extra)

    async def start_worker(self, w: Worker) -> None:
        w.proc = await self._spawn(self.worker_argv(w), f"w{w.name}: ")
        w.started = time.monotonic()

    async def start_redis(self) -> None:
        exe = system_tool("redis-server")
        assert exe is not None
        if self.redis_port is None:
            self.redis_port = _free_port()
        self.redis = await self._spawn(
            [exe, "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.dir), "--loglevel", "warning"],
            "redis: ",
        )  # fmt: skip
        self.redis_url = f"redis://127.0.0.1:{self.redis_port}/0"

    async def start_haproxy(self) -> None:
        cfg = self.dir / "haproxy.cfg"
        cfg.write_text(haproxy_config(self.workers, self.listen, self.upstream_proxy, self.sock))
        exe = system_tool("haproxy")
        assert exe is not None
        check = await asyncio.create_subprocess_exec(
            exe, "-c", "-q", "-f", str(cfg), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        out, _ = await check.communicate()
        if check.returncode != 0:
            raise RuntimeError(f"HAProxy refused its configuration {cfg}: {out.decode(errors='replace').strip()}")
        self.haproxy = await self._spawn([exe, "-db", "-f", str(cfg)], "haproxy: ")

    async def haproxy_command(self, command: str, timeout: float = 5.0) -> str:
        """One command on HAProxy's runtime API (its stats socket)."""
        r, w = await asyncio.wait_for(asyncio.open_unix_connection(str(self.sock)), timeout)
        try:
            w.write(command.encode() + b"\n")
            await w.drain()
            return (await asyncio.wait_for(r.read(), timeout)).decode(errors="replace")
        finally:
            w.close()

    # --- waiting for things -------------------------------------------------------------
    @staticmethod
    async def wait_port(port: int, proc: asyncio.subprocess.Process | None, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc is not None and proc.returncode is not None:
                raise RuntimeError(f"{what} exited ({proc.returncode}) before it listened on 127.0.0.1:{port}")
            with contextlib.suppress(OSError):
                _, w = await asyncio.open_connection("127.0.0.1", port)
                w.close()
                return
            await asyncio.sleep(0.05)
        raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:g} s")

    # --- the run ------------------------------------------------------------------------
    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.sigterm)
        loop.add_signal_handler(signal.SIGINT, self.sigint)
        rc = 1
        try:
            ensure_ca(confdir_of(self.extra))
            if self.redis_spec == "local":
                await self.start_redis()
                assert self.redis_port is not None  # start_redis picked it
                await self.wait_port(self.redis_port, self.redis, "redis-server")
            elif self.redis_spec:
                self.redis_url = self.redis_spec
            await asyncio.gather(*(self.start_worker(w) for w in self.workers))
            await asyncio.gather(*(self.wait_port(w.client_port, w.proc, f"worker {w.name}") for w in self.workers))
            await asyncio.gather(*(self.wait_port(w.metrics_port, w.proc, f"worker {w.name}") for w in self.workers))
            await self.start_haproxy()
            await self.wait_port(_host_port(self.listen)[1], self.haproxy, "haproxy")
            if self.metrics:  # last: /livez answers once clients can connect (a healthcheck's go)
                await self.serve_metrics(self.metrics)
            self.say_started()
            if self.banner:
                print(self.banner, flush=True)
            watchers = [asyncio.create_task(self.watch_worker(w)) for w in self.workers]
            watchers.append(asyncio.create_task(self.watch_haproxy()))
            if self.redis is not None:
                watchers.append(asyncio.create_task(self.watch_redis()))
            await self.done.wait()
            rc = self.exit_code()
            for t in watchers:
                t.cancel()
        except RuntimeError as e:
            self.say(f"error: {e}")
            rc = 1
        finally:
            await self.shutdown()
        return rc

    def exit_code(self) -> int:
        """0 when every worker's last process exited 0, else 1. Read from the processes'
        return codes, not from what their watchers have noted: a worker's code is known
        (its exit reaped) while its watcher still waits for the end of its output, and the
        other worker's watcher may already have ended the run."""
        return 0 if all(w.proc is not None and w.proc.returncode == 0 for w in self.workers) else 1

    def say_started(self) -> None:
        parts = [f"{self.n} workers behind HAProxy: clients {self.listen}"]
        if self.upstream_proxy:
            parts.append(f"upstream leg {self.upstream_proxy}")
        if self.metrics:
            parts.append(f"metrics {self.metrics} (each worker's series labelled worker)")
        parts.append(f"correlation in {'Redis at ' + self.redis_url if self.redis_url else 'each worker (no Redis)'}")
        parts.append(f"HAProxy's configuration {self.dir / 'haproxy.cfg'}, its runtime API {self.sock}")
        self.say("; ".join(parts))
        for w in self.workers:
            up = f", upstream leg 127.0.0.1:{w.upstream_port}" if w.upstream_port else ""
            pid = w.proc.pid if w.proc else "?"
            self.say(f"worker {w.name} (pid {pid}): clients 127.0.0.1:{w.client_port}{up}, "
                     f"health and metrics 127.0.0.1:{w.metrics_port}")  # fmt: skip

    async def watch_worker(self, w: Worker) -> None:
        while True:
            assert w.proc is not None
            rc = await w.proc.wait()
            if self.draining or self.stopping:
                if all(x.proc is not None and x.proc.returncode is not None for x in self.workers):
                    self.done.set()
                return
            how = f"signal {-rc}" if rc < 0 else f"exit {rc}"
            lived = time.monotonic() - w.started
            w.backoff = min(w.backoff * 2, RESTART_MAX_S) if lived < 10 else RESTART_MIN_S
            self.say(
                f"worker {w.name} (pid {w.proc.pid}) died ({how}) after {lived:.1f} s; the streams it held were "
                f"cut (their clients see the connection close mid-stream); starting it again in {w.backoff:g} s"
            )
            await asyncio.sleep(w.backoff)
            if self.draining or self.stopping:
                return
            w.restarts += 1
            await self.start_worker(w)
            self.say(f"worker {w.name} started again (pid {w.proc.pid}, restart {w.restarts})")

    async def watch_haproxy(self) -> None:
        while True:
            assert self.haproxy is not None
            rc = await self.haproxy.wait()
            if self.draining or self.stopping:
                return
            self.say(f"HAProxy exited ({rc}); starting it again")
            await asyncio.sleep(RESTART_MIN_S)
            await self.start_haproxy()

    async def watch_redis(self) -> None:
        while True:
            assert self.redis is not None
            rc = await self.redis.wait()
            if self.draining or self.stopping:
                return
            self.say(f"redis-server exited ({rc}); starting it again on the same port (what it held is lost)")
            await asyncio.sleep(RESTART_MIN_S)
            await self.start_redis()

    # --- signals ------------------------------------------------------------------------
    def sigterm(self) -> None:
        self.terms += 1
        if self.terms == 1:
            asyncio.get_running_loop().create_task(self.drain())
        else:
            self.say("second SIGTERM: the workers exit now")
            self._signal_workers(signal.SIGTERM)

    def sigint(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        self.say("stopping now (Ctrl-C)")
        self._signal_workers(signal.SIGINT)
        if all(w.proc is None or w.proc.returncode is not None for w in self.workers):
            self.done.set()

    def _signal_workers(self, sig: int) -> None:
        for w in self.workers:
            if w.proc is not None and w.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    w.proc.send_signal(sig)

    async def drain(self) -> None:
        self.draining = True
        try:
            await self.haproxy_command("shutdown frontend clients")
            self.say(f"SIGTERM: draining {self.n} workers: no new connections on {self.listen}; the streams in "
                     "flight finish (SIGTERM again: the workers exit at once)")  # fmt: skip
        except (OSError, TimeoutError) as e:
            self.say(f"SIGTERM: HAProxy's client frontend could not be stopped ({e}); draining the workers anyway")
        self._signal_workers(signal.SIGTERM)
        if all(w.proc is None or w.proc.returncode is not None for w in self.workers):
            self.done.set()

    async def shutdown(self) -> None:
        self.stopping = True
        self._signal_workers(signal.SIGTERM)
        for w in self.workers:
            if w.proc is not None and w.proc.returncode is None:
                try:
                    await asyncio.wait_for(w.proc.wait(), 15)
                except TimeoutError:
                    w.proc.kill()
                    await w.proc.wait()
        for p in (self.haproxy, self.redis):
            if p is not None and p.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    p.terminate()
                try:
                    await asyncio.wait_for(p.wait(), 10)
                except TimeoutError:
                    p.kill()
                    await p.wait()
        if self.metrics_server is not None:
            self.metrics_server.close()
        for t in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(t, 2)  # the rest of each process's output
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- metrics: every worker's, labelled -----------------------------------------------
    async def serve_metrics(self, spec: str) -> None:
        host, _, port = spec.rpartition(":")
        host = host.strip("[]") or "127.0.0.1"
        if not _:
            host, port = "127.0.0.1", spec
        try:
            self.metrics_server = await asyncio.start_server(self._metrics_handle, host, int(port))
        except OSError as e:
            raise RuntimeError(f"streamfix_metrics: cannot listen on {spec}: {e}") from e
        h, p = self.metrics_server.sockets[0].getsockname()[:2]
        self.say(f"metrics at http://{h}:{p}/metrics (every worker's series, label worker), health at "
                 f"http://{h}:{p}/livez and /readyz")  # fmt: skip

    async def _get(self, port: int, path: str, timeout: float = 3.0) -> tuple[int, bytes] | None:
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
            try:
                w.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
                await w.drain()
                raw = await asyncio.wait_for(r.read(), timeout)
            finally:
                w.close()
        except (OSError, TimeoutError):
            return None
        head, _, body = raw.partition(b"\r\n\r\n")
        m = re.match(rb"HTTP/1\.[01] (\d{3})", head)
        return (int(m.group(1)), body) if m else None

    async def exposition(self) -> bytes:
        got = await asyncio.gather(*(self._get(w.metrics_port, "/metrics") for w in self.workers))
        texts = {w.name: g[1].decode("utf-8", "replace") for w, g in zip(self.workers, got) if g and g[0] == 200}
        up = {w.name: (g is not None and g[0] == 200) for w, g in zip(self.workers, got)}
        return merge_expositions(texts, up, {w.name: w.restarts for w in self.workers})

    async def _metrics_handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import orjson

        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
            path = parts[1].split("?", 1)[0] if len(parts) >= 2 else ""
            ctype = "text/plain; charset=utf-8"
            if path == "/metrics":
                status, body, ctype = 200, await self.exposition(), "text/plain; version=0.0.4; charset=utf-8"
            elif path in ("/livez", "/healthz"):
                status, body = 200, b"ok\n"
            elif path == "/readyz":
                got = await asyncio.gather(*(self._get(w.metrics_port, "/readyz") for w in self.workers))
                ready = {w.name: g is not None and g[0] == 200 for w, g in zip(self.workers, got)}
                ok = any(ready.values()) and not self.draining
                status, ctype = (200 if ok else 503), "application/json"
                body = orjson.dumps({"ready": ok, "draining": self.draining, "workers": ready}) + b"\n"
            else:
                status, body = 404, b"/metrics, /livez, /readyz\n"
            reason = {200: "OK", 404: "Not Found", 503: "Service Unavailable"}[status]
            writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                         "Connection: close\r\n\r\n".encode() + body)  # fmt: skip
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        except asyncio.CancelledError:
            pass  # cancelled by the drain or shutdown: end quietly (see addons/metrics.py, Metrics._handle)
        finally:
            writer.close()


def merge_expositions(texts: dict[str, str], up: dict[str, bool], restarts: dict[str, int]) -> bytes:
    """One Prometheus text exposition of every worker's (worker name -> its exposition),
    each sample labelled ``worker``, one group per metric family; plus the launcher's
    ``streamfix_workers{state}`` and ``streamfix_worker_restarts_total{worker}``."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import Metric
    from prometheus_client.parser import text_string_to_metric_families

    families: dict[str, Metric] = {}
    for name, text in texts.items():
        try:
            parsed = list(text_string_to_metric_families(text))
        except ValueError:  # a worker's answer cut short (it was dying): its series are left out this time
            up[name] = False
            continue
        for fam in parsed:
            m = families.get(fam.name)
            if m is None:
                m = families[fam.name] = Metric(fam.name, fam.documentation, fam.type)
            for s in fam.samples:
                m.add_sample(s.name, {**s.labels, "worker": name}, s.value, s.timestamp, s.exemplar)
    workers = Metric("streamfix_workers", "Workers of this sidecar by state (up: its metrics answered)", "gauge")
    workers.add_sample("streamfix_workers", {"state": "up"}, float(sum(up.values())))
    workers.add_sample("streamfix_workers", {"state": "configured"}, float(len(up)))
    rs = Metric("streamfix_worker_restarts", "Times a worker was started again after it died", "counter")
    for name, n in restarts.items():
        rs.add_sample("streamfix_worker_restarts_total", {"worker": name}, float(n))

    class Merged:
        def collect(self):
            yield from families.values()
            yield workers
            yield rs

    reg = CollectorRegistry(auto_describe=False)
    reg.register(Merged())
    return generate_latest(reg)


def start_local_redis():
    """``--redis local`` with one worker: a redis-server on a free port of 127.0.0.1, no
    persistence: (process, URL)."""
    import subprocess

    from .procs import wait_port

    port = _free_port()
    d = tempfile.mkdtemp(prefix="streamfix-redis-")
    p = subprocess.Popen(
        [system_tool("redis-server") or "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", d, "--loglevel", "warning"],
        stdin=subprocess.DEVNULL,
        process_group=0,
    )  # fmt: skip
    wait_port(port, proc=p)
    return p, f"redis://127.0.0.1:{port}/0"


def system_tool(name: str) -> str | None:
    """The path of a system daemon's program (HAProxy, redis-server): on PATH, else in the
    sbin folders Debian installs them to, which a user's PATH (and the image's ``env -i``
    style service managers) often lacks: ``/usr/sbin/haproxy`` is found without it."""
    found = shutil.which(name)
    if found is not None:
        return found
    return shutil.which(name, path=os.pathsep.join(("/usr/local/sbin", "/usr/sbin", "/sbin")))


def refuse(prog: str, msg: str) -> int:
    print(f"{prog}: refusing to start: {msg}", file=sys.stderr)
    return 2


def preflight(n: int, web: bool, upstream_leg: bool, redis: str | None) -> str | None:
    """Why ``--workers N`` / ``--redis`` cannot run as given (one line), or None. ``redis``:
    ``--redis``'s value, ``"given"`` for a ``--set streamfix_redis=URL`` after ``--``."""
    if n < 1:
        return f"--workers {n}: give 1 or more"
    if redis not in (None, "local", "given") and not redis.startswith(("redis://", "rediss://", "unix://")):
        return f"--redis {redis}: give redis://HOST:PORT/DB, or local (a redis-server started here)"
    if redis == "local" and system_tool("redis-server") is None:
        return "--redis local: no redis-server on PATH or in /usr/sbin (Debian: apt-get install redis-server)"
    if n == 1:
        return None
    if web:
        return f"--web with --workers {n}: mitmweb shows one process's flows; run it with one worker"
    if system_tool("haproxy") is None:
        return f"--workers {n} needs HAProxy to spread the connections: none on PATH or in /usr/sbin (Debian: apt-get install haproxy)"
    if upstream_leg and redis is None:
        return (
            f"--workers {n} with the upstream leg (--upstream-proxy) needs Redis: a client turn served by one worker "
            "and its upstream call read by another are matched there; give --redis redis://HOST:PORT/DB, or "
            "--redis local to start a redis-server here"
        )
    return None


def run(n: int, command, listen: str, upstream_proxy: str | None, extra: list[str], redis: str | None,
        banner: str) -> int:  # fmt: skip
    """Run N workers (N > 1) until SIGTERM or Ctrl-C; the exit code."""
    launcher = Launcher(n, command, listen, upstream_proxy, extra, redis, banner)
    try:
        return asyncio.run(launcher.run())
    except KeyboardInterrupt:
        return 1
