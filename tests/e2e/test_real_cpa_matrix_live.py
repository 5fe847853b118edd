"""The real-CPA matrix live (tests/support/realcpa_matrix.py): with the CPA binaries
(``STREAMFIX_CPA_BIN_DIR``) every cell of v7.2.89 and v7.2.140 is run again, raw and through the
real sidecar, and must still be what was captured in recordings/real-cpa/ (a CPA build, the
sidecar or a fake that changed shows here). The captures' replay in process:
tests/addons/test_real_cpa_matrix.py."""

from __future__ import annotations

import json

import matrix_recordings as mr
import pytest
import realcpa
import realcpa_matrix as m

BY_KEY = {c.key: c for c in mr.load()}
same = m.same


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    if not m.versions_here():
        pytest.skip(realcpa.missing_reason("v7.2.140"))
    lv = m.Live(tmp_path_factory.mktemp("matrix"))
    yield lv
    lv.close()


@pytest.mark.parametrize("version", m.VERSIONS)
@pytest.mark.parametrize("path", m.PATHS)
def test_live_matrix_is_what_was_captured(live, version, path):
    """Every cell of one build and path, live, raw and through the real sidecar: what the
    capture says (a CPA build or the sidecar that changed, or a fake that did, shows here)."""
    if realcpa.binary(version) is None:
        pytest.skip(realcpa.missing_reason(version))
    diffs = []
    for v, p, api, t in m.cells([version], [path]):
        rec = BY_KEY[(v, p, api, t)].meta["outcome"]
        for _attempt in range(mr.ATTEMPTS):  # CPA's WebSocket races (matrix_recordings.consistent)
            c = m.run_cell(live, v, p, api, t)
            raw = m.outcome(api, c["raw"].body, c["raw"].status, c["request"])
            fixed = m.outcome(api, c["sidecar"].body, c["sidecar"].status, c["request"])
            ws = api == "responses-ws"
            if same(raw, rec["raw"], ws) and same(fixed, rec["sidecar"], ws):
                break
        else:
            diffs.append(
                f"{api} {t}: raw {json.dumps(raw)}\n   captured {json.dumps(rec['raw'])}\n"
                f"   sidecar {json.dumps(fixed)}\n   captured {json.dumps(rec['sidecar'])}"
            )
    assert not diffs, "\n".join(diffs)
