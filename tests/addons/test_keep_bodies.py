"""Saved flows in process: a recording's flow is a client-leg flow; bodies are kept when ``-w``
saves them or ``streamfix_keep_bodies`` asks, and a UI without them says so."""

from __future__ import annotations

from pathlib import Path

from mitmproxy import io
from mitmproxy.proxy.mode_specs import ReverseMode
from mitmproxy.test import taddons

from streamfix.recordings import load, to_flow


def read(path: Path) -> list:
    with path.open("rb") as fp:
        return list(io.FlowReader(fp).stream())


def test_a_recording_flow_is_a_client_leg_flow(tmp_path: Path) -> None:
    to_flow(load("responses-devin-truncated"), tmp_path / "r.flow")
    (f,) = read(tmp_path / "r.flow")
    assert isinstance(f.client_conn.proxy_mode, ReverseMode)
    assert f.comment == "streamfix recording responses-devin-truncated"


def test_keep_bodies_follows_w_and_a_ui_without_them_says_so(tmp_path: Path, caplog) -> None:
    """``-w`` (mitmproxy's save_stream_file) keeps streamed bodies by itself; a UI (a flow
    view: mitmweb, console) without kept bodies says once at startup that a flow saved
    from it will have an empty streamed body."""
    import logging

    from mitmproxy.addons import save, view
    from streamfix.addons import repair as mod

    caplog.set_level(logging.INFO)
    a = mod.Repair()
    with taddons.context(a, save.Save(), view.View()) as tctx:
        assert a.keep_bodies is False
        a.running()
        assert "a flow saved from this UI will have an empty streamed body" in caplog.text
        caplog.clear()
        tctx.configure(a, save_stream_file=str(tmp_path / "x.flow"))
        assert a.keep_bodies is True
        a.running()
        assert "flows are saved (-w): keeping each streamed flow's bodies" in caplog.text
        assert "empty streamed body" not in caplog.text
        tctx.configure(a, save_stream_file=None, streamfix_keep_bodies=True)
        assert a.keep_bodies is True
        caplog.clear()
        a.running()
        # kept by the option: nothing to say of bodies (the startup line only)
        assert "bodies" not in caplog.text and "streamed body" not in caplog.text
        assert "repair mode" in caplog.text
