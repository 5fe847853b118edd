"""What people see in mitmweb, checked by looking: headless Chromium against a real mitmweb.

The sidecar's own ``--web`` command line (streamfix.sidecar.mitm_command) runs mitmweb in
front of the replay upstream, with a recording's saved flow loaded (``-r``). Live flows
go through it: a truncated stream, a clean one, one the client aborts after three events
and one still streaming. Chromium (Debian's, installed by scripts/install-browser; driven
by Playwright with ``executable_path``, never ``playwright install``) opens each flow's
response and reads the rendered text. Screenshots go to the test's tmp dir, and to
``$STREAMFIX_SCREENSHOTS`` when set (``docs/`` holds the committed ones).
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from pathlib import Path

import httpx
import orjson
import pytest
from support import Proc, free_port, start_replay

from streamfix.recordings import load, to_flow
from streamfix.sidecar import mitm_command

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

PASSWORD = "streamfix-browser-test"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
WIDTH, HEIGHT = 1280, 800
SAVED = "chat-devin-truncated-toolcall"


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Web:
    """mitmweb (sidecar --web) in front of the replay upstream, with flows made."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[Proc] = []
        saved = tmp / "saved.flow"
        to_flow(load(SAVED), saved)
        replay, upstream = start_replay()
        self.procs.append(replay)
        self.port, self.web_port = free_port(), free_port()
        extra = ["--set", f"web_port={self.web_port}", "--set", f"web_password={PASSWORD}",
                 "--set", f"confdir={tmp / 'confdir'}", "-r", str(saved)]  # fmt: skip
        cmd = mitm_command(upstream, f"127.0.0.1:{self.port}", None, True, True, extra)
        self.mitm = Proc(cmd)
        self.procs.append(self.mitm)
        self.mitm.wait_for(r"Web server listening at", 60)
        self.base = f"http://127.0.0.1:{self.port}"

    def post(self, name: str, **headers: str) -> httpx.Response:
        body = orjson.dumps({"model": "m", "stream": True, "input": "hi", "max_output_tokens": 400})
        with httpx.Client(timeout=30, trust_env=False) as c:
            return c.post(f"{self.base}/rec/{name}/v1/responses", content=body,
                          headers={"content-type": "application/json", **headers})  # fmt: skip

    def abort_after(self, name: str, n_events: int) -> None:
        """Read ``n_events`` events of a slow stream, then hang up."""
        body = orjson.dumps({"model": "m", "stream": True, "input": "hi", "max_output_tokens": 400})
        with httpx.Client(timeout=30, trust_env=False) as c:
            headers = {"content-type": "application/json", "x-streamfix-delay-ms": "700"}
            with c.stream("POST", f"{self.base}/rec/{name}/v1/responses", content=body, headers=headers) as r:
                got = b""
                for chunk in r.iter_raw():
                    got += chunk
                    if got.count(b"\n\n") >= n_events:
                        break

    def flows(self) -> list[dict]:
        r = httpx.get(f"http://127.0.0.1:{self.web_port}/flows", params={"token": PASSWORD}, trust_env=False)
        r.raise_for_status()
        return r.json()

    def flow(self, pred, timeout: float = 20.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for f in self.flows():
                if pred(f):
                    return f
            if time.monotonic() > deadline:
                raise AssertionError(f"no such flow in mitmweb:\n{orjson.dumps(self.flows()).decode()[:2000]}")
            time.sleep(0.2)

    def url(self, flow_id: str, tab: str = "response") -> str:
        return f"http://127.0.0.1:{self.web_port}/?token={PASSWORD}#/flows/{flow_id}/{tab}"

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.stop()


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory):
    w = Web(tmp_path_factory.mktemp("browser"))
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory):
    exe = chromium()
    if exe is None:
        pytest.skip("no chromium on this machine (scripts/install-browser installs Debian's; it could not here)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (pyproject's test extra) is missing")
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_api.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(profile), executable_path=exe, args=FLAGS, headless=True, viewport={"width": WIDTH, "height": HEIGHT}
        )
        try:
            pg = ctx.new_page()
            pg.set_default_timeout(20_000)
            yield pg
        finally:
            ctx.close()


def shoot(page, tmp_path: Path, name: str) -> None:
    page.screenshot(path=str(tmp_path / name))
    where = os.environ.get("STREAMFIX_SCREENSHOTS")
    if where:
        page.screenshot(path=str(Path(where) / name))


def open_view(page, url: str, view: str | None = None) -> tuple[str, str]:
    """Go to a flow's tab and (optionally) pick a content view: (view name, text)."""
    page.goto("about:blank")
    page.goto(url)
    page.wait_for_selector(".contentview pre")
    if view is not None:
        page.click("text=View:")
        # the menu lists the views lower-cased
        page.locator("ul.dropdown-menu a").get_by_text(re.compile(rf"^{re.escape(view)}$", re.IGNORECASE)).click()
        page.wait_for_function(
            "v => document.querySelector('.contentview h5')?.textContent.toLowerCase() === v", arg=view.lower()
        )
    page.wait_for_timeout(300)
    return page.inner_text(".contentview h5"), page.inner_text(".contentview pre")


def fits(page, text: str) -> bool:
    """The rendered line holding ``text`` ends inside the viewport and its box (no
    horizontal scrolling needed to read it)."""
    return page.evaluate(
        """t => {
            const pre = document.querySelector('.contentview pre');
            const line = [...pre.querySelectorAll('div')].find(d => d.textContent.includes(t));
            if (!line) return false;
            const r = document.createRange(); r.selectNodeContents(line);
            const box = r.getBoundingClientRect(), p = pre.getBoundingClientRect();
            return box.right <= Math.min(p.right, window.innerWidth) && pre.scrollWidth <= pre.clientWidth + 1;
        }""",
        text,
    )


def test_truncation_diff_shows_the_changed_field_within_the_width(web: Web, page, tmp_path: Path) -> None:
    web.post("responses-devin-truncated")
    f = web.flow(lambda f: "/rec/responses-devin-truncated/" in f["request"]["path"] and f.get("comment"))
    assert f["comment"].startswith("verdict max_tokens; fixed status 3, schema_fill 2, truncation 1")
    name, text = open_view(page, web.url(f["id"]))
    assert name == "streamfix diff"  # the automatic choice for a changed flow
    lines = text.splitlines()
    head = lines[: lines.index(next(x for x in lines if x.startswith("streamfix: ")))]  # above the diff
    assert head[0].startswith("verdict max_tokens; fixed") and any(x.startswith("why: tool_args") for x in head)
    assert "~ #9 response.completed -> response.incomplete" in lines
    assert any('+ response.incomplete_details = {"reason":"max_output_tokens"}' in x for x in lines)
    assert fits(page, "response.incomplete_details")
    assert page.is_visible("text=Comment")  # the receipt column of the flow list
    assert page.is_visible("text=verdict max_tokens")
    shoot(page, tmp_path, "mitmweb-diff.png")
    name, text = open_view(page, web.url(f["id"]), "SSE events indented")
    assert '"incomplete_details": {' in text and '"reason": "max_output_tokens"' in text


def test_clean_flow_opens_on_its_stream(web: Web, page, tmp_path: Path) -> None:
    web.post("responses-openai-clean")
    f = web.flow(lambda f: "/rec/responses-openai-clean/" in f["request"]["path"] and f.get("response"))
    assert not f.get("comment") and not f.get("marked")
    name, text = open_view(page, web.url(f["id"]))
    assert name == "SSE events"
    assert "response.completed" in text and "streamfix" not in text
    shoot(page, tmp_path, "mitmweb-clean.png")


def test_aborted_stream_shows_its_partial_body_and_comment(web: Web, page, tmp_path: Path) -> None:
    web.abort_after("responses-devin-truncated", 3)
    f = web.flow(lambda f: "ended early" in (f.get("comment") or ""))
    assert f["comment"].startswith("ended early after 3 events, no terminal event; client aborted")
    name, text = open_view(page, web.url(f["id"]))
    assert name == "streamfix diff"
    lines = text.splitlines()
    assert lines[0].startswith("ended early after 3 events, no terminal event; client aborted")  # why, on top
    assert any(x.startswith("streamfix: 2 of 3 events changed") for x in lines)
    name, text = open_view(page, web.url(f["id"]), "SSE events")
    assert "response.created" in text and "response.reasoning_summary_text.delta" in text
    assert "Content is missing" not in page.content()
    shoot(page, tmp_path, "mitmweb-ended-early.png")
    page.goto(web.url(f["id"], "comment"))
    page.wait_for_selector("text=ended early after 3 events")
    shoot(page, tmp_path, "mitmweb-ended-early-comment.png")


def test_saved_recording_flow_is_repaired_when_loaded(web: Web, page) -> None:
    f = web.flow(lambda f: (f.get("comment") or "").startswith(f"streamfix recording {SAVED}"))
    assert "verdict max_tokens; fixed tool_index 4, truncation 1" in f["comment"]
    name, text = open_view(page, web.url(f["id"]))
    assert name == "streamfix diff"
    assert '~ choices[0].finish_reason: "tool_calls" -> "length"' in text


def test_stream_in_progress_shows_what_has_arrived(web: Web, page, tmp_path: Path) -> None:
    t = threading.Thread(target=web.post, args=("responses-devin-two-calls",), kwargs={"x-streamfix-delay-ms": "600"})
    t.start()
    try:
        f = web.flow(
            lambda f: (
                "/rec/responses-devin-two-calls/" in f["request"]["path"]
                and (f.get("response") or {}).get("contentLength")
                and not f.get("comment")
            )
        )
        _, text = open_view(page, web.url(f["id"]), "SSE events")
        assert "# 0\nresponse.created" in text
        assert "response.completed" not in text  # not yet
        shoot(page, tmp_path, "mitmweb-in-progress.png")
    finally:
        t.join(60)
