"""Test-only servers: an unfixed CPA's Devin path (``cpa_standin.py``) and a fake Devin
Connect-RPC upstream (``fake_devin.py``). Run one by hand with
``.venv/bin/python tests/support/standins/fake_devin.py --port 0`` (``--help`` for the rest)."""
