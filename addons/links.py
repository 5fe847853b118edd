"""Client flow <-> upstream flow links, and the commands that jump between them.

With the upstream leg (``addons/upstream.py``), the client flow and the provider flow
(Devin's, Gemini's, Anthropic's...) whose record decided it name each other: metadata ``streamfix.upstream_flow`` /
``streamfix.client_flow`` and comment lines ``upstream flow ID`` / ``client flow ID``.
In the mitmproxy console, ``streamfix.upstream @focus`` and ``streamfix.client @focus``
(commands of the repair addon, addons/repair.py) focus the other flow.
"""

from __future__ import annotations

from collections.abc import Sequence

from mitmproxy import ctx, exceptions, hooks
from mitmproxy import flow as mflow

UPSTREAM_FLOW = "streamfix.upstream_flow"
"""Client flow metadata: the id of the upstream flow whose record decided it."""
CLIENT_FLOW = "streamfix.client_flow"
"""Upstream flow metadata: the id of the client flow it served."""


def link_upstream(flow: mflow.Flow, resolver) -> tuple[str | None, mflow.Flow | None]:
    """The upstream flow whose record decided this one (wire/correlate.py, through the
    flow's ``resolver``), linked both ways: its id, and the flow itself when a view holds
    it (the caller names the client flow in its comment, then calls :func:`updated`)."""
    record = getattr(resolver, "record", None)
    uid = getattr(record, "flow_id", None)
    if not isinstance(uid, str):
        return None, None
    flow.metadata[UPSTREAM_FLOW] = uid
    other = find_flow(uid)
    if other is not None:
        other.metadata[CLIENT_FLOW] = flow.id
    return uid, other


def linked_id(flow: mflow.Flow, key: str) -> str | None:
    uid = flow.metadata.get(key)
    if uid is None and key == CLIENT_FLOW:  # the request-side link (addons/upstream.py)
        req = flow.metadata.get("streamfix.devin_request") or flow.metadata.get("streamfix.upstream_request")
        uid = req.get("client_flow") if isinstance(req, dict) else None
    return uid if isinstance(uid, str) else None


def view():
    """mitmproxy's flow view (mitmweb, console); None in mitmdump."""
    master = getattr(ctx, "master", None)
    return master.addons.get("view") if master is not None else None


def find_flow(flow_id: str) -> mflow.Flow | None:
    v = view()
    return v.get_by_id(flow_id) if v is not None else None


def updated(flow: mflow.Flow) -> None:
    """Tell the UIs (mitmweb, console) that a flow changed outside its own hooks."""
    master = getattr(ctx, "master", None)
    if master is not None:
        master.addons.trigger(hooks.UpdateHook([flow]))


def jump(flows: Sequence[mflow.Flow], key: str) -> str:
    """The id of the flow linked to ``flows[0]`` under ``key``, focused in the view."""
    if not flows:
        raise exceptions.CommandError("no flow given (select one: @focus)")
    uid = linked_id(flows[0], key)
    if uid is None:
        raise exceptions.CommandError("this flow is not linked (no upstream record decided it)")
    other = find_flow(uid)
    v = view()
    if other is not None and v is not None:
        v.focus.flow = other
    return uid
