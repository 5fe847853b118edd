"""The gateway matrix live (tests/support/gateway_matrix.py): the real LiteLLM proxy and
Portkey gateway, installed by the test command at their pinned versions
(scripts/install-gateways), run every cell again, raw, through the sidecar's client leg and
through both of its legs, and must still do what was captured in recordings/gateways/ (a
gateway, the sidecar or a fake that changed shows here). The captures' replay in process:
tests/addons/test_gateway_matrix.py."""

from __future__ import annotations

import json

import gateway_matrix as gm
import gateway_recordings as gr
import pytest
import realcpa_matrix as m
import realgateways as rg
from support import show_logs_on_failure

BY_KEY = {c.key: c for c in gr.load()}


@pytest.mark.parametrize("gateway", rg.GATEWAYS)
def test_live_matrix_is_what_was_captured(gateway, tmp_path, request):
    """Every cell of one gateway, live on its three legs: the captured outcomes."""
    rg.require(gateway)
    live = gm.Live(tmp_path)
    try:
        st = live.get(gateway)
        show_logs_on_failure(request, st.procs())
        diffs = []
        for g, p, api, t in gm.cells([gateway]):
            rec = BY_KEY[(g, p, api, t)].meta["outcome"]
            for _attempt in range(gr.ATTEMPTS):
                o = gm.outcomes(gm.run_cell(live, g, p, api, t))
                if all(m.same(o[leg], rec[leg]) for leg in gm.LEGS):
                    break
            else:
                diffs += [f"{p} {api} {t} {leg}: {json.dumps(o[leg])}\n   captured {json.dumps(rec[leg])}"
                          for leg in gm.LEGS if not m.same(o[leg], rec[leg])]  # fmt: skip
        assert not diffs, "\n".join(diffs)
    finally:
        live.close()
