"""What the sidecar cannot tell a client through a real gateway, cell by cell, with why.

The truth of a gateway cell is the real-CPA matrix's (tests/support/matrix_truth.py: the
provider's own ending in the client API's terms, gateway_matrix.told). Through the client
leg the sidecar tells it wherever the gateway's stream still shows it; :data:`CLIENT_LEG`
lists the cells where the gateway dropped every trace of it (only the provider's own
stream says what happened), :data:`BOTH_LEGS` those that both legs still cannot tell.
tests/addons/test_gateway_matrix.py keeps both exact: every cell not told true is listed,
and every entry has a cell not told true.
"""

from __future__ import annotations

CLIENT_LEG: dict[tuple[str, str, str, str], str] = {}
"""(gateway, provider, client API, turn) -> why its client stream cannot show the turn's truth."""

BOTH_LEGS: dict[tuple[str, str, str, str], str] = {}
"""(gateway, provider, client API, turn) -> why not even both legs tell it."""


def why(gateway: str, provider: str, api: str, turn: str, leg: str) -> str:
    table = CLIENT_LEG if leg == "client" else BOTH_LEGS
    return table.get((gateway, provider, api, turn), "(no reason recorded)")
