"""Saved flows: recordings become client-leg flows the addon repairs when loaded, with
the original kept so the diff view works offline (``just offline``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mitmproxy import contentviews, io
from mitmproxy.proxy.mode_specs import ReverseMode
from mitmproxy.test import taddons
from support import REPAIR_ADDON, ROOT, run_mitmdump

from addons import sseview
from streamfix.recordings import load, to_flow


def read(path: Path) -> list:
    with path.open("rb") as fp:
        return list(io.FlowReader(fp).stream())


def test_a_recording_flow_is_a_client_leg_flow(tmp_path: Path) -> None:
    to_flow(load("responses-devin-truncated"), tmp_path / "r.flow")
    (f,) = read(tmp_path / "r.flow")
    assert isinstance(f.client_conn.proxy_mode, ReverseMode)
    assert f.comment == "streamfix recording responses-devin-truncated"


@pytest.mark.e2e
def test_loaded_with_both_listeners_it_is_repaired_and_keeps_its_original(tmp_path: Path) -> None:
    """As in ``scripts/sidecar --web --upstream-proxy ... -- -r FILE``: with a regular
    listener next to the reverse one, only client-leg flows are repaired, and a
    recording's flow is one. The diff view then shows the change, not a hint."""
    rec = load("responses-devin-truncated")
    src, out = tmp_path / "in.flow", tmp_path / "out.flow"
    to_flow(rec, src)
    r = run_mitmdump(
        tmp_path / "confdir",
        # -n: no listener is opened; the two modes only configure the addon
        "--mode", "reverse:http://127.0.0.1:8317@127.0.0.1:1", "--mode", "regular@127.0.0.1:2",
        "-nr", str(src), "--set", "streamfix_keep_bodies=true", "-w", str(out),
    )  # fmt: skip
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    (f,) = read(out)
    assert f.response.raw_content == rec.expected
    assert f.metadata[sseview.ORIGINAL] == rec.body
    assert f.comment.split("\n")[1].startswith("verdict max_tokens; fixed status 3")
    with taddons.context():
        md = contentviews.make_metadata(f.response, f)
        view = contentviews.registry.get_view(f.response.raw_content, md)
        assert view.name == "streamfix diff"
        text = view.prettify(f.response.raw_content, md)
    assert "~ #9 response.completed -> response.incomplete" in text.splitlines()


@pytest.mark.e2e
def test_just_offline_keeps_bodies() -> None:
    """The recipe's mitmdump line keeps bodies (else the diff view has nothing)."""
    recipe = (ROOT / "justfile").read_text().split("\noffline NAME:\n", 1)[1].split("\n\n", 1)[0]
    line = next(x for x in recipe.splitlines() if "mitmdump" in x)
    assert "streamfix_keep_bodies=true" in line and str(REPAIR_ADDON.relative_to(ROOT)) in line
